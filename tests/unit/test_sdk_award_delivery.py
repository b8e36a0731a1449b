"""An award is run at once on its first delivery; one that may have been handled before (old
enough to be a redelivery, or from a board that does not date its awards) is checked with the
board first. A run that ends in its award's delivery takes no workflow and no acknowledgment;
one that lasts longer is stopped, handed to its workflow, and its award acknowledged."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from agora.core.market import AllocationResult, AllocationStatus, Bid, BidScore, TaskOutcome, TaskSpec
from agora.core.messages import AwardAcknowledgement, TaskAwarded
from agora.core.task_lifecycle import AwardAttempt, TaskRecord
from agora.runtime.interfaces import TaskInterface
from agora.runtime.pubsub import RejectMessage
from agora.runtime.workflows import WorkflowHost, WorkflowRef
from agora.sdk import Agent
from agora.sdk._agent import HandlerResult
from agora.sdk._app_activities import RunActivities
from agora.sdk._app_intake import FRESH_AWARD_SECONDS, AwardIntake, first_delivery
from agora.sdk._app_run import AgentRunReport, AgentRunStart, RunProgress

NOW = datetime(2026, 11, 27, 7, 0, tzinfo=UTC)


def award(awarded_at: datetime | None, spec: TaskSpec | None = None) -> TaskAwarded:
    bid = Bid(
        task_id="t1", agent_id="a1", self_reported_success_prob=0.9, estimated_cost_usd=0.1, estimated_steps=2
    )
    score = BidScore(
        agent_id="a1", bid_id=bid.bid_id, raw_success_prob=0.9, calibrated_success_prob=0.9,
        reputation_score=0.5, cost_score=0.5, composite=0.5, ucb_bonus=0.0, final_score=0.5,
    )  # fmt: skip
    return TaskAwarded(
        task_id="t1",
        agent_id="a1",
        spec=spec or TaskSpec(task_id="t1", description="d", required_skills=["s"]),
        bid=bid,
        score=score,
        award_token="t" * 32,
        attempt=2,
        awarded_at=awarded_at,
    )


def test_a_young_award_is_a_first_delivery_and_an_old_or_undated_one_is_checked() -> None:
    assert first_delivery(award(NOW - timedelta(seconds=1)), NOW)
    assert first_delivery(award(NOW + timedelta(seconds=1)), NOW)  # the board's clock a little ahead
    # The broker redelivers after 15 s: such an award, or one that waited in it, is checked.
    assert not first_delivery(award(NOW - timedelta(seconds=FRESH_AWARD_SECONDS + 0.1)), NOW)
    assert not first_delivery(award(NOW - timedelta(seconds=15)), NOW)
    assert not first_delivery(award(None), NOW)
    assert FRESH_AWARD_SECONDS * 3 <= 15


# -- taking an award, without the app ---------------------------------------------------------------


async def done(_: TaskAwarded) -> HandlerResult:
    return HandlerResult(success=True)


AGENTS = {"a1": Agent("a1", handler=done, skills=["s"])}


def outcome(of: TaskAwarded) -> TaskOutcome:
    return TaskOutcome(task_id=of.task_id, agent_id=of.agent_id, actual_success=True, actual_cost_usd=0.0,
                       actual_steps=1, award_token=of.award_token)  # fmt: skip


class Board:
    """One task's record on the board: what `verify_award` answers, and the awards acknowledged."""

    def __init__(self, record: TaskRecord | None = None) -> None:
        self.record = record
        self.verified: list[AwardAcknowledgement] = []
        self.acknowledged: list[AwardAcknowledgement] = []

    async def verify_award(self, held: AwardAcknowledgement) -> TaskRecord:
        self.verified.append(held)
        assert self.record is not None
        return self.record

    async def acknowledge_award(self, held: AwardAcknowledgement) -> TaskRecord:
        self.acknowledged.append(held)
        return self.record or TaskRecord(spec=award(None).spec)


class Workflows:
    def __init__(self) -> None:
        self.started: list[tuple[str, str]] = []

    async def start_once(self, workflow: WorkflowRef[Any, Any], instance_id: str, argument: Any) -> bool:
        self.started.append((workflow.name, instance_id))
        return True


class Runs:
    """The run's steps: `execute` takes `run_s` and comes to `progress`."""

    def __init__(self, run_s: float, progress: RunProgress) -> None:
        self._run_s = run_s
        self._progress = progress
        self.reporting: set[str] = set()
        self.executed: list[str] = []
        self.stopped: list[str] = []
        self.reported: list[TaskOutcome] = []

    async def execute(self, start: AgentRunStart) -> RunProgress:
        self.executed.append(start.instance)
        try:
            await asyncio.sleep(self._run_s)
        except asyncio.CancelledError:
            self.stopped.append(start.instance)
            raise
        return self._progress

    async def report(self, report: AgentRunReport) -> None:
        self.reported.append(report.outcome)


def spawn(work: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    return asyncio.create_task(work, name=name)


def intake(board: Board, workflows: Workflows, runs: Runs, inline_run_seconds: float = 5.0) -> AwardIntake:
    tasks = cast(Callable[[str], TaskInterface], lambda task_id: board)
    return AwardIntake(AGENTS, tasks, cast(WorkflowHost, workflows), cast(RunActivities, runs), spawn,
                       inline_run_seconds)  # fmt: skip


def held_by(given: TaskAwarded, *, acknowledged: bool, done_with: TaskOutcome | None = None) -> TaskRecord:
    """The board's record of `given`, the task's second award (the first one expired)."""
    now = datetime.now(UTC)
    allocation = AllocationResult(task_id=given.task_id, status=AllocationStatus.ALLOCATED,
                                  winning_agent_id=given.agent_id, winning_bid=given.bid)  # fmt: skip
    awards = [
        AwardAttempt(agent_id="a0", awarded_at=now, expired_at=now),
        AwardAttempt(agent_id=given.agent_id, awarded_at=now, acknowledged_at=now if acknowledged else None),
    ]
    status = AllocationStatus.ALLOCATED if done_with is None else AllocationStatus.COMPLETED
    return TaskRecord(spec=given.spec, status=status, allocation=allocation, awards=awards, outcome=done_with)


async def test_an_award_to_another_app_s_agent_is_left_alone() -> None:
    board, workflows = Board(), Workflows()
    runs = Runs(0.0, RunProgress(reported=True))
    given = award(datetime.now(UTC)).model_copy(update={"agent_id": "b9"})

    await intake(board, workflows, runs).on_award(given)

    assert (board.verified, workflows.started, runs.executed) == ([], [], [])


async def test_a_first_delivery_s_run_that_ends_in_it_takes_no_workflow_and_no_acknowledgment() -> None:
    given = award(datetime.now(UTC))
    board, workflows = Board(), Workflows()
    runs = Runs(0.0, RunProgress(outcome=outcome(given), reported=True))

    await intake(board, workflows, runs).on_award(given)

    assert runs.executed == ["run.t1.2"]
    assert (board.verified, workflows.started, board.acknowledged) == ([], [], [])


async def test_a_run_outlasting_its_delivery_is_stopped_and_its_workflow_holds_the_acknowledged_award() -> (
    None
):
    given = award(datetime.now(UTC))
    board, workflows = Board(), Workflows()
    runs = Runs(10.0, RunProgress(outcome=outcome(given), reported=True))

    await intake(board, workflows, runs, inline_run_seconds=0.05).on_award(given)

    assert runs.stopped == ["run.t1.2"]
    assert workflows.started == [("agent_run", "run.t1.2")]
    assert board.acknowledged == [AwardAcknowledgement(agent_id="a1", award_token=given.award_token)]


async def test_an_agent_that_does_not_run_inline_has_its_workflow_take_the_award_at_once() -> None:
    given = award(datetime.now(UTC))
    board, workflows = Board(), Workflows()
    runs = Runs(0.0, RunProgress(outcome=outcome(given), reported=True))
    elsewhere = Agent("a1", handler=done, skills=["s"])
    elsewhere.runs_inline = False
    tasks = cast(Callable[[str], TaskInterface], lambda task_id: board)
    taking = AwardIntake({"a1": elsewhere}, tasks, cast(WorkflowHost, workflows), cast(RunActivities, runs),
                         spawn, 5.0)  # fmt: skip

    await taking.on_award(given)

    assert runs.executed == [], "not started in the delivery, where it could be stopped and started again"
    assert workflows.started == [("agent_run", "run.t1.2")]
    assert board.acknowledged == [AwardAcknowledgement(agent_id="a1", award_token=given.award_token)]


async def test_a_run_paused_in_its_delivery_is_handed_to_its_workflow() -> None:
    given = award(datetime.now(UTC))
    board, workflows = Board(), Workflows()
    runs = Runs(0.0, RunProgress(waiting_on="esc-1"))

    await intake(board, workflows, runs).on_award(given)

    assert (runs.executed, workflows.started) == (["run.t1.2"], [("agent_run", "run.t1.2")])
    assert len(board.acknowledged) == 1


async def test_a_redelivered_award_its_workflow_holds_goes_to_that_workflow_without_a_run() -> None:
    given = award(datetime.now(UTC) - timedelta(seconds=30))
    board, workflows = Board(held_by(given, acknowledged=True)), Workflows()
    runs = Runs(0.0, RunProgress(reported=True))

    await intake(board, workflows, runs).on_award(given)

    assert board.verified == [AwardAcknowledgement(agent_id="a1", award_token=given.award_token)]
    assert workflows.started == [("agent_run", "run.t1.2")]
    assert (runs.executed, board.acknowledged) == ([], [])


async def test_a_redelivered_award_whose_task_is_done_reports_its_outcome_again_and_runs_nothing() -> None:
    given = award(datetime.now(UTC) - timedelta(seconds=30))
    ended = outcome(given)
    board, workflows = Board(held_by(given, acknowledged=True, done_with=ended)), Workflows()
    runs = Runs(0.0, RunProgress(reported=True))

    await intake(board, workflows, runs).on_award(given)

    assert runs.reported == [ended]
    assert (runs.executed, workflows.started, board.acknowledged) == ([], [], [])


async def test_a_redelivered_award_the_board_s_record_disagrees_with_is_rejected() -> None:
    given = award(datetime.now(UTC) - timedelta(seconds=30))
    other = given.model_copy(update={"spec": given.spec.model_copy(update={"description": "another"})})
    board, workflows = Board(held_by(other, acknowledged=False)), Workflows()
    runs = Runs(0.0, RunProgress(reported=True))

    with pytest.raises(RejectMessage, match="does not match the task board's record"):
        await intake(board, workflows, runs).on_award(given)
    assert (runs.executed, workflows.started) == ([], [])
