"""A task whose check is a checker app (`CheckerApp`): the `Task` actor records the outcome, asks
the app on a reminder, and ends the task as the answer says; no answer is tried again with a
backoff and then leaves the outcome UNCHECKED, never passed. A judge's opinion, a failed check
passed to the next bid, and one a person decides (`on_failure: person`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from agora.core import task_lifecycle as lifecycle
from agora.core import topics
from agora.core.acceptance import CHECKER_ATTEMPTS, VerdictStatus, checker_backoff
from agora.core.contracts import CheckAnswer, OutcomeReport
from agora.core.errors import InvalidArgument
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.escalation.record import EscalationRecord, ParkRequest, park, resolve
from agora.core.market import AllocationStatus, TaskOutcome
from agora.core.messages import TaskCancel
from agora.runtime.checkers import CheckAnswerInvalid, CheckNotAnswered
from agora.runtime.clients import EscalationActors
from agora.runtime.pubsub import Publisher
from agora.sdk.testing import RecordingPublisher, ScriptedModel
from agora.taskboard.actors import CHECK_REMINDER, PERSON_REMINDER, Task, TaskBoardDeps
from agora.taskboard.judge import Judge
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
    script = [CheckNotAnswered(f"503 ERR_DIRECT_INVOKE try {n}") for n in range(CHECKER_ATTEMPTS)]
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
    invalid = CheckAnswerInvalid("answered out of its contract: passed: Field required")
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


JUDGE = {"kind": "judge", "rubric": "the answer names the ledger's balance"}


async def judged_task(model: ScriptedModel, publisher: RecordingPublisher) -> tuple[Task, TaskOutcome]:
    deps = TaskBoardDeps(cast(Publisher, publisher), board_index(), ScriptedCheckers(), judge=Judge(model))
    actor = hosted(Task, "t1", deps)
    await actor._on_activate()
    await actor.post_task(task_spec(acceptance={"check": JUDGE}))
    await actor.record_allocation(result(("a1", 0.9)))
    outcome = TaskOutcome(
        task_id="t1", agent_id="a1", actual_success=True, actual_cost_usd=0.1, actual_steps=2,
        summary="the ledger balances at 1,200", award_token=actor.state.award_token,
    )  # fmt: skip
    return actor, outcome


async def test_a_judges_opinion_ends_the_task_and_is_kept_as_an_opinion_with_its_confidence() -> None:
    publisher = RecordingPublisher()
    model = ScriptedModel('{"passed": false, "confidence": 0.6, "reason": "it names no balance"}')
    actor, outcome = await judged_task(model, publisher)
    await actor.mark_outcome(outcome)
    await fire_check(actor)

    ended = record_of(await actor.get_task())
    verdict = ended.verdict
    assert verdict is not None and (verdict.status, verdict.kind) == (VerdictStatus.FAILED, "judge")
    assert verdict.confidence == 0.6 and verdict.checked_by == "taskboard"
    assert ended.status is AllocationStatus.FAILED and "it names no balance" in (ended.failure_reason or "")
    [asked] = model.asked
    prompt = asked[-1].content
    assert "Rubric: the answer names the ledger's balance" in prompt and "1,200" in prompt
    [report] = outcomes(publisher)
    assert report.verdict == verdict


async def test_a_judge_that_answers_out_of_its_schema_twice_leaves_the_outcome_unchecked() -> None:
    publisher = RecordingPublisher()
    model = ScriptedModel("it looks fine to me", '{"passed": "yes"}')
    actor, outcome = await judged_task(model, publisher)
    await actor.mark_outcome(outcome)
    await fire_check(actor)

    ended = record_of(await actor.get_task())
    assert ended.verdict is not None and ended.verdict.status is VerdictStatus.UNCHECKED
    assert ended.verdict.reason.startswith("the judge: answered out of its contract 2 times")
    assert len(model.asked) == 2 and CHECK_REMINDER not in reminders(actor)
    assert ended.status is AllocationStatus.COMPLETED, "the claim stands, marked unchecked"


async def test_a_judge_whose_model_cannot_be_reached_is_asked_again_then_the_outcome_is_unchecked() -> None:
    publisher = RecordingPublisher()
    actor, outcome = await judged_task(ScriptedModel(), publisher)  # every call: ModelUnavailable
    await actor.mark_outcome(outcome)
    for _ in range(CHECKER_ATTEMPTS - 1):
        await fire_check(actor)
        assert record_of(await actor.get_task()).status is AllocationStatus.ALLOCATED
    await fire_check(actor)
    ended = record_of(await actor.get_task())
    assert ended.verdict is not None and ended.verdict.status is VerdictStatus.UNCHECKED
    assert (
        "no answer after 4 tries" in ended.verdict.reason and "could not be reached" in ended.verdict.reason
    )


NEXT_BID_ON_A_WRONG_SUM = {
    "check": {"kind": "expected", "match": "number", "expected": "5"},
    "on_failure": "next_bid",
}


async def next_bid_task(publisher: RecordingPublisher, **spec: object) -> Task:
    actor = hosted(Task, "t1", TaskBoardDeps(cast(Publisher, publisher), board_index(), ScriptedCheckers()))
    await actor._on_activate()
    await actor.post_task(task_spec(acceptance=NEXT_BID_ON_A_WRONG_SUM, **spec))
    await actor.record_allocation(result(("a1", 0.9), ("a2", 0.5)))
    return actor


def said(actor: Task, agent_id: str, summary: str, cost: float = 0.1) -> TaskOutcome:
    return TaskOutcome(
        task_id="t1", agent_id=agent_id, actual_success=True, actual_cost_usd=cost, actual_steps=1,
        summary=summary, award_token=actor.state.award_token,
    )  # fmt: skip


async def test_a_failed_check_passes_the_task_on_and_counts_the_failed_turn_against_its_agent() -> None:
    publisher = RecordingPublisher()
    actor = await next_bid_task(publisher)
    first_token = actor.state.award_token
    wrong = said(actor, "a1", "2 + 3 = 6")

    passed = record_of(await actor.mark_outcome(wrong))
    assert passed.status is AllocationStatus.ALLOCATED and passed.outcome is None and passed.verdict is None
    assert [turn.agent_id for turn in passed.awards] == ["a1", "a2"]
    assert passed.awards[0].outcome == wrong and passed.awards[0].verdict is not None
    assert passed.awards[0].verdict.status is VerdictStatus.FAILED
    assert actor.state.award_token not in (None, first_token), "a new token for the new turn"
    [report] = outcomes(publisher)
    assert report.outcome == wrong and report.counts_as_success is False and report.verdict is not None
    assert report.winning_bid is not None and report.winning_bid.agent_id == "a1"
    assert publisher.sent[-2][2] == "outcome:t1.1" and publisher.replies_to[-2] is None, (
        "to the reputation only"
    )
    [_, award] = publisher.on(topics.TASK_AWARDED)
    assert award.agent_id == "a2" and award.attempt == 2

    again = record_of(await actor.mark_outcome(wrong))  # the first turn's report, delivered again
    assert again == passed and len(outcomes(publisher)) == 2 and publisher.sent[-1][2] == "outcome:t1.1"

    done = record_of(await actor.mark_outcome(said(actor, "a2", "2 + 3 = 5")))
    assert done.status is AllocationStatus.COMPLETED and done.verdict is not None and done.verdict.passed
    assert done.outcome is not None and done.outcome.agent_id == "a2"
    assert publisher.sent[-1][2] == "outcome:t1" and outcomes(publisher)[-1].counts_as_success


async def test_a_failed_check_ends_the_task_when_no_bid_is_left_or_the_budget_would_not_cover_the_next() -> (
    None
):
    publisher = RecordingPublisher()
    actor = await next_bid_task(publisher, budget_usd=0.15)  # a1 spent 0.10; a2 estimates 0.10
    ended = record_of(await actor.mark_outcome(said(actor, "a1", "2 + 3 = 6")))
    assert ended.status is AllocationStatus.FAILED and (ended.failure_reason or "").startswith("CHECK_FAILED")
    assert [turn.agent_id for turn in ended.awards] == ["a1"]

    publisher = RecordingPublisher()
    actor = await next_bid_task(publisher)
    await actor.mark_outcome(said(actor, "a1", "2 + 3 = 6"))
    ended = record_of(await actor.mark_outcome(said(actor, "a2", "2 + 3 = 7")))
    assert ended.status is AllocationStatus.FAILED and [turn.agent_id for turn in ended.awards] == [
        "a1",
        "a2",
    ]
    assert ended.outcome is not None and ended.outcome.agent_id == "a2", (
        "the last turn's outcome is the task's"
    )
    assert [message_id for _, _, message_id in publisher.sent if message_id and "outcome" in message_id] == [
        "outcome:t1.1",
        "outcome:t1",
    ]


async def test_a_checker_apps_failed_verdict_passes_the_task_on_too() -> None:
    publisher = RecordingPublisher()
    checkers = ScriptedCheckers(CheckAnswer(passed=False, reason="off by 3"))
    actor = hosted(Task, "t1", TaskBoardDeps(cast(Publisher, publisher), board_index(), checkers))
    await actor._on_activate()
    await actor.post_task(task_spec(acceptance={"check": CHECKER, "on_failure": "next_bid"}))
    await actor.record_allocation(result(("a1", 0.9), ("a2", 0.5)))
    await actor.mark_outcome(said(actor, "a1", "the ledger balances"))
    await fire_check(actor)

    passed = record_of(await actor.get_task())
    assert passed.status is AllocationStatus.ALLOCATED and passed.awards[-1].agent_id == "a2"
    assert passed.awards[0].verdict is not None and passed.awards[0].verdict.checked_by == "ledger-tests"
    assert actor.state.check_tries == 0 and CHECK_REMINDER not in reminders(actor)


class Escalations:
    """The escalation service as the board sees it: `park` keeps (or returns) the record under
    its id; a person's decision is `decide`."""

    def __init__(self) -> None:
        self.records: dict[str, EscalationRecord] = {}
        self.parked = 0

    def __call__(self, escalation_id: str) -> Escalations.Handle:
        return Escalations.Handle(self, escalation_id)

    class Handle:
        def __init__(self, owner: Escalations, escalation_id: str) -> None:
            self.owner, self.escalation_id = owner, escalation_id

        async def park(self, request: ParkRequest) -> EscalationRecord:
            self.owner.parked += 1
            existing = self.owner.records.get(self.escalation_id)
            parked = park(
                self.escalation_id, request.waiting_party, request.context, now=datetime.now(UTC),
                who=request.who, why=request.why, existing=existing,
            )  # fmt: skip
            self.owner.records[self.escalation_id] = parked
            return parked

    def decide(self, escalation_id: str, response: EscalationResponse, who: str, why: str) -> None:
        record = self.records[escalation_id]
        self.records[escalation_id] = resolve(record, response, who, why, datetime.now(UTC))


PERSON_ON_A_WRONG_SUM = {
    "check": {"kind": "expected", "match": "number", "expected": "5"},
    "on_failure": "person",
}


async def person_task(publisher: RecordingPublisher, escalations: Escalations | None, **spec: object) -> Task:
    deps = TaskBoardDeps(
        cast(Publisher, publisher), board_index(), ScriptedCheckers(),
        escalations=cast(EscalationActors, escalations),
    )  # fmt: skip
    actor = hosted(Task, "t1", deps)
    await actor._on_activate()
    await actor.post_task(task_spec(acceptance=PERSON_ON_A_WRONG_SUM, **spec))
    await actor.record_allocation(result(("a1", 0.9), ("a2", 0.5)))
    return actor


async def test_a_failed_check_waits_for_a_person_who_sees_the_output_and_why() -> None:
    publisher, escalations = RecordingPublisher(), Escalations()
    actor = await person_task(publisher, escalations)
    waiting = record_of(await actor.mark_outcome(said(actor, "a1", "2 + 3 = 6")))
    assert waiting.status is AllocationStatus.ALLOCATED and waiting.outcome is not None
    assert waiting.verdict is not None and waiting.verdict.status is VerdictStatus.FAILED
    assert outcomes(publisher) == [], "nothing ends before the person decides"
    [(escalation_id, parked)] = escalations.records.items()
    assert (
        escalation_id == "check-t1.1"
        and parked.waiting_party.kind == "task"
        and parked.waiting_party.id == "t1"
    )
    context = parked.context
    assert isinstance(context, EscalationContext) and context.output_summary == "2 + 3 = 6"
    assert context.error_history == [
        waiting.failure_reason or lifecycle.check_failure_reason(waiting.verdict)
    ]
    assert "6 is not within 0 of 5" in context.validation_results[0].failure_reason
    assert reminders(actor)[PERSON_REMINDER].period == timedelta(seconds=60), "a look each minute"

    await actor.on_reminder(PERSON_REMINDER, b"")  # no decision yet: parked again, still waiting
    assert escalations.parked == 2 and record_of(await actor.get_task()).status is AllocationStatus.ALLOCATED

    escalations.decide(escalation_id, EscalationResponse(action=EscalationAction.SKIP), "ana", "6 was meant")
    ended = record_of(await actor.person_decided())
    assert ended.status is AllocationStatus.COMPLETED
    assert ended.verdict is not None and ended.verdict.passed and ended.verdict.kind == "person"
    assert "accepted by ana though the expected check failed" in ended.verdict.reason
    assert "6 was meant" in ended.verdict.reason
    [report] = outcomes(publisher)
    assert report.counts_as_success and report.verdict == ended.verdict
    assert PERSON_REMINDER not in reminders(actor)
    assert record_of(await actor.person_decided()) == ended and len(outcomes(publisher)) == 1, "applied once"


async def test_a_person_fails_the_task_or_hands_it_to_the_next_bid() -> None:
    publisher, escalations = RecordingPublisher(), Escalations()
    actor = await person_task(publisher, escalations)
    await actor.mark_outcome(said(actor, "a1", "2 + 3 = 6"))
    escalations.decide("check-t1.1", EscalationResponse(action=EscalationAction.ABORT), "ana", "wrong sum")
    await actor.on_reminder(PERSON_REMINDER, b"")  # the announcement was lost: the look applies it
    failed = record_of(await actor.get_task())
    assert failed.status is AllocationStatus.FAILED and failed.failure_reason is not None
    assert failed.failure_reason.startswith("CHECK_FAILED") and failed.failure_reason.endswith(
        "ana decided: wrong sum"
    )
    [report] = outcomes(publisher)
    assert report.counts_as_success is False and report.outcome.actual_success, "an overclaim"

    publisher, escalations = RecordingPublisher(), Escalations()
    actor = await person_task(publisher, escalations)
    await actor.mark_outcome(said(actor, "a1", "2 + 3 = 6"))
    escalations.decide("check-t1.1", EscalationResponse(action=EscalationAction.REASSIGN), "ana", "try a2")
    passed = record_of(await actor.person_decided())
    assert passed.status is AllocationStatus.ALLOCATED and [turn.agent_id for turn in passed.awards] == [
        "a1",
        "a2",
    ]
    assert passed.awards[0].verdict is not None and passed.outcome is None
    [award] = publisher.on(topics.TASK_AWARDED)[1:]
    assert award.agent_id == "a2" and publisher.sent[-2][2] == "outcome:t1.1"
    # a2's answer fails the check too: a second escalation, for the second turn.
    await actor.mark_outcome(said(actor, "a2", "2 + 3 = 7"))
    assert "check-t1.2" in escalations.records


async def test_a_reassignment_to_nobody_left_or_past_the_budget_fails_the_task_saying_why() -> None:
    publisher, escalations = RecordingPublisher(), Escalations()
    actor = await person_task(publisher, escalations, budget_usd=0.15)  # a1 spent 0.10; a2 estimates 0.10
    await actor.mark_outcome(said(actor, "a1", "2 + 3 = 6"))
    escalations.decide("check-t1.1", EscalationResponse(action=EscalationAction.REASSIGN), "ana", "try a2")
    failed = record_of(await actor.person_decided())
    assert failed.status is AllocationStatus.FAILED
    assert (failed.failure_reason or "").endswith("no bid could take it over within its budget and deadline")


async def test_without_an_escalation_service_a_failed_check_fails_the_task_saying_no_person_was_asked() -> (
    None
):
    publisher = RecordingPublisher()
    actor = await person_task(publisher, None)
    failed = record_of(await actor.mark_outcome(said(actor, "a1", "2 + 3 = 6")))
    assert failed.status is AllocationStatus.FAILED and "no person could be asked" in (
        failed.failure_reason or ""
    )


def test_a_failed_check_takes_skip_abort_or_reassign_and_a_reassignment_a_bidder_not_tried() -> None:
    for action in (EscalationAction.RETRY, EscalationAction.MODIFY_PROMPT):
        with pytest.raises(InvalidArgument, match=r"skip .* abort .* or reassign"):
            lifecycle.check_person_action(action)
    record = lifecycle.record_outcome(
        lifecycle.allocate(lifecycle.TaskRecord(spec=task_spec(acceptance=PERSON_ON_A_WRONG_SUM)),
                           result(("a1", 0.9), ("a2", 0.5))),
        TaskOutcome(task_id="t1", agent_id="a1", actual_success=True, actual_cost_usd=0.1, actual_steps=1,
                    summary="2 + 3 = 6"),
        datetime.now(UTC),
    )  # fmt: skip
    assert lifecycle.awaiting_person(record)
    assert lifecycle.next_turn_for(record, None).agent_id == "a2"
    with pytest.raises(InvalidArgument, match="those left: a2"):
        lifecycle.next_turn_for(record, "a1")
