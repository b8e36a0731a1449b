"""A task's acceptance check, judged on the market's side: the kinds the board runs itself, the
verdict beside the agent's claim, and what the reputation learns from it."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from agora.core.acceptance import (
    DEFAULT_DISPUTE_WINDOW_S,
    Acceptance,
    DisputeVerdict,
    ExpectedAnswer,
    JsonSchemaCheck,
    MatchMode,
    PublisherCheck,
    Verdict,
    VerdictStatus,
    claim_stands,
    judge_output,
)
from agora.core.errors import Forbidden
from agora.core.market import (
    AllocationResult,
    AllocationStatus,
    Bid,
    BidScore,
    ReputationRecord,
    TaskOutcome,
    TaskSpec,
)
from agora.core.reputation import (
    OVERCLAIM_WEIGHT,
    ReputationTracker,
    apply_outcome,
    correct_outcome,
    counted_outcome,
    outcome_weight,
)
from agora.core.task_lifecycle import (
    NotDisputable,
    TaskRecord,
    allocate,
    check_app_dispute,
    dispute,
    record_outcome,
)

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def number(expected: str, tolerance: float = 0.0) -> ExpectedAnswer:
    return ExpectedAnswer(match=MatchMode.NUMBER, expected=expected, tolerance=tolerance)


@pytest.mark.parametrize(
    ("output", "status"),
    [
        ("585 + 740 = 1325", VerdictStatus.PASSED),
        ("The sum is 1,325.", VerdictStatus.PASSED),
        ("585 + 740 = 2250", VerdictStatus.FAILED),
        ("694 + 167", VerdictStatus.FAILED),  # its last number is an operand, not the sum
        ("I could not add them", VerdictStatus.FAILED),
    ],
)
def test_a_number_is_the_output_s_last_number_within_the_tolerance(
    output: str, status: VerdictStatus
) -> None:
    verdict = judge_output(number("1325"), output, "taskboard")
    assert verdict.status is status, verdict
    assert verdict.kind == "expected" and verdict.checked_by == "taskboard" and verdict.reason


def test_a_tolerance_admits_a_number_that_close_and_no_further() -> None:
    assert judge_output(number("3.14", 0.01), "pi is about 3.1416", "t").passed
    assert not judge_output(number("3.14", 0.001), "pi is about 3.1416", "t").passed


def test_an_exact_answer_is_compared_stripped_and_case_folded_only_when_asked() -> None:
    assert judge_output(ExpectedAnswer(expected="Paris"), "  Paris\n", "t").passed
    assert not judge_output(ExpectedAnswer(expected="Paris"), "paris", "t").passed
    assert judge_output(ExpectedAnswer(expected="Paris", case_sensitive=False), "paris", "t").passed


def test_a_pattern_must_match_the_whole_output() -> None:
    check = ExpectedAnswer(match=MatchMode.REGEX, expected=r"\d{4}-\d{2}-\d{2}")
    assert judge_output(check, "2026-12-02", "t").passed
    assert not judge_output(check, "on 2026-12-02", "t").passed


def test_a_pattern_that_backtracks_too_long_leaves_the_output_unchecked_not_passed() -> None:
    check = ExpectedAnswer(match=MatchMode.REGEX, expected=r"(.*a){20}b")
    started = time.monotonic()
    verdict = judge_output(check, "a" * 3000, "t")
    assert time.monotonic() - started < 5
    assert verdict.status is VerdictStatus.UNCHECKED, verdict
    assert "longer than" in verdict.reason


def test_a_schema_check_names_where_the_output_breaks_it() -> None:
    check = JsonSchemaCheck(
        json_schema={"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}
    )
    assert judge_output(check, '{"total": 12}', "t").passed
    broken = judge_output(check, '{"total": "twelve"}', "t")
    assert broken.status is VerdictStatus.FAILED and "total" in broken.reason
    assert "not JSON" in judge_output(check, "twelve", "t").reason


@pytest.mark.parametrize(
    "check",
    [
        {"kind": "expected", "match": "number", "expected": "twelve"},
        {"kind": "expected", "match": "exact", "expected": "7", "tolerance": 1},
        {"kind": "expected", "match": "regex", "expected": "(unclosed"},
        {"kind": "expected", "match": "regex", "expected": "a" * 513},
        {"kind": "json_schema", "json_schema": {"type": "no-such-type"}},
        {"kind": "json_schema", "json_schema": {"enum": ["x" * 20_000]}},
        {"kind": "telepathy"},
    ],
)
def test_a_check_that_cannot_be_run_as_written_is_refused_when_the_task_is_posted(
    check: dict[str, object],
) -> None:
    with pytest.raises(ValidationError):
        TaskSpec(task_id="t1", description="d", required_skills=["math"], acceptance={"check": check})


def awarded(acceptance: Acceptance | None) -> TaskRecord:
    spec = TaskSpec(
        task_id="t1", description="add 585 and 740", required_skills=["math"], acceptance=acceptance
    )
    bid = Bid(
        task_id="t1", agent_id="a1", self_reported_success_prob=0.9, estimated_cost_usd=0.1, estimated_steps=1
    )
    score = BidScore(
        bid_id=bid.bid_id, agent_id="a1", raw_success_prob=0.9, calibrated_success_prob=0.9,
        reputation_score=0.5, cost_score=0.5, composite=0.8, ucb_bonus=0.0, final_score=0.8,
    )  # fmt: skip
    result = AllocationResult(
        task_id="t1", status=AllocationStatus.ALLOCATED, winning_agent_id="a1",
        winning_bid=bid, winning_score=score, all_scores=[score], all_bids=[bid],
    )  # fmt: skip
    return allocate(TaskRecord(spec=spec), result, NOW)


def claimed(summary: str, success: bool = True) -> TaskOutcome:
    return TaskOutcome(task_id="t1", agent_id="a1", actual_success=success, actual_cost_usd=0.1,
                       actual_steps=1, summary=summary)  # fmt: skip


def test_a_success_claim_the_check_contradicts_ends_the_task_failed_with_the_check_s_reason() -> None:
    ended = record_outcome(awarded(Acceptance(check=number("1325"))), claimed("585 + 740 = 2250"), NOW)
    assert ended.status is AllocationStatus.FAILED
    assert ended.outcome is not None and ended.outcome.actual_success  # the claim, kept as made
    assert ended.verdict is not None and ended.verdict.status is VerdictStatus.FAILED
    assert ended.failure_reason is not None and ended.failure_reason.startswith("CHECK_FAILED")
    assert "2250" in ended.failure_reason


def test_an_answer_the_check_passes_completes_the_task_whatever_the_agent_claimed() -> None:
    ended = record_outcome(awarded(Acceptance(check=number("1325"))), claimed("1325", success=False), NOW)
    assert ended.status is AllocationStatus.COMPLETED
    assert ended.verdict is not None and ended.verdict.passed and ended.verdict.at == NOW


def test_without_a_check_the_agent_s_word_stands_and_no_verdict_is_recorded() -> None:
    ended = record_outcome(awarded(None), claimed("2250"), NOW)
    assert ended.status is AllocationStatus.COMPLETED and ended.verdict is None


def test_a_run_ended_by_the_market_s_own_error_is_not_checked() -> None:
    outcome = claimed("DEADLINE_EXCEEDED: the run was still going at its deadline", success=False)
    ended = record_outcome(awarded(Acceptance(check=number("1325"))), outcome, NOW)
    assert ended.status is AllocationStatus.FAILED and ended.verdict is None


def test_an_outcome_weighs_one_when_checked_two_when_it_overclaimed_and_the_set_weight_unchecked() -> None:
    assert outcome_weight(True, VerdictStatus.PASSED, 0.3) == 1.0
    assert outcome_weight(False, VerdictStatus.FAILED, 0.3) == 1.0
    assert outcome_weight(True, VerdictStatus.FAILED, 0.3) == OVERCLAIM_WEIGHT
    assert outcome_weight(True, VerdictStatus.UNCHECKED, 0.3) == 0.3
    assert outcome_weight(True, None, 0.0) == 0.0


def test_an_overclaim_costs_the_agent_more_than_an_honest_failure() -> None:
    start = ReputationRecord(agent_id="a1")
    honest = apply_outcome(start, claimed("2250", success=False), estimated_cost_usd=None, self_reported=0.9,
                           counts_as_success=False, verdict=VerdictStatus.FAILED)  # fmt: skip
    overclaim = apply_outcome(start, claimed("2250"), estimated_cost_usd=None, self_reported=0.9,
                              counts_as_success=False, verdict=VerdictStatus.FAILED)  # fmt: skip
    assert honest.evidence == 1.0 and overclaim.evidence == OVERCLAIM_WEIGHT
    assert overclaim.calibration_factor < honest.calibration_factor < start.calibration_factor
    assert overclaim.overclaims == 1 and honest.overclaims == 0
    # Both are one outcome of the agent's, for the market's count.
    assert honest.total_tasks == overclaim.total_tasks == 1


def test_with_an_unchecked_weight_of_zero_the_agent_s_word_moves_nothing() -> None:
    start = ReputationRecord(agent_id="a1", total_tasks=4, successful_tasks=1, success_rate=0.25)
    after = apply_outcome(
        start, claimed("x"), estimated_cost_usd=None, self_reported=0.9, unchecked_weight=0.0
    )
    assert after.evidence == start.evidence == 4.0 and after.success_rate == 0.25
    assert after.calibration_factor == start.calibration_factor
    assert after.total_tasks == 5


def test_a_record_kept_before_outcomes_were_weighed_reads_each_outcome_as_one() -> None:
    old = ReputationRecord.model_validate({"agent_id": "a1", "total_tasks": 10, "successful_tasks": 7,
                                           "success_rate": 0.7})  # fmt: skip
    assert (old.evidence, old.evidence_of_success) == (10.0, 7.0)


async def test_the_market_scores_a_checked_record_by_its_verdicts_not_the_claims() -> None:
    tracker = ReputationTracker()
    for _ in range(10):
        await tracker.update(claimed("wrong"), counts_as_success=False, verdict=VerdictStatus.FAILED)
    assert await tracker.reputation_score("a1") == 0.0
    successes, evidence = await tracker.track_record("a1")
    assert (successes, evidence) == (0.0, 10 * OVERCLAIM_WEIGHT)


def ended_with(summary: str) -> TaskRecord:
    return record_outcome(awarded(Acceptance(check=number("1325"))), claimed(summary), NOW)


def test_a_dispute_within_the_window_sets_the_verdict_and_the_end_and_keeps_the_one_it_replaced() -> None:
    passed = ended_with("1325")
    disputed = dispute(passed, "ana@example.com", "the ledger says 1326", DisputeVerdict.FAILED, NOW)
    assert disputed.status is AllocationStatus.FAILED
    assert disputed.verdict is not None and disputed.verdict.status is VerdictStatus.FAILED
    assert disputed.verdict.kind == "dispute" and "ana@example.com" in disputed.verdict.reason
    assert disputed.dispute is not None and disputed.dispute.before == passed.verdict
    assert [h.status for h in disputed.history][-2:] == [AllocationStatus.COMPLETED, AllocationStatus.FAILED]
    again = dispute(disputed, "ana@example.com", "the ledger says 1326", DisputeVerdict.FAILED, NOW)
    assert again is disputed, "the same dispute again changes nothing"
    with pytest.raises(NotDisputable, match="disputed already"):
        dispute(disputed, "bo@example.com", "no, it was right", DisputeVerdict.PASSED, NOW)


def test_a_dispute_past_the_window_or_of_a_task_without_an_outcome_is_refused() -> None:
    ended = ended_with("2250")
    late = ended.history[-1].at + timedelta(seconds=DEFAULT_DISPUTE_WINDOW_S + 1)
    with pytest.raises(NotDisputable, match="window"):
        dispute(ended, "ana@example.com", "it was right", DisputeVerdict.PASSED, late)
    with pytest.raises(NotDisputable, match="no outcome"):
        dispute(awarded(None), "ana@example.com", "x", DisputeVerdict.PASSED, NOW)
    revived = dispute(ended, "ana@example.com", "1325 was meant", DisputeVerdict.PASSED, NOW)
    assert revived.status is AllocationStatus.COMPLETED and revived.failure_reason is None


def test_a_publisher_checked_success_stands_passed_until_the_publisher_disputes_it() -> None:
    acceptance = Acceptance(check=PublisherCheck(), dispute_window_s=3600)
    ended = record_outcome(awarded(acceptance), claimed("585 + 740 = 2250"), NOW)
    assert ended.status is AllocationStatus.COMPLETED
    assert ended.verdict is not None and ended.verdict.status is VerdictStatus.PASSED
    until = (NOW + timedelta(hours=1)).isoformat()
    assert ended.verdict.kind == "publisher" and until in ended.verdict.reason
    disputed = dispute(ended, "ana@example.com", "585 + 740 is 1325", DisputeVerdict.FAILED, NOW)
    assert disputed.status is AllocationStatus.FAILED
    assert disputed.dispute is not None and disputed.dispute.before == ended.verdict


def test_a_failure_the_agent_reports_under_a_publisher_check_stands_as_reported_without_a_verdict() -> None:
    acceptance = Acceptance(check=PublisherCheck(), dispute_window_s=60)
    ended = record_outcome(awarded(acceptance), claimed("I could not add them", success=False), NOW)
    assert ended.status is AllocationStatus.FAILED and ended.verdict is None and ended.failure_reason is None


def test_a_publisher_check_without_a_dispute_window_is_refused() -> None:
    with pytest.raises(ValidationError, match="dispute window"):
        Acceptance(check=PublisherCheck(), dispute_window_s=0)


def test_an_app_disputes_only_a_task_that_answers_to_it_and_in_its_own_name() -> None:
    ended = ended_with("1325")
    answering = ended.model_copy(update={"spec": ended.spec.model_copy(update={"reply_to": "ledger"})})
    check_app_dispute(answering, "ledger", "ledger")  # its own task, in its own name
    with pytest.raises(Forbidden, match="in its own name: disputed_by must be ledger"):
        check_app_dispute(answering, "ledger", "ana@example.com")
    with pytest.raises(Forbidden, match="task t1 answers to ledger"):
        check_app_dispute(answering, "payroll", "payroll")
    with pytest.raises(Forbidden, match="answers to no app"):
        check_app_dispute(ended, "ledger", "ledger")


def test_a_correction_leaves_the_counts_as_if_the_outcome_had_been_counted_so_from_the_start() -> None:
    outcome = claimed("2250")
    start = ReputationRecord(agent_id="a1", total_tasks=3, successful_tasks=2, success_rate=2 / 3)
    wrong = counted_outcome(outcome, False, VerdictStatus.FAILED)
    counted = apply_outcome(start, outcome, estimated_cost_usd=None, self_reported=None,
                            counts_as_success=False, verdict=VerdictStatus.FAILED)  # fmt: skip
    right = counted_outcome(outcome, True, VerdictStatus.PASSED, revision=1)
    corrected = correct_outcome(counted, wrong, right, self_reported=None)
    straight = apply_outcome(start, outcome, estimated_cost_usd=None, self_reported=None,
                             counts_as_success=True, verdict=VerdictStatus.PASSED)  # fmt: skip
    for field in (
        "total_tasks",
        "successful_tasks",
        "evidence",
        "evidence_of_success",
        "success_rate",
        "overclaims",
    ):
        assert getattr(corrected, field) == pytest.approx(getattr(straight, field)), field


def test_a_judges_verdict_weighs_as_much_as_its_confidence() -> None:
    assert outcome_weight(True, VerdictStatus.PASSED, 1.0, confidence=0.6) == 0.6
    assert outcome_weight(True, VerdictStatus.FAILED, 1.0, confidence=0.5) == OVERCLAIM_WEIGHT * 0.5
    assert outcome_weight(False, VerdictStatus.FAILED, 1.0, confidence=0.25) == 0.25
    assert outcome_weight(True, None, 0.3, confidence=0.9) == 0.3, "no verdict: the agent's word"


def test_a_claim_stands_where_the_check_could_not_say_otherwise() -> None:
    verdict = Verdict(status=VerdictStatus.FAILED, kind="expected", reason="r", checked_by="taskboard")
    assert claim_stands(True, verdict) is False
    assert claim_stands(False, verdict.model_copy(update={"status": VerdictStatus.PASSED})) is True
    assert claim_stands(True, verdict.model_copy(update={"status": VerdictStatus.UNCHECKED})) is True
    assert claim_stands(False, None) is False
