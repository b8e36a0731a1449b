"""What the workflow host tells a run's reader about a run whose record its first step has not
saved yet (a plan or debate scheduled a moment ago), and how a workflow and an activity it
registers read their input and record their result."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from dapr.ext.workflow import DaprWorkflowContext, WorkflowStatus
from pydantic import BaseModel

from agora.runtime.workflows import ActivityRef, Steps, WorkflowHost, WorkflowRef
from tests.unit.workflow_replay import ScriptedContext


class Begin(BaseModel):
    question: str


@dataclass
class State:
    runtime_status: WorkflowStatus
    serialized_input: str | None
    created_at: datetime


class Client:
    def __init__(self, state: State | None) -> None:
        self.state = state

    async def get_workflow_state(self, instance_id: str, fetch_payloads: bool = True) -> State | None:
        return self.state


def host_with(state: State | None) -> WorkflowHost:
    host = object.__new__(WorkflowHost)  # no sidecar: only its client is asked
    host.client = Client(state)  # type: ignore[assignment]
    return host


SCHEDULED = datetime(2026, 11, 27, 4, 0, 0)  # the engine's naive UTC


@pytest.mark.parametrize("status", [WorkflowStatus.PENDING, WorkflowStatus.RUNNING])
async def test_a_run_scheduled_or_running_gives_its_input_and_when_it_was_scheduled(
    status: WorkflowStatus,
) -> None:
    host = host_with(State(status, Begin(question="q").model_dump_json(), SCHEDULED))

    assert await host.starting("run-1", Begin) == (Begin(question="q"), SCHEDULED.replace(tzinfo=UTC))


@pytest.mark.parametrize(
    "status", [WorkflowStatus.COMPLETED, WorkflowStatus.FAILED, WorkflowStatus.TERMINATED]
)
async def test_a_run_that_ended_without_its_record_is_not_shown_as_starting(status: WorkflowStatus) -> None:
    host = host_with(State(status, Begin(question="q").model_dump_json(), SCHEDULED))

    assert await host.starting("run-1", Begin) is None


async def test_no_run_is_no_run() -> None:
    assert await host_with(None).starting("run-1", Begin) is None


# -- registration: a workflow's and an activity's JSON as the engine records it ---------------------


class Asked(BaseModel):
    question: str


class Answered(BaseModel):
    answer: str
    at: datetime


ASK = ActivityRef("test.ask", Asked, Answered)
CONVERSATION = WorkflowRef("test.conversation", Asked, Answered | None)


def conversation(ctx: DaprWorkflowContext, asked: Asked) -> Steps[Answered | None]:
    return (yield from ASK.run(ctx, asked))


class Runtime:
    """What the host hands the engine: the functions it registers, by name."""

    def __init__(self) -> None:
        self.registered: dict[str, Any] = {}

    def register_workflow(self, fn: Any, *, name: str) -> None:
        self.registered[name] = fn

    def register_activity(self, fn: Any, *, name: str) -> None:
        self.registered[name] = fn


def registering() -> tuple[WorkflowHost, Runtime]:
    host = object.__new__(WorkflowHost)  # no sidecar: only its registrations are read
    runtime = Runtime()
    host._runtime = runtime  # type: ignore[assignment]
    host._started, host._loop = False, None
    return host, runtime


def test_a_workflow_reads_its_input_from_json_and_records_its_result_as_json() -> None:
    host, runtime = registering()
    host.workflow(CONVERSATION, conversation)
    answered = Answered(answer="yes", at=SCHEDULED.replace(tzinfo=UTC))
    ctx = ScriptedContext(lambda step: answered.model_dump(mode="json"))

    recorded = ctx.run(runtime.registered["test.conversation"], {"question": "q"})

    assert ctx.activities("test.ask") == [Asked(question="q")]
    assert recorded == {"answer": "yes", "at": "2026-11-27T04:00:00Z"}


async def test_an_activity_reads_its_input_into_its_model_and_records_its_result_as_json() -> None:
    host, runtime = registering()
    host._loop = asyncio.get_running_loop()
    given: list[Asked] = []

    async def ask(asked: Asked) -> Answered:
        given.append(asked)
        return Answered(answer=asked.question.upper(), at=SCHEDULED.replace(tzinfo=UTC))

    host.activity(ASK, ask)
    recorded = await runtime.registered["test.ask"](None, {"question": "q"})

    assert given == [Asked(question="q")]
    assert recorded == {"answer": "Q", "at": "2026-11-27T04:00:00Z"}
