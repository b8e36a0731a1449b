"""The planner's activities when the model cannot answer or a task never ends: typed results,
never an exception that would fail the plan's workflow; and a wave's start, run again after
failing part way, posting each first attempt the way it did."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from agora.core.acceptance import Verdict, VerdictStatus
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.record import ParkRequest
from agora.core.market import TaskOutcome
from agora.core.planning import Plan, SubGoal, SubGoalStatus, VerificationResult
from agora.core.plans.record import AttemptEnd, StopReason, new_record
from agora.core.plans.request import PlanRequest
from agora.core.plans.run import with_plan
from agora.core.plans.workflow import SubGoalJob
from agora.core.task_waits import TaskEnded, TaskLink
from agora.llm import OfflineModelClient
from agora.planner.activities import PlannerActivities
from agora.planner.steps import offline_answers
from agora.planner.workflow import Draft, Estimate, LookAhead, StartWave, Stop, Synthesize, Verify
from agora.sdk.testing import MemoryRepository

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GOAL = SubGoal(id="collect", description="Collect the data", success_criterion="the data is collected")


def activities() -> PlannerActivities:
    """Activities on a model that fails every call; nothing else is reached in these steps."""
    unused = cast(Any, None)
    return PlannerActivities(OfflineModelClient(fail_every=1), unused, unused, unused, unused, unused)


def job() -> SubGoalJob:
    return SubGoalJob(
        plan_id="p1", task="t", subgoal=GOAL, round=1, wave=0, required_skills=["sql"],
        attempt_timeout_seconds=60, lookahead_paths=2,
    )  # fmt: skip


async def test_without_a_model_each_step_answers_a_typed_result() -> None:
    steps = activities()
    record = new_record(PlanRequest(plan_id="p1", task="t"), NOW)
    assert (await steps.estimate(Estimate(task="t"))).steps is None  # planned, not guessed
    drafted = await steps.draft(Draft(record=record))
    assert drafted.plan is None and drafted.problem.startswith("PLAN_NOT_MADE")
    assert (await steps.lookahead(LookAhead(job=job(), subgoal=GOAL))).approach == ""
    done = GOAL.model_copy(update={"status": SubGoalStatus.COMPLETED, "output_summary": "rows"})
    running = with_plan(record, Plan(task="t", subgoals=[done], total_estimated_steps=1), NOW)
    synthesized = await steps.synthesize(Synthesize(record=running))
    assert synthesized.final_output == "" and "could not answer" in synthesized.problem


async def test_an_attempt_without_an_end_or_a_verifier_fails_with_the_reason() -> None:
    steps = activities()
    timed_out = await steps.verify(Verify(job=job(), subgoal=GOAL, ended=None))
    assert timed_out.ended is AttemptEnd.TIMED_OUT and timed_out.verdict is VerificationResult.FAIL
    assert timed_out.reason == "no outcome within 60 s"
    outcome = TaskOutcome(task_id="p1.collect.1.1", agent_id="analyst", actual_success=True,
                          actual_cost_usd=0.01, actual_steps=2, summary="rows")  # fmt: skip
    unverified = await steps.verify(
        Verify(job=job(), subgoal=GOAL, ended=TaskEnded(task_id="x", outcome=outcome))
    )
    assert unverified.ended is AttemptEnd.SUCCEEDED and unverified.verdict is VerificationResult.FAIL
    assert "could not answer" in unverified.reason and unverified.cost_usd == 0.01
    assert unverified.agent_id == "analyst"


async def test_each_model_step_reports_the_tokens_it_used() -> None:
    unused = cast(Any, None)
    steps = PlannerActivities(
        OfflineModelClient(overrides=offline_answers), unused, unused, unused, unused, unused
    )
    estimated = await steps.estimate(Estimate(task="Write the report on solar prices in Spain"))
    assert estimated.steps is not None and estimated.usage.prompt_tokens > 0
    assert estimated.usage.completion_tokens > 0
    outcome = TaskOutcome(task_id="p1.collect.1.1", agent_id="analyst", actual_success=True,
                          actual_cost_usd=0.01, actual_steps=2, summary="rows")  # fmt: skip
    verified = await steps.verify(
        Verify(job=job(), subgoal=GOAL, ended=TaskEnded(task_id="x", outcome=outcome))
    )
    assert verified.verdict is VerificationResult.PASS and verified.usage.total_tokens > 0


async def test_an_attempt_whose_check_failed_fails_with_the_check_s_reason_whatever_the_agent_claimed() -> (
    None
):
    unused = cast(Any, None)
    steps = PlannerActivities(
        OfflineModelClient(overrides=offline_answers), unused, unused, unused, unused, unused
    )
    outcome = TaskOutcome(task_id="p1.collect.1.1", agent_id="analyst", actual_success=True,
                          actual_cost_usd=0.01, actual_steps=2, summary="rows")  # fmt: skip
    failed = Verdict(status=VerdictStatus.FAILED, kind="expected", reason="expected '12', got 'rows'",
                     checked_by="taskboard")  # fmt: skip
    verified = await steps.verify(
        Verify(job=job(), subgoal=GOAL, ended=TaskEnded(task_id="x", outcome=outcome, verdict=failed))
    )
    assert verified.ended is AttemptEnd.FAILED and verified.verdict is VerificationResult.FAIL
    assert verified.reason == "its check failed: expected '12', got 'rows'"
    assert verified.usage.total_tokens == 0, "no model second-guesses the check"

    passed = failed.model_copy(update={"status": VerdictStatus.PASSED, "reason": "12"})
    claimed_failure = outcome.model_copy(update={"actual_success": False})
    verified = await steps.verify(
        Verify(job=job(), subgoal=GOAL, ended=TaskEnded(task_id="x", outcome=claimed_failure, verdict=passed))
    )
    assert verified.ended is AttemptEnd.SUCCEEDED, "the check passed what the agent called a failure"


class PostedTasks:
    app_id = "planner"

    def __init__(self) -> None:
        self.posted: list[tuple[str, str]] = []

    async def publish(self, channel: Any, spec: Any, *, message_id: str) -> None:
        self.posted.append((message_id, spec.description))


async def test_a_wave_s_start_posts_each_first_attempt_as_its_look_ahead_chose_then_the_same_way() -> None:
    links, published = MemoryRepository(TaskLink), PostedTasks()
    unused = cast(Any, None)

    def planner(model: OfflineModelClient) -> PlannerActivities:
        return PlannerActivities(model, cast(Any, published), unused, links.typed(), unused, unused)

    started = await planner(OfflineModelClient(overrides=offline_answers)).start_wave(StartWave(jobs=[job()]))
    [chosen] = started.approaches
    assert chosen.approach and chosen.usage.total_tokens > 0
    [(task_id, description)] = published.posted
    assert task_id == "p1.collect.1.1" and chosen.approach in description
    link = await links.get(task_id)
    assert link is not None and (link.value.instance_id, link.value.event) == ("p1.collect.1", "ended.1")

    # Run again (the step failed after this post): the same way, though a look-ahead asked
    # again would find none now.
    again = await planner(OfflineModelClient(fail_every=1)).start_wave(StartWave(jobs=[job()]))
    assert [a.approach for a in again.approaches] == [chosen.approach]
    assert published.posted == [(task_id, description)] * 2


class ParkedEscalations:
    """The escalation actors as the planner's stop reaches them: each park kept by id."""

    def __init__(self) -> None:
        self.parked: dict[str, ParkRequest] = {}

    def __call__(self, escalation_id: str) -> ParkedEscalations.Actor:
        return ParkedEscalations.Actor(self, escalation_id)

    class Actor:
        def __init__(self, owner: ParkedEscalations, escalation_id: str) -> None:
            self.owner, self.escalation_id = owner, escalation_id

        async def park(self, request: ParkRequest) -> None:
            self.owner.parked[self.escalation_id] = request


async def test_a_task_that_got_no_plan_is_parked_for_a_person_with_why() -> None:
    escalations = ParkedEscalations()
    unused = cast(Any, None)
    steps = PlannerActivities(OfflineModelClient(), unused, unused, unused, unused, cast(Any, escalations))
    record = new_record(PlanRequest(plan_id="p1", task="Write the report"), NOW)
    problem = "no valid plan after 3 drafts: the answer holds no JSON object"

    stop = await steps.stop(Stop(record=record, reason=StopReason.NOT_PLANNED, problem=problem))

    assert stop.escalation_id == "plan.p1.stop1" and stop.detail == f"no plan was made: {problem}"
    parked = escalations.parked["plan.p1.stop1"]
    context = parked.context
    assert isinstance(context, EscalationContext) and parked.waiting_party.id == "p1"
    assert context.error_history == [problem] and context.validation_results == []
    assert context.prompt_used == "Write the report" and "no plan yet" in context.output_summary
