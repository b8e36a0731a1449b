"""A task whose check is a checker app (`CheckerApp`): the `Task` actor records the outcome, asks
the app on a reminder, and ends the task as the answer says; no answer is tried again with a
backoff and then leaves the outcome UNCHECKED, never passed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from agora.core import topics
from agora.core.acceptance import CHECKER_ATTEMPTS, VerdictStatus, checker_backoff
from agora.core.contracts import CheckAnswer, OutcomeReport
from agora.core.market import AllocationStatus, TaskOutcome
from agora.core.messages import TaskCancel
from agora.runtime.checkers import CheckerAnswerInvalid, CheckerUnreachable
from agora.runtime.pubsub import Publisher
from agora.sdk.testing import RecordingPublisher
from agora.taskboard.actors import CHECK_REMINDER, Task, TaskBoardDeps
from tests.unit.helpers import ScriptedCheckers, answer_of, hosted
from tests.unit.test_awards import awarded as result
from tests.unit.test_task_actor import board_index, record_of, task_spec

CHECKER = {"kind": "checker_app", "app_id": "ledger-tests", "method": "v1/check", "timeout_s": 5}


async def checked_task(checkers: ScriptedCheckers, publisher: RecordingPublisher) -> tuple[Task, TaskOutcome]:
    """Task t1, checked by the app `ledger-tests`, awarded to a1: and a1's outcome, with its token."""
    actor = hosted(Task, "t1", TaskBoardDeps(cast(Publisher, publisher), board_index(), checkers))
    await actor._on_activate()
    await actor.post_task(task_spec(acceptance={"check": CHECKER}))
    await actor.record_allocation(result(("a1", 0.9), ("a2", 0.5)))
    outcome = TaskOutcome(
        task_id="t1", agent_id="a1", actual_success=True, actual_cost_usd=0.1, actual_steps=2,
        summary="the ledger balances", award_token=actor.state.award_token,
    )  # fmt: skip
    return actor, outcome


def reminders(actor: Task) -> dict[str, Any]:
    return cast(dict[str, Any], actor._state_manager._mock_reminders)  # type: ignore[attr-defined]


async def fire_check(actor: Task) -> None:
    """The check reminder fires, as the scheduler would at its due time (it is one-shot)."""
    assert CHECK_REMINDER in reminders(actor)
    reminders(actor).pop(CHECK_REMINDER)
    await actor.on_reminder(CHECK_REMINDER, b"")


def outcomes(publisher: RecordingPublisher) -> list[OutcomeReport]:
    return publisher.on(topics.TASK_OUTCOME_RECORDED)


async def test_the_outcome_waits_for_the_checker_apps_answer_and_the_task_ends_as_it_says() -> None:
    publisher = RecordingPublisher()
    checkers = ScriptedCheckers(CheckAnswer(passed=False, reason="the ledger is off by 3"))
    actor, outcome = await checked_task(checkers, publisher)

    recorded = record_of(await actor.mark_outcome(outcome))
    assert recorded.status is AllocationStatus.ALLOCATED and recorded.outcome == outcome
    assert recorded.verdict is None and outcomes(publisher) == [], "nothing ends before the verdict"
    assert reminders(actor)[CHECK_REMINDER].due_time == timedelta(0)

    await fire_check(actor)
    ended = record_of(await actor.get_task())
    assert ended.status is AllocationStatus.FAILED
    assert ended.verdict is not None and ended.verdict.status is VerdictStatus.FAILED
    assert ended.verdict.checked_by == "ledger-tests" and ended.verdict.kind == "checker_app"
    assert ended.failure_reason == (
        "CHECK_FAILED: the checker_app check by ledger-tests failed: the ledger is off by 3"
    )
    [report] = outcomes(publisher)
    assert report.verdict == ended.verdict and report.counts_as_success is False
    assert report.outcome.actual_success is True, "the claim beside the verdict"

    [(check, request)] = checkers.asked
    assert check.app_id == "ledger-tests" and check.method == "v1/check"
    assert request.outcome.award_token is None, "the award's token stays on the board"
    assert request.outcome.summary == "the ledger balances" and request.spec.task_id == "t1"


async def test_the_same_outcome_again_while_it_is_checked_arms_the_check_again_and_announces_nothing() -> (
    None
):
    publisher = RecordingPublisher()
    actor, outcome = await checked_task(
        ScriptedCheckers(CheckAnswer(passed=True, reason="balanced")), publisher
    )
    first = record_of(await actor.mark_outcome(outcome))
    reminders(actor).clear()  # the registration was lost with the reporter's call

    assert record_of(await actor.mark_outcome(outcome)) == first
    assert CHECK_REMINDER in reminders(actor) and outcomes(publisher) == []
    other = answer_of(await actor.mark_outcome(outcome.model_copy(update={"summary": "another answer"})))
    assert other.error is not None and other.error.error == "INVALID_OUTCOME"

    await fire_check(actor)
    assert record_of(await actor.get_task()).status is AllocationStatus.COMPLETED
    [report] = outcomes(publisher)
    assert report.counts_as_success and report.verdict is not None and report.verdict.passed


async def test_a_silent_checker_app_is_asked_again_with_a_backoff_then_the_outcome_is_unchecked() -> None:
    publisher = RecordingPublisher()
    script = [CheckerUnreachable(f"503 ERR_DIRECT_INVOKE try {n}") for n in range(CHECKER_ATTEMPTS)]
    actor, outcome = await checked_task(ScriptedCheckers(*script), publisher)
    await actor.mark_outcome(outcome)

    waits = []
    for _ in range(CHECKER_ATTEMPTS - 1):
        await fire_check(actor)
        assert record_of(await actor.get_task()).status is AllocationStatus.ALLOCATED
        waits.append(reminders(actor)[CHECK_REMINDER].due_time.total_seconds())
    assert waits == [2.0, 8.0, 32.0] == list(checker_backoff()) and outcomes(publisher) == []

    await fire_check(actor)
    ended = record_of(await actor.get_task())
    assert ended.verdict is not None and ended.verdict.status is VerdictStatus.UNCHECKED
    assert ended.verdict.checked_by == "taskboard", "nobody checked it"
    assert f"no answer after {CHECKER_ATTEMPTS} tries" in ended.verdict.reason
    assert "try 3" in ended.verdict.reason, "with the last reason"
    assert ended.status is AllocationStatus.COMPLETED, "the agent's claim stands, marked unchecked"
    [report] = outcomes(publisher)
    assert report.verdict == ended.verdict and CHECK_REMINDER not in reminders(actor)


async def test_an_answer_out_of_the_checkers_contract_leaves_the_outcome_unchecked_at_once() -> None:
    publisher = RecordingPublisher()
    invalid = CheckerAnswerInvalid("answered out of its contract: passed: Field required")
    actor, outcome = await checked_task(ScriptedCheckers(invalid), publisher)
    await actor.mark_outcome(outcome)
    await fire_check(actor)

    ended = record_of(await actor.get_task())
    assert ended.verdict is not None and ended.verdict.status is VerdictStatus.UNCHECKED
    assert "passed: Field required" in ended.verdict.reason
    assert len(outcomes(publisher)) == 1 and CHECK_REMINDER not in reminders(actor)


async def test_a_task_cancelled_while_it_is_checked_stays_cancelled_when_the_answer_comes() -> None:
    publisher = RecordingPublisher()
    checkers = ScriptedCheckers(CheckAnswer(passed=True, reason="balanced"))
    actor, outcome = await checked_task(checkers, publisher)
    await actor.mark_outcome(outcome)
    cancelled = record_of(await actor.cancel(TaskCancel(cancelled_by="ana", reason="not needed")))
    assert cancelled.status is AllocationStatus.FAILED

    await fire_check(actor)
    assert record_of(await actor.get_task()) == cancelled and checkers.asked == []
    assert outcomes(publisher) == []


async def test_a_run_that_ended_on_the_markets_error_is_not_sent_to_the_checker() -> None:
    publisher = RecordingPublisher()
    checkers = ScriptedCheckers()
    actor, outcome = await checked_task(checkers, publisher)
    over = outcome.model_copy(
        update={"actual_success": False, "summary": "DEADLINE_EXCEEDED: the run passed its deadline"}
    )
    ended = record_of(await actor.mark_outcome(over))
    assert ended.status is AllocationStatus.FAILED and ended.verdict is None
    assert CHECK_REMINDER not in reminders(actor) and len(outcomes(publisher)) == 1
