"""A workflow whose steps break down ends through its failure handler, and an activity's
unforeseen error is not retried: the rules, without Dapr."""

from __future__ import annotations

from collections.abc import Generator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import httpx
import pytest
from dapr.ext.workflow import DaprWorkflowContext, TaskFailedError
from dapr.ext.workflow._durabletask.internal import protos as pb

from agora.core.errors import ConflictingRequest, InvalidArgument, NotFound, conflict_between
from agora.core.plans.request import PlanSubmission
from agora.runtime.service import check_deadline_ahead
from agora.runtime.sidecar import SidecarUnavailable
from agora.runtime.state import ConcurrencyConflict
from agora.runtime.workflows import RunFailure, failure_of, guarded, is_transient

Steps = Generator[Any, Any, Any]
NO_CONTEXT = cast(DaprWorkflowContext, None)
"""These steps never touch their context."""


def breaking_steps(_: Any, raw: Any) -> Steps:
    answer = yield f"first step of {raw}"
    if answer == "raise":
        raise KeyError("a case nobody foresaw")
    yield "second step"
    return "done"


def failure_steps(_: Any, raw: Any, failure: RunFailure) -> Steps:
    yield ("end the record of", raw, failure.reason)


def test_steps_that_do_not_break_run_as_they_are() -> None:
    run = guarded(breaking_steps, failure_steps)(NO_CONTEXT, "p1")
    assert next(run) == "first step of p1"
    assert run.send("go on") == "second step"
    with pytest.raises(StopIteration) as ended:
        run.send(None)
    assert ended.value.value == "done"


def test_a_defect_in_the_workflow_code_runs_the_failure_steps_with_the_error_as_the_reason() -> None:
    run = guarded(breaking_steps, failure_steps)(NO_CONTEXT, "p1")
    next(run)
    assert run.send("raise") == (
        "end the record of",
        "p1",
        "the run broke down: KeyError: 'a case nobody foresaw'",
    )
    with pytest.raises(StopIteration):
        run.send(None)


def test_an_activity_that_failed_for_good_runs_the_failure_steps_with_its_recorded_error() -> None:
    run = guarded(breaking_steps, failure_steps)(NO_CONTEXT, "p1")
    next(run)
    details = pb.TaskFailureDetails(errorType="NonRetryableError", errorMessage="plan.draft: KeyError: 'x'")
    ended = run.throw(TaskFailedError("p1: Activity task #3 failed", details))
    assert ended == (
        "end the record of",
        "p1",
        "the run broke down: NonRetryableError: plan.draft: KeyError: 'x'",
    )


def test_a_failure_reason_is_cut_to_a_note() -> None:
    assert len(failure_of(ValueError("x" * 10_000)).reason) == 2_048


@pytest.mark.parametrize(
    "error",
    [
        SidecarUnavailable("no sidecar"),
        ConcurrencyConflict("lost the race ten times"),
        httpx.ConnectError("refused"),
        ConnectionResetError(),
        TimeoutError(),
    ],
)
def test_the_world_out_of_reach_is_retried(error: Exception) -> None:
    assert is_transient(error)


@pytest.mark.parametrize(
    "error",
    [KeyError("k"), TypeError("t"), ValueError("v"), NotFound("no task"), InvalidArgument("bad")],
)
def test_a_defect_or_a_typed_refusal_is_not_retried(error: Exception) -> None:
    assert not is_transient(error)


def test_a_request_under_a_used_id_is_refused_naming_what_differs() -> None:
    earlier = PlanSubmission(task="a report", skills=["write"])
    later = PlanSubmission(task="another report", skills=["write"], escalate=False)
    refusal = conflict_between("plan", "p1", earlier, later)
    assert isinstance(refusal, ConflictingRequest) and refusal.http_status == 409
    assert "plan p1 already exists" in refusal.message
    assert "differs in: task, escalate" in refusal.message


def test_a_deadline_without_a_time_zone_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone"):
        PlanSubmission.model_validate({"task": "t", "deadline": "2030-01-01T00:00:00"})
    assert PlanSubmission.model_validate({"task": "t", "deadline": "2030-01-01T00:00:00Z"}).deadline


def test_a_deadline_already_past_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidArgument) as refused:
        check_deadline_ahead(datetime.now(UTC) - timedelta(seconds=1))
    assert refused.value.http_status == 422
    assert refused.value.field_errors[0].loc == ["body", "deadline"]
    check_deadline_ahead(datetime.now(UTC) + timedelta(minutes=1))
    check_deadline_ahead(None)
