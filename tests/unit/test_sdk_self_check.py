"""An agent app runs its task's own check before it claims success (`check_before_report`, on by
default): an output the check fails is reported as a failure, never as the success the board's
check would contradict; an agent that opts out claims what its run said."""

from __future__ import annotations

from agora.core.acceptance import Acceptance, ExpectedAnswer, MatchMode
from agora.core.market import TaskSpec
from agora.core.messages import TaskAwarded
from agora.sdk import Agent
from agora.sdk._agent import HandlerResult
from agora.sdk._app_steps import execute_award
from agora.sdk.runner import InMemoryStateStore
from agora.sdk.testing import ScriptedModel, final
from tests.unit.test_sdk_award_delivery import award as awarded_at

SUM_IS_5 = Acceptance(check=ExpectedAnswer(match=MatchMode.NUMBER, expected="5"))


def award(acceptance: Acceptance | None) -> TaskAwarded:
    spec = TaskSpec(
        task_id="t1", description="What is 2 + 3?", required_skills=["sums"], acceptance=acceptance
    )
    return awarded_at(None, spec)


def answering(summary: str, *, check_before_report: bool = True) -> Agent:
    async def handler(award: TaskAwarded) -> HandlerResult:
        return HandlerResult(success=True, summary=summary)

    return Agent("a1", skills=["sums"], handler=handler, check_before_report=check_before_report)


async def test_a_handlers_answer_that_fails_its_tasks_check_is_reported_as_a_failure() -> None:
    progress = await execute_award(answering("2 + 3 = 6"), award(SUM_IS_5), InMemoryStateStore())
    assert progress.outcome is not None
    assert progress.outcome.actual_success is False and progress.outcome.summary == "2 + 3 = 6"

    right = await execute_award(answering("2 + 3 = 5"), award(SUM_IS_5), InMemoryStateStore())
    assert right.outcome is not None and right.outcome.actual_success is True


async def test_an_agent_that_opts_out_or_a_task_without_a_check_claims_what_the_run_said() -> None:
    bluffer = answering("2 + 3 = 6", check_before_report=False)
    progress = await execute_award(bluffer, award(SUM_IS_5), InMemoryStateStore())
    assert progress.outcome is not None and progress.outcome.actual_success is True

    unchecked = await execute_award(answering("2 + 3 = 6"), award(None), InMemoryStateStore())
    assert unchecked.outcome is not None and unchecked.outcome.actual_success is True


async def test_a_model_runs_answer_is_checked_before_it_is_claimed() -> None:
    agent = Agent("a1", ScriptedModel(final("the sum is 6")), skills=["sums"])
    progress = await execute_award(agent, award(SUM_IS_5), InMemoryStateStore())
    assert progress.outcome is not None and progress.outcome.actual_success is False
    assert "6" in progress.outcome.summary

    agent = Agent("a1", ScriptedModel(final("the sum is 5")), skills=["sums"])
    progress = await execute_award(agent, award(SUM_IS_5), InMemoryStateStore())
    assert progress.outcome is not None and progress.outcome.actual_success is True
