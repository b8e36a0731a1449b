"""What the workflow host tells a run's reader about a run whose record its first step has not
saved yet (a plan or debate scheduled a moment ago)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from dapr.ext.workflow import WorkflowStatus
from pydantic import BaseModel

from agora.runtime.workflows import WorkflowHost


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
