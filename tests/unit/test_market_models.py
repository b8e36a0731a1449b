"""Market models: reference defaults, and validation errors that name the offending field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agora.core.market import (
    AllocationResult,
    AllocationStatus,
    Bid,
    ReputationRecord,
    TaskOutcome,
    TaskSpec,
)

SPEC: dict[str, Any] = {"task_id": "t-1", "description": "Summarise", "required_skills": ["web_search"]}
BID: dict[str, Any] = {
    "task_id": "t-1",
    "agent_id": "a",
    "self_reported_success_prob": 0.8,
    "estimated_cost_usd": 0.01,
    "estimated_steps": 3,
}
OUTCOME: dict[str, Any] = {
    "task_id": "t-1",
    "agent_id": "a",
    "actual_success": True,
    "actual_cost_usd": 0.01,
    "actual_steps": 3,
}


def assert_field_error(model: type[BaseModel], data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    assert any(error["loc"] and error["loc"][0] == field for error in info.value.errors()), info.value


def test_task_spec_defaults_match_the_reference() -> None:
    spec = TaskSpec.model_validate(SPEC)
    assert spec.preferred_skills == []
    assert spec.budget_usd is None
    assert spec.min_success_threshold == 0.5
    assert spec.deadline_ms is None
    assert spec.allow_partial is False


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("task_id", ""),
        ("task_id", "two words"),
        ("description", ""),
        ("required_skills", []),
        ("required_skills", [" "]),
        ("budget_usd", 0.0),
        ("budget_usd", -1.0),
        ("min_success_threshold", 1.01),
        ("min_success_threshold", -0.01),
        ("deadline_ms", 0),
    ],
)
def test_invalid_task_specs_name_the_field(field: str, value: object) -> None:
    assert_field_error(TaskSpec, {**SPEC, field: value}, field)


def test_task_spec_rejects_unknown_fields() -> None:
    assert_field_error(TaskSpec, {**SPEC, "budget": 1.0}, "budget")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("self_reported_success_prob", 1.5),
        ("self_reported_success_prob", -0.1),
        ("self_reported_success_prob", float("nan")),
        ("estimated_cost_usd", -0.01),
        ("estimated_steps", -1),
        ("agent_id", ""),
        ("task_id", ""),
    ],
)
def test_invalid_bids_name_the_field(field: str, value: object) -> None:
    assert_field_error(Bid, {**BID, field: value}, field)


def test_bids_get_unique_ids_and_are_immutable() -> None:
    first, second = Bid.model_validate(BID), Bid.model_validate(BID)
    assert first.bid_id != second.bid_id
    assert first.fallback is False
    assert first.fallback_reason is None
    with pytest.raises(ValidationError):
        first.estimated_cost_usd = 0.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value"),
    [("actual_cost_usd", -1.0), ("actual_steps", -1), ("task_id", ""), ("agent_id", "")],
)
def test_invalid_outcomes_name_the_field(field: str, value: object) -> None:
    assert_field_error(TaskOutcome, {**OUTCOME, field: value}, field)


def test_reputation_record_defaults_match_the_reference() -> None:
    record = ReputationRecord()
    assert (record.total_tasks, record.successful_tasks, record.success_rate) == (0, 0, 0.0)
    assert (record.cost_accuracy, record.calibration_factor, record.ucb_confidence) == (1.0, 1.0, 1.0)
    assert record.pending_self_reports == {}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("total_tasks", -1),
        ("success_rate", 1.2),
        ("calibration_factor", -0.5),
        ("cost_accuracy", -0.1),
    ],
)
def test_invalid_reputation_records_name_the_field(field: str, value: object) -> None:
    assert_field_error(ReputationRecord, {field: value}, field)


def test_reputation_record_cannot_have_more_successes_than_tasks() -> None:
    with pytest.raises(ValidationError, match="successful_tasks cannot exceed total_tasks"):
        ReputationRecord(total_tasks=1, successful_tasks=2)


def test_a_rejected_result_must_say_why() -> None:
    with pytest.raises(ValidationError, match="reject_reason"):
        AllocationResult(task_id="t-1", status=AllocationStatus.REJECTED)
    rejected = AllocationResult(task_id="t-1", status=AllocationStatus.REJECTED, reject_reason="no bids")
    assert rejected.winning_agent_id is None


def test_an_allocated_result_must_name_its_winner() -> None:
    with pytest.raises(ValidationError, match="winner"):
        AllocationResult(task_id="t-1", status=AllocationStatus.ALLOCATED, winning_agent_id="a")


def test_typed_errors_come_back_from_their_codes() -> None:
    from agora.core.errors import IllegalTransition, Internal, error_from
    from agora.core.escalation.record import AgentNotWaiting

    assert isinstance(error_from("ILLEGAL_TRANSITION", "x"), IllegalTransition)
    assert isinstance(error_from("AGENT_NOT_WAITING", "x"), AgentNotWaiting)
    unknown = error_from("SOMETHING_NEW", "x")
    assert type(unknown) is Internal and unknown.message == "SOMETHING_NEW: x"


def test_an_error_needing_more_than_a_message_comes_back_without_its_details() -> None:
    from agora.core.errors import error_from
    from agora.core.uncertainty.aborts import UncertaintyAbort

    abort = error_from("UNCERTAINTY_ABORT", "step '3' aborted")
    assert isinstance(abort, UncertaintyAbort)
    assert abort.message == "step '3' aborted" and abort.step is None
