"""An agent app's run paused for a person: it waits on its escalation, goes on or ends as the
decision says, and a step that runs again (the app stopped before the workflow engine recorded
it) neither opens a second escalation nor applies a decision twice."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import cast

from agora.core.errors import AgoraError
from agora.core.escalation.checkpoints import CheckpointTrigger
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.escalation.record import EscalationStatus, ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.market import AllocationStatus, Bid, TaskSpec
from agora.core.messages import EscalationResolved, HandOver, TaskAwarded
from agora.core.models import CapabilityProfile
from agora.core.task_lifecycle import AwardAttempt, AwardNotHeld, TaskRecord
from agora.llm import ChatMessage, OfflineModelClient
from agora.runtime.interfaces import TaskInterface
from agora.sdk import Agent, Tool
from agora.sdk._app_run import AgentRunDecision
from agora.sdk._app_steps import execute_award, resume_award
from agora.sdk.runner import AgentRunner, AgentState, InMemoryStateStore, ReactStep, StepCheck
from agora.sdk.tools import ToolExecutor

TASK = "t-1"


class PauseFirstStep:
    """Pauses the run's first step on escalation `esc-1`."""

    async def check(self, state: AgentState, step: ReactStep) -> StepCheck:
        if state.iterations == 1:
            return StepCheck(action="pause", escalation_id="esc-1", reason="uncertain step")
        return StepCheck()


def answers(messages: Sequence[ChatMessage]) -> str:
    said = messages[-1].content
    answer = "after the decision" if said.startswith("A person answered") else "first try"
    return json.dumps({"thought": "t", "action": "final", "answer": answer, "confidence": 0.9})


def cautious(store: InMemoryStateStore) -> Agent:
    runner = AgentRunner(OfflineModelClient(overrides=answers), state_store=store, monitor=PauseFirstStep())
    profile = CapabilityProfile(agent_id="a1", agent_name="A1", skill_tags=["migration"], max_steps=4)
    return Agent.from_profile(profile, runner=runner)


def award() -> TaskAwarded:
    spec = TaskSpec(task_id=TASK, description="Migrate the orders table", required_skills=["migration"])
    bid = Bid(task_id=TASK, agent_id="a1", self_reported_success_prob=0.8, estimated_cost_usd=0.1,
              estimated_steps=1)  # fmt: skip
    return TaskAwarded.model_validate(
        {"task_id": TASK, "agent_id": "a1", "spec": spec, "bid": bid,
         "score": {"bid_id": bid.bid_id, "agent_id": "a1", "raw_success_prob": 0.8,
                   "calibrated_success_prob": 0.8, "reputation_score": 0.5, "cost_score": 0.5,
                   "composite": 0.6, "ucb_bonus": 0.0, "final_score": 0.6},
         "award_token": "award-token-0123456789"}
    )  # fmt: skip


class Board:
    """The task board's `hand_over` for the run's task: hands it to `b2`, or refuses with `refusal`."""

    def __init__(self, refusal: AgoraError | None = None) -> None:
        self.handed: list[HandOver] = []
        self._refusal = refusal

    def __call__(self, task_id: str) -> TaskInterface:
        assert task_id == TASK
        return cast(TaskInterface, self)

    async def hand_over(self, hand_over: HandOver) -> TaskRecord:
        if self._refusal is not None:
            raise self._refusal
        self.handed.append(hand_over)
        now = datetime.now(UTC)
        awards = [AwardAttempt(agent_id="a1", awarded_at=now), AwardAttempt(agent_id="b2", awarded_at=now)]
        return TaskRecord(spec=award().spec, status=AllocationStatus.ALLOCATED, awards=awards)


def decision(
    action: EscalationAction, prompt: str | None = None, escalation_id: str = "esc-1", to: str | None = None
) -> AgentRunDecision:
    return AgentRunDecision(
        award=award(),
        decided=EscalationResolved(
            escalation_id=escalation_id,
            waiting_party=WaitingParty(kind=WaitingPartyKind.SESSION, id=TASK),
            decision=EscalationResponse(action=action, modified_prompt=prompt, reassign_to=to),
            decided_by="alice",
            status=EscalationStatus.RESOLVED,
        ),
    )


async def test_a_paused_run_waits_and_a_step_run_again_waits_on_the_same_escalation() -> None:
    store = InMemoryStateStore()
    agent = cautious(store)

    first = await execute_award(agent, award(), store)
    again = await execute_award(agent, award(), store)

    assert first.outcome is None and first.waiting_on == "esc-1"
    assert again.outcome is None and again.waiting_on == "esc-1", "no second escalation"


async def test_modify_prompt_goes_on_with_the_new_prompt_and_a_repeat_changes_nothing() -> None:
    store = InMemoryStateStore()
    agent = cautious(store)
    await execute_award(agent, award(), store)

    decided = decision(EscalationAction.MODIFY_PROMPT, "Migrate it with a rollback plan")
    resumed = await resume_award(agent, decided, store, None, Board())
    repeated = await resume_award(agent, decided, store, None, Board())

    assert resumed.outcome is not None and resumed.outcome.actual_success
    assert resumed.outcome.summary == "after the decision" and resumed.outcome.actual_steps == 2
    state = await store.load("a1", TASK)
    assert state is not None
    assert any(
        "Use this prompt instead:\nMigrate it with a rollback plan" in m.content for m in state.messages
    )
    assert repeated == resumed, "the run no longer waits on esc-1: its outcome as it stands"


async def test_skip_ends_the_run_partial_and_abort_ends_it_failed() -> None:
    for action, partial in ((EscalationAction.SKIP, True), (EscalationAction.ABORT, False)):
        store = InMemoryStateStore()
        agent = cautious(store)
        await execute_award(agent, award(), store)

        ended = await resume_award(agent, decision(action), store, None, Board())

        assert ended.outcome is not None and not ended.outcome.actual_success
        assert ended.outcome.partial is partial and ended.outcome.summary == f"{action} by alice"


async def test_a_decision_on_another_escalation_does_not_move_the_run() -> None:
    store = InMemoryStateStore()
    agent = cautious(store)
    await execute_award(agent, award(), store)

    other = await resume_award(
        agent, decision(EscalationAction.RETRY, escalation_id="esc-9"), store, None, Board()
    )

    assert other.outcome is None and other.waiting_on == "esc-1"


async def test_reassign_hands_the_task_over_and_the_run_ends_without_an_outcome() -> None:
    store = InMemoryStateStore()
    agent = cautious(store)
    board = Board()
    await execute_award(agent, award(), store)

    handed = await resume_award(agent, decision(EscalationAction.REASSIGN, to="b2"), store, None, board)
    again = await resume_award(agent, decision(EscalationAction.REASSIGN, to="b2"), store, None, board)

    assert handed.outcome is None and handed.handed_over and again == handed
    [given] = board.handed
    assert (given.agent_id, given.to_agent, given.escalation_id) == ("a1", "b2", "esc-1")
    assert given.award_token == award().award_token and given.decided_by == "alice"
    state = await store.load("a1", TASK)
    assert state is not None and state.handed_over and state.reason == "handed over to b2 by alice"


async def test_a_hand_over_the_board_refuses_ends_the_run_failed_saying_why() -> None:
    store = InMemoryStateStore()
    agent = cautious(store)
    await execute_award(agent, award(), store)

    refused = Board(AwardNotHeld("task t-1 is not awarded to a1"))
    ended = await resume_award(agent, decision(EscalationAction.REASSIGN), store, None, refused)

    assert ended.outcome is not None and not ended.outcome.actual_success
    assert ended.outcome.summary.endswith(
        "reassign by alice could not be done: AWARD_NOT_HELD: task t-1 is not awarded to a1"
    ), ended.outcome.summary


class HoldFirstToolCall:
    """Lets every step run, and holds the run's first tool call before the tool runs (`esc-1`)."""

    def __init__(self) -> None:
        self.held = 0

    async def check(self, state: AgentState, step: ReactStep) -> StepCheck:
        return StepCheck()

    async def before_tool(self, state: AgentState, step: ReactStep) -> StepCheck:
        self.held += 1
        if self.held == 1:
            return StepCheck(action="pause", escalation_id="esc-1", reason="irreversible tool")
        return StepCheck()


async def test_skip_leaves_out_a_held_tool_call_and_the_run_goes_on() -> None:
    store = InMemoryStateStore()
    deleted: list[str] = []

    def drop_table(table: str) -> str:
        """Drop a table (cannot be undone)."""
        deleted.append(table)
        return f"dropped {table}"

    def turns(messages: Sequence[ChatMessage]) -> str:
        if any("A person answered" in m.content for m in messages):
            return json.dumps(
                {"thought": "t", "action": "final", "answer": "kept the table", "confidence": 0.9}
            )
        return json.dumps({"thought": "t", "action": "tool", "tool": "drop_table",
                           "arguments": {"table": "orders"}, "confidence": 0.7})  # fmt: skip

    runner = AgentRunner(
        OfflineModelClient(overrides=turns),
        ToolExecutor([Tool(drop_table)]),
        state_store=store,
        monitor=HoldFirstToolCall(),
    )
    profile = CapabilityProfile(agent_id="a1", agent_name="A1", skill_tags=["migration"], max_steps=4)
    agent = Agent.from_profile(profile, runner=runner)
    paused = await execute_award(agent, award(), store)
    assert paused.waiting_on == "esc-1" and deleted == []

    ended = await resume_award(agent, decision(EscalationAction.SKIP), store, None, Board())

    assert deleted == [], "the held call never ran"
    assert ended.outcome is not None and ended.outcome.actual_success and not ended.outcome.partial
    assert ended.outcome.summary == "kept the table"


class Parked:
    """The escalation service as the runner's escalator sees it: what was parked."""

    def __init__(self) -> None:
        self.parked: list[str] = []

    async def park(self, escalation_id: str, request: ParkRequest) -> None:
        self.parked.append(escalation_id)


async def test_a_task_s_own_checkpoint_trigger_holds_its_first_step_for_a_person() -> None:
    """The task's owner asks for a person before any step of a task that mentions production:
    the run parks before its first model call, whatever the agent's own triggers."""
    store = InMemoryStateStore()
    escalations = Parked()
    asked: list[Sequence[ChatMessage]] = []

    def model(messages: Sequence[ChatMessage]) -> str:
        asked.append(messages)
        return json.dumps({"thought": "t", "action": "final", "answer": "migrated", "confidence": 0.95})

    runner = AgentRunner(OfflineModelClient(overrides=model), state_store=store, escalator=escalations)
    profile = CapabilityProfile(agent_id="a1", agent_name="A1", skill_tags=["migration"], max_steps=4)
    agent = Agent.from_profile(profile, runner=runner)
    guarded = award()
    spec = guarded.spec.model_copy(
        update={
            "description": "Migrate the orders table in production",
            "checkpoints": [
                CheckpointTrigger(name="prod", prompt_contains=["production"], requires_confirmation=True)
            ],
        }
    )
    paused = await execute_award(agent, guarded.model_copy(update={"spec": spec}), store)

    assert paused.outcome is None and paused.waiting_on == f"{TASK}.checkpoint-1"
    assert escalations.parked == [f"{TASK}.checkpoint-1"] and asked == [], "held before its first model call"
