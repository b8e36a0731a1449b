"""The market as an A2A agent, in its pure parts: a board record read as an A2A task (every
status, a person deciding, the outcome as an artifact), a board event as A2A events, a message
as a task (skills from metadata or the text, the task's terms, refusals that say what to send),
and the card's skills."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InternalError, InvalidParamsError
from google.protobuf.json_format import MessageToDict

from agora.console.a2a_server import (
    STATES,
    MarketAgent,
    NoSkillNamed,
    _history_cut,
    _updates,
    a2a_task,
    dispute_answer,
    dispute_of,
    list_status_refusal,
    market_card,
    market_skills,
    task_id_of,
    task_spec_of,
)
from agora.console.auth import Person
from agora.console.auth import Role as PersonRole
from agora.core.acceptance import DisputeVerdict
from agora.core.contracts import EscalationList, RegisteredAgent
from agora.core.market import AllocationStatus, TaskOutcome, TaskSpec
from agora.core.task_events import task_events
from agora.core.task_lifecycle import StatusChange, TaskRecord, cancel, dispute
from agora.runtime.event_streams import sse


def record(status: AllocationStatus, **fields: object) -> TaskRecord:
    spec = TaskSpec(task_id="t-1", description="Count the words", required_skills=["word_count"])
    history = [StatusChange(status=AllocationStatus.PENDING), StatusChange(status=status)]
    return TaskRecord.model_validate(
        {
            "spec": spec,
            "status": status,
            "history": history if status is not AllocationStatus.PENDING else history[:1],
            **fields,
        }
    )


def message(*texts: str, **metadata: Any) -> Message:
    sent = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text=t) for t in texts])
    if metadata:
        sent.metadata.update(metadata)
    return sent


def test_every_board_status_has_an_a2a_state_and_a_person_deciding_is_input_required() -> None:
    assert set(STATES) == set(AllocationStatus)
    assert a2a_task(record(AllocationStatus.PENDING)).status.state == TaskState.TASK_STATE_SUBMITTED
    working = record(AllocationStatus.ALLOCATED)
    assert a2a_task(working).status.state == TaskState.TASK_STATE_WORKING
    waiting = a2a_task(working, waiting_on="esc-9")
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "escalation esc-9" in waiting.status.message.parts[0].text


def test_an_ended_task_carries_its_outcome_as_an_artifact_and_its_request_as_history() -> None:
    outcome = TaskOutcome(
        task_id="t-1",
        agent_id="counter",
        actual_success=True,
        actual_cost_usd=0.01,
        actual_steps=1,
        summary="3",
    )
    task = a2a_task(record(AllocationStatus.COMPLETED, outcome=outcome))
    assert task.id == task.context_id == "t-1"
    assert task.status.state == TaskState.TASK_STATE_COMPLETED and task.status.message.parts[0].text == "3"
    [artifact] = task.artifacts
    assert artifact.parts[0].text == "3"
    assert artifact.parts[1].data.struct_value.fields["agent_id"].string_value == "counter"
    assert task.history[0].role == Role.ROLE_USER and task.history[0].parts[0].text == "Count the words"
    assert task.status.timestamp.seconds > 0


def test_a_rejection_says_the_market_s_reason() -> None:
    rejected = record(
        AllocationStatus.REJECTED,
        allocation={"task_id": "t-1", "status": "REJECTED", "reject_reason": "no capable agents"},
    )
    status = a2a_task(rejected).status
    assert status.state == TaskState.TASK_STATE_REJECTED
    assert status.message.parts[0].text == "rejected by the market: no capable agents"


def test_a_task_a_person_cancelled_is_canceled_with_who_and_why_in_its_status_and_stream() -> None:
    spec = TaskSpec(task_id="t-1", description="Count the words", required_skills=["word_count"])
    cancelled = cancel(TaskRecord(spec=spec), "alice", "not needed", datetime.now(UTC))
    task = a2a_task(cancelled)
    assert task.status.state == TaskState.TASK_STATE_CANCELED
    assert task.status.message.parts[0].text == "CANCELLED by alice: not needed"
    updates = [u for event in task_events(cancelled) for u in _updates(cancelled, event)]
    last = updates[-1]
    assert isinstance(last, TaskStatusUpdateEvent) and last.status.state == TaskState.TASK_STATE_CANCELED
    assert last.status.message.parts[0].text == "CANCELLED by alice: not needed"


def test_board_events_become_status_updates_and_the_outcome_an_artifact() -> None:
    ended = failed_with_outcome()
    updates = [u for event in task_events(ended) for u in _updates(ended, event)]
    kinds = [type(u).__name__ for u in updates]
    assert kinds == ["TaskStatusUpdateEvent", "TaskArtifactUpdateEvent", "TaskStatusUpdateEvent"], kinds
    first, artifact, last = updates
    assert isinstance(first, TaskStatusUpdateEvent) and first.status.state == TaskState.TASK_STATE_SUBMITTED
    assert isinstance(artifact, TaskArtifactUpdateEvent) and artifact.artifact.parts[0].text == "no"
    assert isinstance(last, TaskStatusUpdateEvent) and last.status.state == TaskState.TASK_STATE_FAILED


def test_a_message_s_skills_come_from_its_metadata_else_from_the_skills_its_text_names() -> None:
    named = task_spec_of(message("Please do a word_count of this"), ["word_count", "translation"])
    assert named.required_skills == ["word_count"] and named.description == "Please do a word_count of this"
    given = task_spec_of(message("Count", skills=["translation"], budget_usd=0.5), ["word_count"])
    assert given.required_skills == ["translation"] and given.budget_usd == 0.5
    assert given.task_id == task_id_of(message("Count")), "the message's id names the task"
    assert task_spec_of(message("a", "b", skills=["x"]), []).description == "a\nb"


@pytest.mark.parametrize(
    ("sent", "refusal"),
    [
        (message("Count", skills="word_count"), "must be a list of skill tags"),
        (message("   "), "at least one with text"),
        (Message(message_id="m-2", parts=[Part(url="https://example.test/file")]), "text parts only"),
        (message("x" * 20_000, skills=["s"]), "at most 16384"),
        (message("Count", skills=["s"], min_success_threshold=2), "min_success_threshold"),
        (Message(parts=[Part(text="Count")]), "needs a messageId"),
    ],
)
def test_a_message_the_market_cannot_take_is_refused_with_what_to_send(sent: Message, refusal: str) -> None:
    with pytest.raises(InvalidParamsError, match=refusal):
        task_spec_of(sent, ["word_count"])


def test_a_message_that_names_no_skill_is_a_task_rejected_with_the_reason_not_a_protocol_error() -> None:
    sent = message("Do something nice")
    with pytest.raises(NoSkillNamed) as refused:
        task_spec_of(sent, ["word_count"])
    task = refused.value.task()
    assert task.id == task_id_of(sent) and task.status.state == TaskState.TASK_STATE_REJECTED
    assert "name the skills the task needs" in task.status.message.parts[0].text


def test_a_message_that_names_no_skill_takes_the_console_s_default_skills_when_it_has_some() -> None:
    vague = task_spec_of(message("Do something nice"), ["word_count"], ["general"])
    assert vague.required_skills == ["general"]
    named = task_spec_of(message("word_count of this"), ["word_count"], ["general"])
    assert named.required_skills == ["word_count"], "a skill the text names comes before the default"


def test_a_message_s_metadata_may_say_how_its_result_is_checked_in_the_task_s_own_terms() -> None:
    check = {"kind": "expected", "match": "number", "expected": "1325", "tolerance": 0.5}
    spec = task_spec_of(message("What is 585 + 740?", skills=["sums"], acceptance={"check": check}), [])
    assert spec.acceptance is not None and spec.acceptance.check.kind == "expected"
    assert spec.acceptance.check.model_dump()["tolerance"] == 0.5
    with pytest.raises(InvalidParamsError, match="acceptance"):
        task_spec_of(message("x", skills=["sums"], acceptance={"check": {"kind": "telepathy"}}), [])


def test_a_dispute_is_the_message_s_verdict_and_its_text_why_in_the_sender_s_name() -> None:
    made = dispute_of(message("  it misses two papers ", dispute="failed"), "alice")
    assert (made.disputed_by, made.reason, made.verdict) == (
        "alice",
        "it misses two papers",
        DisputeVerdict.FAILED,
    )
    for wrong, refusal in (
        (message("why", dispute="wrong"), "must be one of passed, failed"),
        (message("why", dispute=1), "must be one of passed, failed"),
        (message("   ", dispute="passed"), "why it is disputed"),
    ):
        with pytest.raises(InvalidParamsError, match=refusal):
            dispute_of(wrong, "alice")


def test_a_dispute_s_answer_references_the_task_and_says_how_it_stands() -> None:
    outcome = TaskOutcome(task_id="t-1", agent_id="a", actual_success=True, actual_cost_usd=0.0,
                          actual_steps=1, summary="done")  # fmt: skip
    ended = record(AllocationStatus.COMPLETED, outcome=outcome)
    disputed = dispute(ended, "alice", "it misses two papers", DisputeVerdict.FAILED, ended.history[-1].at)
    answer = dispute_answer(disputed, "m-9")
    assert (
        list(answer.reference_task_ids) == ["t-1"] and not answer.task_id and answer.role == Role.ROLE_AGENT
    )
    assert answer.parts[0].text == "task t-1 is FAILED as disputed by alice: it misses two papers"


def test_the_card_lists_one_skill_per_tag_offered_and_asks_for_a_bearer_key() -> None:
    now = datetime.now(UTC)
    agents = [
        RegisteredAgent(agent_id="a", agent_name="A", skill_tags=["word_count", "translation"]),
        RegisteredAgent(agent_id="b", agent_name="B", skill_tags=["word_count"]),
        RegisteredAgent(agent_id="c", agent_name="C", skill_tags=["secret"], suspended_until=now),
    ]
    skills = market_skills(agents)
    assert [s.id for s in skills] == ["translation", "word_count"], (
        "a suspended agent's skills are not offered"
    )
    assert "2 agent(s)" in skills[1].description
    card = market_card("http://console.test/", "1.2.3", skills)
    assert card.supported_interfaces[0].url == "http://console.test/a2a"
    assert card.security_schemes["consoleBearer"].http_auth_security_scheme.scheme == "bearer"
    assert list(card.security_requirements[0].schemes) == ["consoleBearer"]
    # The public card names no credential, key or token (the A2A test kit's patterns for them).
    text = json.dumps(MessageToDict(card)).lower()
    assert not re.findall(r"api[_-]?key|secret|token|password|credential|bearer[_-]?token", text), text


@pytest.mark.parametrize(
    ("status", "refused"),
    [("INVALID_STATUS", True), (99, True), ("TASK_STATE_WORKING", False), (3, False), (None, False)],
)
def test_a_list_filtered_by_a_status_that_is_no_task_state_is_refused(status: object, refused: bool) -> None:
    params = {} if status is None else {"status": status}
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": params}).encode()
    refusal = list_status_refusal(body)
    assert (refusal is not None) is refused, refusal
    if refusal is not None:
        assert refusal[0] == 7 and "is not a task state" in refusal[1]
    other = json.dumps({"jsonrpc": "2.0", "id": 8, "method": "GetTask", "params": {"status": "X"}}).encode()
    assert list_status_refusal(other) is None and list_status_refusal(b"not json") is None


@pytest.mark.parametrize(("asked", "kept"), [(None, 3), (0, 0), (2, 2), (100, 3)])
def test_history_length_keeps_the_newest_messages(asked: int | None, kept: int) -> None:
    task = a2a_task(record(AllocationStatus.ALLOCATED))
    for n in range(2):
        task.history.append(Message(message_id=f"later-{n}", role=Role.ROLE_AGENT, parts=[Part(text="x")]))
    for params in (ListTasksRequest(history_length=asked), GetTaskRequest(id="t-1", history_length=asked)):
        cut = Task()
        cut.CopyFrom(task)
        ids = [m.message_id for m in _history_cut(cut, params).history]
        assert ids == [m.message_id for m in task.history][len(task.history) - kept :], (asked, ids)


class _Board:
    """The board's client, answering one task under way."""

    async def get(self, task_id: str) -> TaskRecord:
        return record(AllocationStatus.ALLOCATED)


class _NoneWaiting:
    async def listed(self, *args: object) -> EscalationList:
        return EscalationList(status=None, total=0, escalations=[])


async def test_a_console_follows_at_most_its_streams_and_a_closed_one_frees_its_place() -> None:
    agent = MarketAgent(_Board(), None, _NoneWaiting(), max_streams=1)  # type: ignore[arg-type]  # doubles
    context = ServerCallContext()
    context.state["person"] = Person(name="pat", role=PersonRole.VIEWER)
    first = agent.on_subscribe_to_task(SubscribeToTaskRequest(id="t-1"), context)
    assert isinstance(await anext(first), Task) and agent.streams == 1
    with pytest.raises(InternalError, match="UNAVAILABLE: this console follows 1 streams already"):
        await anext(agent.on_subscribe_to_task(SubscribeToTaskRequest(id="t-1"), context))
    await first.aclose()
    assert agent.streams == 0
    again = agent.on_subscribe_to_task(SubscribeToTaskRequest(id="t-1"), context)
    assert isinstance(await anext(again), Task)
    await again.aclose()


def failed_with_outcome() -> TaskRecord:
    outcome = TaskOutcome(
        task_id="t-1",
        agent_id="counter",
        actual_success=False,
        actual_cost_usd=0.0,
        actual_steps=1,
        summary="no",
    )
    return record(AllocationStatus.FAILED, outcome=outcome)


class _StreamingBoard:
    """The board's client, its task's event stream scripted: each call to `events` gives the next
    stream, in chunks of bytes as the sidecar passes them on."""

    def __init__(self, streams: list[list[bytes]]) -> None:
        self._streams = streams
        self.asked: list[str | None] = []

    async def get(self, task_id: str) -> TaskRecord:
        return failed_with_outcome()

    async def events(self, task_id: str, last_event_id: str | None = None) -> AsyncIterator[bytes]:
        self.asked.append(last_event_id)
        for chunk in self._streams.pop(0):
            yield chunk


async def test_a_stream_follows_the_board_s_events_and_resumes_one_that_dropped_it() -> None:
    ended = failed_with_outcome()
    pending, outcome, final = (sse(e.kind, e.model_dump_json(), e.seq) for e in task_events(ended))
    board = _StreamingBoard(
        [
            [outcome[:25].encode(), outcome[25:].encode(), sse("dropped", '{"reason": "behind"}').encode()],
            [outcome.encode(), final.encode(), sse("end", "{}").encode()],
        ]
    )
    agent = MarketAgent(board, None, _NoneWaiting())  # type: ignore[arg-type]  # doubles

    updates = [update async for update in agent._follow("t-1", seen=1)]

    assert board.asked == ["1", "2"], "resumed after the last event passed on"
    kinds = [type(u).__name__ for u in updates]
    assert kinds == ["TaskArtifactUpdateEvent", "TaskStatusUpdateEvent"], kinds
    last = updates[-1]
    assert isinstance(last, TaskStatusUpdateEvent) and last.status.state == TaskState.TASK_STATE_FAILED
    assert pending.startswith("id: 1\n")
