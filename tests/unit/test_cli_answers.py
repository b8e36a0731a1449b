"""What an agent said of a task (its answer, or why it failed) is shown with the outcome: by
`agora task show` and by the demo."""

from __future__ import annotations

import pytest

from agora.cli import demo
from agora.cli.tasks import task_lines
from agora.core.market import AllocationStatus, TaskOutcome, TaskSpec
from agora.core.task_lifecycle import StatusChange, TaskRecord


def ended(summary: str, *, success: bool, steps: int) -> TaskRecord:
    status = AllocationStatus.COMPLETED if success else AllocationStatus.FAILED
    return TaskRecord(
        spec=TaskSpec(task_id="demo-churn", description="Query churn", required_skills=["sql"]),
        status=status,
        outcome=TaskOutcome(
            task_id="demo-churn", agent_id="analyst", actual_success=success, actual_cost_usd=0.01,
            actual_steps=steps, summary=summary,
        ),
        history=[StatusChange(status=s) for s in ("PENDING", "BIDDING", "ALLOCATED", status)],
    )  # fmt: skip


def test_task_show_gives_the_agent_s_answer_on_one_line() -> None:
    lines = task_lines(ended("Done: Query churn;\nanalyst found 3 plans", success=True, steps=2))
    assert lines[-2:] == [
        "  outcome: success by analyst, 2 steps, $0.0100",
        "  summary: Done: Query churn; analyst found 3 plans",
    ]
    assert task_lines(ended("", success=True, steps=2))[-1].startswith("  outcome: ")


def test_the_demo_quotes_the_answer_and_counts_one_step_as_one(capsys: pytest.CaptureFixture[str]) -> None:
    demo._print_task(ended("the agent gave up: Could not finish: Query churn", success=False, steps=1))
    assert capsys.readouterr().out.splitlines()[-1] == (
        "    outcome: failed in 1 step, $0.0100: 'the agent gave up: Could not finish: Query churn'"
    )
