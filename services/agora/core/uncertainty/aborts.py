"""When a session takes no more steps: a step that reached CRITICAL uncertainty aborts it
(`UncertaintyAbort`), and a step reported to a session that waits for a person or was aborted
is refused (`SessionNotRunning`)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from agora.core.errors import AgoraError
from agora.core.uncertainty.belief import StepUncertainty

__all__ = ["SessionNotRunning", "UncertaintyAbort"]


class SessionNotRunning(AgoraError):
    """A step was reported for a session that waits for a person or was aborted."""

    code = "SESSION_NOT_RUNNING"
    http_status = 409


class UncertaintyAbort(AgoraError):
    """A step reached CRITICAL uncertainty: the session ends and takes no more steps. `step` is
    the step that did it (None on the far side of Dapr, where only the code and message
    arrive)."""

    code = "UNCERTAINTY_ABORT"
    http_status = 409

    def __init__(self, step: StepUncertainty | None, message: str | None = None) -> None:
        if message is None:
            assert step is not None, "an abort names its step or gives a message"
            message = (
                f"step {step.step_id!r} ({step.step_type}) aborted: propagated confidence "
                f"{step.propagated_confidence:.3f} is {step.level.value}"
            )
        super().__init__(message)
        self.step = step

    @classmethod
    def from_message(cls, message: str, details: Mapping[str, JsonValue] | None = None) -> UncertaintyAbort:
        return cls(None, message)
