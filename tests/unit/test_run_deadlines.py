"""A task's `deadline_ms` bounds each run of it: counted from the award, a run still going at its
deadline is stopped and its task ends FAILED, its summary naming `DEADLINE_EXCEEDED`, with what
the run spent so far; where the run goes on (in its award's delivery or a step of its workflow)
an asyncio timeout stops it, and the run's workflow races each of its steps with a durable timer
at the same deadline, which ends what no process is left to stop (a run paused for a person)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from agora.core.errors import error_from, error_table
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.escalation.record import EscalationStatus, WaitingParty, WaitingPartyKind
from agora.core.market import AllocationStatus, Bid, TaskOutcome, TaskSpec
from agora.core.messages import CostEvent, EscalationResolved, TaskAwarded
from agora.core.models import CapabilityProfile
from agora.core.planning import Plan, PlanningConfig, SubGoal, SubGoalStatus, VerificationResult
from agora.core.plans.record import AttemptEnd
from agora.core.plans.run import after_attempt
from agora.core.plans.workflow import SubGoalJob
from agora.core.task_lifecycle import (
    MAX_RUN_DEADLINE,
    DeadlineExceeded,
    TaskRecord,
    deadline_exceeded,
    failure_code,
    failure_summary,
    run_deadline,
)
from agora.core.task_waits import TaskEnded
from agora.llm import ChatMessage, OfflineModelClient
from agora.planner.activities import PlannerActivities
from agora.planner.steps import offline_answers, replan
from agora.planner.workflow import Verify
from agora.runtime.interfaces import TaskInterface
from agora.runtime.workflows import decision_event
from agora.sdk import Agent, ModelRouter, ModelSpec, ModelTier, tool
from agora.sdk._app_deadlines import RunDeadlines, within_deadline
from agora.sdk._app_meter import RunMeter
from agora.sdk._app_run import (
    DEADLINE,
    EXECUTE,
    REPORT,
    RESUME,
    RUN_DEADLINES,
    AgentRunDecision,
    AgentRunReport,
    AgentRunStart,
    RunProgress,
    agent_run,
)
from agora.sdk._app_steps import charged, execute_award, resume_award
from agora.sdk._runner import RunStatus
from agora.sdk.runner import AgentRunner, AgentState, InMemoryStateStore, ReactStep, RunnerConfig, StepCheck
from agora.sdk.tools import ToolExecutor
from tests.unit.workflow_replay import Scheduled, ScriptedContext

TASK = "t-1"
AWARDED = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
STEP_PRICE = 0.001


# -- the pure parts -------------------------------------------------------------------------------


def spec(deadline_ms: int | None = 2_500) -> TaskSpec:
    return TaskSpec(
        task_id=TASK, description="Keep at it", required_skills=["patience"], deadline_ms=deadline_ms
    )


def test_a_run_s_deadline_is_the_task_s_deadline_ms_after_its_award() -> None:
    assert run_deadline(spec(2_500), AWARDED) == AWARDED + timedelta(milliseconds=2_500)
    assert run_deadline(spec(None), AWARDED) is None
    # deadline_ms has no upper bound of its own: the date stays computable.
    assert run_deadline(spec(10**18), AWARDED) == AWARDED + MAX_RUN_DEADLINE


def test_deadline_exceeded_is_a_typed_error_every_process_knows() -> None:
    assert error_table()["DEADLINE_EXCEEDED"] is DeadlineExceeded
    received = error_from("DEADLINE_EXCEEDED", "the run was still going", {"deadline_ms": 10})
    assert type(received) is DeadlineExceeded and received.details == {"deadline_ms": 10}


def outcome(summary: str, *, success: bool = False, partial: bool = False) -> TaskOutcome:
    return TaskOutcome(task_id=TASK, agent_id="a1", actual_success=success, partial=partial,
                       actual_cost_usd=0.0, actual_steps=0, summary=summary)  # fmt: skip


def test_a_failed_outcome_names_the_error_that_ended_its_run_and_no_other_outcome_does() -> None:
    assert failure_code(outcome("DEADLINE_EXCEEDED: the run was still going")) == "DEADLINE_EXCEEDED"
    assert failure_code(outcome("BUDGET_EXCEEDED: a1 spent $0.01")) == "BUDGET_EXCEEDED"
    assert failure_code(outcome("the agent gave up: no data")) is None
    assert failure_code(outcome("NOTE: not an error of the table")) is None
    assert failure_code(outcome("DEADLINE_EXCEEDED: but it did it", success=True)) is None
    assert failure_code(outcome("DEADLINE_EXCEEDED: part of it", partial=True)) is None


# -- a run bounded by its deadline where it goes on -----------------------------------------------------


async def test_a_run_still_going_at_its_deadline_is_stopped_for_what_the_deadline_answers() -> None:
    started: list[str] = []

    async def slow() -> str:
        started.append("slow")
        await asyncio.sleep(5)
        return "finished"

    async def at_deadline() -> str:
        return "stopped"

    began = time.monotonic()
    assert await within_deadline(datetime.now(UTC) + timedelta(seconds=0.1), slow, at_deadline) == "stopped"
    assert time.monotonic() - began < 1, "stopped at its deadline, not at its end"
    assert started == ["slow"]

    started.clear()
    passed = datetime.now(UTC) - timedelta(seconds=1)
    assert await within_deadline(passed, slow, at_deadline) == "stopped"
    assert started == [], "a deadline already passed does not start the run"

    async def quick() -> str:
        return "finished"

    assert await within_deadline(datetime.now(UTC) + timedelta(seconds=5), quick, at_deadline) == "finished"
    assert await within_deadline(None, quick, at_deadline) == "finished"


async def test_a_timeout_of_the_run_s_own_is_not_taken_for_its_deadline() -> None:
    async def times_out() -> str:
        raise TimeoutError("a tool of the run's own timed out")

    async def at_deadline() -> str:
        return "stopped"

    with pytest.raises(TimeoutError, match="tool of the run"):
        await within_deadline(datetime.now(UTC) + timedelta(seconds=5), times_out, at_deadline)


class Published:
    def __init__(self) -> None:
        self.events: list[Any] = []

    async def publish(self, channel: Any, payload: Any, *, message_id: str | None = None) -> str:
        self.events.append(payload)
        return message_id or ""


def cost_event(session_id: str, step_name: str, cost_usd: float) -> CostEvent:
    return CostEvent(agent_id="a1", session_id=session_id, step_name=step_name, model_id="m", input_tokens=10,
                     output_tokens=2, cost_usd=cost_usd, session_cost_usd=cost_usd)  # fmt: skip


async def test_the_meter_adds_a_turn_s_cost_events_to_what_the_run_s_earlier_turns_saved() -> None:
    published = Published()
    meter = RunMeter(published)
    earlier = AgentState(agent_id="a1", session_id=TASK, iterations=3, cost_usd=0.5, input_tokens=100,
                         output_tokens=20, tools_called=["add"])  # fmt: skip
    meter.begin("a1", TASK, earlier)

    await meter.publish(cast(Any, None), cost_event(TASK, "a1.step", 0.25))
    await meter.publish(cast(Any, None), cost_event(TASK, "a1.analysis", 0.125))
    await meter.publish(cast(Any, None), cost_event("another-task", "a1.step", 9.0))

    spent = meter.spent("a1", TASK)
    assert spent is not None
    assert (spent.cost_usd, spent.steps, spent.input_tokens, spent.output_tokens) == (0.875, 4, 120, 24)
    assert spent.tools_called == ["add"]
    assert len(published.events) == 3, "every event is published as before"
    assert meter.spent("a1", "another-task") is None, "a run not going on here is not metered"
    meter.forget("a1", TASK)
    assert meter.spent("a1", TASK) is None


# -- a runner's run at its deadline ----------------------------------------------------------------------


@tool
def wait_a_moment() -> str:
    """Nothing happens yet."""
    return "not yet"


def keeps_waiting(messages: Sequence[ChatMessage]) -> str:
    return json.dumps({"thought": "not yet", "action": "tool", "tool": "wait_a_moment", "arguments": {},
                       "confidence": 0.9})  # fmt: skip


MODEL = ModelSpec(model_id="slow", tier=ModelTier.BALANCED, input_usd_per_1k=0.01, output_usd_per_1k=0.02)


def dawdler(
    store: InMemoryStateStore, meter: RunMeter, monitor: Any = None, latency_s: float = 0.02
) -> Agent:
    """A priced agent that never finishes: every step calls a tool, each model call takes a while."""
    client = OfflineModelClient(model=MODEL.model_id, latency_s=latency_s, overrides=keeps_waiting)
    runner = AgentRunner(ModelRouter([MODEL], {MODEL.model_id: client}), ToolExecutor([wait_a_moment]),
                         state_store=store, cost_publisher=meter, monitor=monitor,
                         config=RunnerConfig(max_iterations=1_000))  # fmt: skip
    profile = CapabilityProfile(agent_id="a1", agent_name="A1", skill_tags=["patience"], max_steps=200,
                                cost_per_step_usd=STEP_PRICE)  # fmt: skip
    return Agent.from_profile(profile, runner=runner)


def award(deadline_ms: int | None = 2_500) -> TaskAwarded:
    bid = Bid(bid_id="bid-1", task_id=TASK, agent_id="a1", self_reported_success_prob=0.8,
              estimated_cost_usd=0.1, estimated_steps=100)  # fmt: skip
    return TaskAwarded.model_validate(
        {"task_id": TASK, "agent_id": "a1", "spec": spec(deadline_ms), "bid": bid,
         "score": {"bid_id": bid.bid_id, "agent_id": "a1", "raw_success_prob": 0.8,
                   "calibrated_success_prob": 0.8, "reputation_score": 0.5, "cost_score": 0.5,
                   "composite": 0.6, "ucb_bonus": 0.0, "final_score": 0.6},
         "award_token": "award-token-0123456789", "awarded_at": AWARDED}
    )  # fmt: skip


class Board:
    """The task board's record of the run's task: an outcome once one is recorded."""

    def __init__(self, recorded: TaskOutcome | None = None) -> None:
        self.outcome = recorded
        self.reads = 0

    def __call__(self, task_id: str) -> TaskInterface:
        assert task_id == TASK
        return cast(TaskInterface, self)

    async def get_task(self) -> TaskRecord:
        self.reads += 1
        status = AllocationStatus.ALLOCATED if self.outcome is None else AllocationStatus.FAILED
        return TaskRecord(spec=spec(), status=status, outcome=self.outcome)


def start(deadline: datetime | None) -> AgentRunStart:
    return AgentRunStart(award=award(), instance_id=f"run.{TASK}", deadline=deadline)


async def test_a_run_still_going_at_its_deadline_ends_failed_with_deadline_exceeded_and_what_it_spent() -> (
    None
):
    store, published = InMemoryStateStore(), Published()
    meter = RunMeter(published)
    agent = dawdler(store, meter, latency_s=0.05)  # its 200 steps would take 10 s and more
    deadlines = RunDeadlines({"a1": agent}, store, meter, Board())

    began = time.monotonic()
    ended = await deadlines.bounded(
        award(), f"run.{TASK}", datetime.now(UTC) + timedelta(seconds=1),
        lambda: execute_award(agent, award(), store, meter),
    )  # fmt: skip

    assert 0.9 <= time.monotonic() - began < 5, "stopped at its deadline, not after its 200 steps"
    done = ended.outcome
    assert done is not None and not done.actual_success and not done.partial
    assert done.summary.startswith("DEADLINE_EXCEEDED: "), done.summary
    assert failure_code(done) == "DEADLINE_EXCEEDED" and done.award_token == award().award_token
    # What it spent so far: every model call it made (as announced), and its price per step.
    steps = [e for e in published.events if e.step_name == "a1.step"]
    model_cost = sum(e.cost_usd for e in published.events)
    assert done.actual_steps == len(steps) > 0
    assert done.actual_cost_usd == charged(agent, model_cost, len(steps)) > len(steps) * STEP_PRICE
    assert done.input_tokens == sum(e.input_tokens for e in published.events) > 0
    assert meter.spent("a1", TASK) is None, "the run's meter is let go once it ended"


class PauseFirstStep:
    async def check(self, state: AgentState, step: ReactStep) -> StepCheck:
        if state.iterations == 1:
            return StepCheck(action="pause", escalation_id="esc-1", reason="uncertain step")
        return StepCheck()


def decided(action: EscalationAction) -> AgentRunDecision:
    return AgentRunDecision(
        award=award(),
        decided=EscalationResolved(
            escalation_id="esc-1", waiting_party=WaitingParty(kind=WaitingPartyKind.SESSION, id=TASK),
            decision=EscalationResponse(action=action), decided_by="alice", status=EscalationStatus.RESOLVED,
        ),
    )  # fmt: skip


async def test_a_paused_run_at_its_deadline_ends_failed_with_what_it_saved_and_no_decision_goes_on() -> None:
    store = InMemoryStateStore()
    meter = RunMeter(Published())
    agent = dawdler(store, meter, PauseFirstStep())
    paused = await execute_award(agent, award(), store, meter)
    assert paused.waiting_on == "esc-1"
    saved = await store.load("a1", TASK)
    assert saved is not None and saved.cost_usd > 0
    meter.forget("a1", TASK)  # the turn ended with the pause
    board = Board()
    deadlines = RunDeadlines({"a1": agent}, store, meter, board)

    ended = await deadlines.passed(start(datetime.now(UTC) - timedelta(seconds=1)))

    done = ended.outcome
    assert done is not None and done.summary.startswith("DEADLINE_EXCEEDED: ") and not ended.reported
    assert done.actual_steps == saved.iterations == 1
    assert done.actual_cost_usd == charged(agent, saved.cost_usd, 1)
    assert done.input_tokens == saved.input_tokens > 0
    state = await store.load("a1", TASK)
    assert state is not None and state.status is RunStatus.FAILED and state.reason == done.summary
    late = await resume_award(agent, decided(EscalationAction.RETRY), store, None, cast(Any, board), meter)
    assert late.outcome is not None and late.outcome.summary == done.summary, "the decision comes too late"


async def test_the_deadline_timer_waits_for_a_run_going_on_here_and_records_no_second_outcome() -> None:
    store = InMemoryStateStore()
    meter = RunMeter(Published())
    agent = dawdler(store, meter)
    board = Board()
    deadlines = RunDeadlines({"a1": agent}, store, meter, board)
    deadline = datetime.now(UTC) + timedelta(seconds=0.3)

    async def execute() -> RunProgress:
        progress = await deadlines.bounded(award(), f"run.{TASK}", deadline,
                                           lambda: execute_award(agent, award(), store, meter))  # fmt: skip
        board.outcome = progress.outcome  # recorded on the board, as the app's step does
        return progress

    running = asyncio.create_task(execute())
    while f"run.{TASK}" not in cast(Any, deadlines)._runs:  # the run under way here
        await asyncio.sleep(0.01)
    timer = await deadlines.passed(start(deadline))  # the engine's timer, a little early

    stopped = await running
    assert stopped.outcome is not None and stopped.outcome.summary.startswith("DEADLINE_EXCEEDED")
    assert timer.reported and timer.outcome == stopped.outcome, "the run's own end, recorded once"


async def test_a_run_deaf_to_its_deadline_s_stop_is_ended_by_the_timer_all_the_same() -> None:
    store = InMemoryStateStore()
    meter = RunMeter(Published())
    agent = dawdler(store, meter)
    board = Board()
    deadlines = RunDeadlines({"a1": agent}, store, meter, board, stop_grace_seconds=0.2)
    deadline = datetime.now(UTC) + timedelta(seconds=0.1)

    async def deaf() -> RunProgress:
        meter.begin("a1", TASK)
        await meter.publish(cast(Any, None), cost_event(TASK, "a1.step", 0.25))
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(10)  # blocking work, say: the deadline's stop does not end it
        raise AssertionError("never ends on its own")

    running = asyncio.create_task(deadlines.bounded(award(), f"run.{TASK}", deadline, deaf))
    await asyncio.sleep(0.15)
    began = time.monotonic()
    ended = await deadlines.passed(start(deadline))

    assert time.monotonic() - began < 3, "not held by the run (10 s more)"
    done = ended.outcome
    assert done is not None and done.summary.startswith("DEADLINE_EXCEEDED: ") and not ended.reported
    assert (done.actual_steps, done.actual_cost_usd) == (1, charged(agent, 0.25, 1)), "what it spent"
    with pytest.raises(asyncio.CancelledError):
        await running


async def test_at_its_deadline_a_run_whose_outcome_the_board_holds_records_nothing_more() -> None:
    store = InMemoryStateStore()
    recorded = outcome("5", success=True)
    deadlines = RunDeadlines({"a1": dawdler(store, RunMeter(Published()))}, store, None, Board(recorded))

    ended = await deadlines.passed(start(datetime.now(UTC)))

    assert ended.reported and ended.outcome == recorded


# -- the run's workflow races its steps with a durable timer at the deadline ------------------------------

PENDING = object()
"""A scripted answer that leaves the step waiting (a timer not fired yet, an event not raised)."""


@dataclass
class RaceContext(ScriptedContext):
    """A `ScriptedContext` whose steps may stay pending across yields (answered `PENDING`), so a
    workflow's `when_any` races them; the answer sees which yield it is (`len(self.waits)`)."""

    def run(self, workflow: Any, raw: Any) -> Any:
        steps: Generator[Any, Any, Any] = workflow(self, raw)
        pending: list[Any] = []
        sent: Any = None
        while True:
            try:
                waited = steps.send(sent)
            except StopIteration as end:
                return end.value
            scheduled, self._outstanding = self._outstanding, []
            self.waits.append([s for s, _ in scheduled])
            outstanding, pending = [*pending, *scheduled], []
            for step, task in outstanding:
                answer = self.answer(step)
                if answer is PENDING:
                    pending.append((step, task))
                else:
                    task.complete(answer)
            assert waited.is_complete, "the workflow waits on something that never comes"
            self.now += timedelta(milliseconds=10)
            sent = waited.get_result()

    def scheduled(self, kind: str) -> list[Scheduled]:
        return [s for wait in self.waits for s in wait if s.kind == kind]


DEADLINE_AT = AWARDED + timedelta(milliseconds=2_500)


def workflow_start(deadline: datetime | None = DEADLINE_AT) -> AgentRunStart:
    """The run's input as the workflow host hands it to the run: read from its JSON."""
    return AgentRunStart.model_validate(start(deadline).model_dump(mode="json"))


def ended_outcome(summary: str = "done") -> dict[str, Any]:
    return RunProgress(outcome=outcome(summary, success=True), reported=True).model_dump(mode="json")


def waiting() -> dict[str, Any]:
    return RunProgress(waiting_on="esc-1").model_dump(mode="json")


def resolution() -> dict[str, Any]:
    return decided(EscalationAction.RETRY).decided.model_dump(mode="json")


def script(ctx: list[RaceContext], answers: dict[str, Any]) -> Any:
    """Answers by step name (an activity's, `event`, `timer`); a list answers yield by yield."""

    def answer(step: Scheduled) -> Any:
        key = step.kind if step.kind in ("event", "timer") else step.name
        found = answers.get(key, PENDING)
        if isinstance(found, list):
            index = len(ctx[0].waits) - 1
            return found[index] if index < len(found) else found[-1]
        return found

    return answer


def race(answers: dict[str, Any], *, patched: bool = True) -> RaceContext:
    holder: list[RaceContext] = []
    ctx = RaceContext(script(holder, answers), patched=patched)
    holder.append(ctx)
    return ctx


def test_a_run_that_ends_before_its_deadline_ends_as_before_with_its_timer_left_behind() -> None:
    ctx = race({EXECUTE.name: ended_outcome(), "timer": PENDING})

    ctx.run(agent_run, workflow_start())

    [timer] = ctx.scheduled("timer")
    assert timer.name == str(DEADLINE_AT), "one durable timer, at the award's time plus deadline_ms"
    assert [s.name for s in ctx.scheduled("activity")] == [EXECUTE.name]


def test_a_run_still_executing_at_its_deadline_is_ended_there_by_its_workflow() -> None:
    ctx = race({EXECUTE.name: PENDING, "timer": None, DEADLINE.name: ended_outcome()})

    ctx.run(agent_run, workflow_start())

    assert [s.name for s in ctx.scheduled("activity")] == [EXECUTE.name, DEADLINE.name]
    [stop] = ctx.activities(DEADLINE.name)
    assert stop == start(DEADLINE_AT), "the deadline step is given the run's start"
    assert not ctx.activities(REPORT.name) and not ctx.activities(RESUME.name)


def test_a_run_paused_for_a_person_at_its_deadline_is_ended_without_the_decision() -> None:
    # Yield 1: executed (paused), the timer not fired; yield 2: no decision, the timer fires.
    ctx = race(
        {EXECUTE.name: waiting(), "timer": [PENDING, None], "event": PENDING, DEADLINE.name: ended_outcome()}
    )

    ctx.run(agent_run, workflow_start())

    assert [s.name for s in ctx.scheduled("event")] == [decision_event("esc-1")]
    assert [s.name for s in ctx.scheduled("activity")] == [EXECUTE.name, DEADLINE.name]


def test_a_decision_before_the_deadline_resumes_the_run_under_the_same_deadline() -> None:
    reported = RunProgress(outcome=outcome("after the decision", success=True)).model_dump(mode="json")
    ctx = race({EXECUTE.name: waiting(), "timer": PENDING, "event": resolution(), RESUME.name: reported,
                  REPORT.name: None})  # fmt: skip

    ctx.run(agent_run, workflow_start())

    [resumed] = ctx.activities(RESUME.name)
    assert isinstance(resumed, AgentRunDecision) and resumed.deadline == DEADLINE_AT
    [report] = ctx.activities(REPORT.name)
    assert isinstance(report, AgentRunReport) and report.outcome.summary == "after the decision"
    assert len(ctx.scheduled("timer")) == 1, "one timer serves every step of the run"
    assert not ctx.activities(DEADLINE.name)


def test_a_run_begun_before_deadlines_waits_as_its_history_recorded() -> None:
    reported = RunProgress(outcome=outcome("after the decision", success=True)).model_dump(mode="json")
    answers = {EXECUTE.name: waiting(), "event": resolution(), RESUME.name: reported, REPORT.name: None}
    ctx = race(answers, patched=False)

    ctx.run(agent_run, workflow_start())

    assert not ctx.scheduled("timer")
    assert [[s.kind for s in wait] for wait in ctx.waits] == [
        ["activity"],
        ["event"],
        ["activity"],
        ["activity"],
    ]
    assert RUN_DEADLINES.name == "agent_run.deadline", "runs begun with it have the name in their history"


def test_a_task_without_a_deadline_has_no_timer() -> None:
    ctx = race({EXECUTE.name: ended_outcome()})

    ctx.run(agent_run, workflow_start(None))

    assert not ctx.scheduled("timer")
    assert [s.name for s in ctx.scheduled("activity")] == [EXECUTE.name]


# -- a plan's subgoal sees why its run ended -------------------------------------------------------------


async def test_a_subgoal_attempt_stopped_at_its_deadline_fails_for_that_reason_and_a_replan_reads_it() -> (
    None
):
    said: list[str] = []

    def answers(messages: Sequence[ChatMessage]) -> str | None:
        said.append(messages[-1].content)
        return offline_answers(messages)

    model = OfflineModelClient(overrides=answers)
    unused = cast(Any, None)
    planner = PlannerActivities(model, unused, unused, unused, unused, unused)
    goal = SubGoal(id="collect", description="Collect the data", success_criterion="the data is collected")
    job = SubGoalJob(plan_id="p1", task="t", subgoal=goal, round=1, wave=0, required_skills=["sql"],
                     attempt_timeout_seconds=60)  # fmt: skip
    reason = failure_summary(deadline_exceeded(spec(1_500)))
    stopped = TaskOutcome(task_id="p1.collect.1.1", agent_id="analyst", actual_success=False,
                          actual_cost_usd=0.02, actual_steps=3, summary=reason)  # fmt: skip
    ended = TaskEnded(task_id=stopped.task_id, outcome=stopped)

    verified = await planner.verify(Verify(job=job, subgoal=goal, ended=ended))

    assert verified.ended is AttemptEnd.FAILED and verified.verdict is VerificationResult.FAIL
    assert verified.reason == stopped.summary and verified.reason.startswith("DEADLINE_EXCEEDED: ")
    assert (verified.agent_id, verified.cost_usd) == ("analyst", 0.02)
    assert said == [], "a run its deadline ended has no result for the verifier to judge"
    failed, _ = after_attempt(goal, verified.verdict, output=verified.output, reason=verified.reason,
                              fallback_used=False)  # fmt: skip
    assert failed.status is SubGoalStatus.FAILED and failed.failure_reason == stopped.summary
    other = goal.model_copy(update={"id": "report", "description": "Write the report"})
    plan = Plan(task="t", subgoals=[failed, other], total_estimated_steps=2)
    await replan(model, plan, failed, PlanningConfig())
    assert any(f"Failed subgoal: collect: {stopped.summary}" in text for text in said), said


async def test_a_run_whose_task_was_cancelled_is_stopped_and_ends_without_an_outcome() -> None:
    store = InMemoryStateStore()
    meter = RunMeter(Published())
    deadlines = RunDeadlines({"a1": dawdler(store, meter)}, store, meter, Board())
    told: list[str] = []

    async def long_run() -> RunProgress:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            told.append("stopped")  # what an A2A agent's run does here: cancel the agent's task
            raise
        raise AssertionError("never ends on its own")

    running = asyncio.create_task(deadlines.bounded(award(), f"run.{TASK}", None, long_run))
    await asyncio.sleep(0.05)
    assert not deadlines.stop_cancelled(f"run.{TASK}.2"), "no such run here"

    assert deadlines.stop_cancelled(f"run.{TASK}")
    stopped = await asyncio.wait_for(running, 5)

    assert stopped == RunProgress(cancelled=True) and told == ["stopped"]
    assert not deadlines.stop_cancelled(f"run.{TASK}"), "it is over"
    other = asyncio.create_task(deadlines.bounded(award(), f"run.{TASK}", None, long_run))
    await asyncio.sleep(0.05)
    other.cancel()  # a stop that is not a cancel's (the app stopping) goes through
    with pytest.raises(asyncio.CancelledError):
        await other
