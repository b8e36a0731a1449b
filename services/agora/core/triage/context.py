"""A failed run as triage sees it: its trajectory of recorded steps (`Step`) and the failure
context every strategy decides on (`FailureContext`: the classification with its evidence, the
task, its constraints and tool manifest, the last checkpoint, and the recoveries already tried
in this run)."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agora.core.triage.failures import FailureType

__all__ = ["FailureContext", "Step", "error_text", "prior_attempts"]


class Step(BaseModel):
    """A single recorded action in the agent's trajectory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(ge=0, description="Position in the trajectory.")
    action: str = Field(description="Human-readable description.")
    tool_called: str | None = None
    tool_input: dict[str, Any] | None = None
    tool_output: Any = None
    llm_output: str | None = None
    error: str | None = None
    timestamp: float = Field(default_factory=time.time, description="Unix timestamp (auto-set).")
    state_hash: str | None = Field(default=None, description="Optional hash of the state, for dedup.")
    metadata: dict[str, Any] = Field(default_factory=dict)


class FailureContext(BaseModel):
    """Everything needed to decide a recovery; passed to every strategy callable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failure_type: FailureType = FailureType.UNKNOWN
    trajectory: list[Step] = Field(default_factory=list)
    critical_step_index: int = Field(default=0, ge=0, description="Position of the failed step.")
    original_task: str = ""
    last_checkpoint_id: str | None = None
    loop_steps: list[int] | None = None
    violated_constraint: str | None = None
    expected_schema: dict[str, Any] | None = None
    raw_error: str | None = Field(default=None, description="The error as text: 'TypeName: message'.")
    metadata: dict[str, Any] = Field(default_factory=dict, description='Includes "attempt_number".')
    attempt_history: list[tuple[FailureType, str]] = Field(
        default_factory=list, description="(failure type, action kind) of every prior recovery in this run."
    )
    available_tools: list[str] | None = Field(
        default=None, description="The tool manifest, when known (None = not known)."
    )
    constraints: list[str] = Field(default_factory=list, description="The task's constraints.")

    @property
    def failed_step(self) -> Step | None:
        """The step at `critical_step_index`, or None (empty trajectory, index out of range)."""
        if self.critical_step_index < len(self.trajectory):
            return self.trajectory[self.critical_step_index]
        return None

    @property
    def steps_after_failure(self) -> list[Step]:
        return list(self.trajectory[self.critical_step_index + 1 :])

    @property
    def attempt_number(self) -> int:
        """0-based attempt index: `metadata["attempt_number"]`, else the number of prior attempts."""
        value = self.metadata.get("attempt_number")
        return value if isinstance(value, int) and value >= 0 else len(self.attempt_history)


def error_text(error: BaseException | str | None) -> str | None:
    """An exception as `"TypeName: message"` (strings pass through), so it can be stored."""
    if error is None or isinstance(error, str):
        return error
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def prior_attempts(context: FailureContext, failure_type: FailureType) -> list[str]:
    """The kinds of the recoveries already tried in this run for `failure_type`, in order."""
    return [kind for earlier, kind in context.attempt_history if earlier == failure_type]
