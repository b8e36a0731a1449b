"""Why a run failed: the taxonomy a failed run is classified into (`FailureType`); its values
are stable public identifiers."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["FailureType"]


class FailureType(StrEnum):
    """Why a run failed. The string values are stable public identifiers (logs, stored state)."""

    WRONG_TOOL_CALLED = "wrong_tool_called"
    """A tool outside the manifest was called (or the runtime did not know it)."""
    CONSTRAINT_IGNORED = "constraint_ignored"
    """A constraint of the task was violated."""
    LOOP_DETECTED = "loop_detected"
    """The agent repeated the same action (or came back to the same state) without progress."""
    HALLUCINATED_STATE = "hallucinated_state"
    """The agent acted on state that does not exist (a file, record or id it assumed)."""
    PLAN_INCOMPLETE = "plan_incomplete"
    """The agent stopped, or ran out of steps, before finishing the plan."""
    SCHEMA_MISMATCH = "schema_mismatch"
    """Input or output did not fit the expected schema (validation, JSON parse errors)."""
    CONTEXT_OVERFLOW = "context_overflow"
    """The prompt outgrew the model's context window."""
    GOAL_DRIFT = "goal_drift"
    """The latest steps have nothing to do with the original task any more."""
    EXTERNAL_FAULT = "external_fault"
    """Something outside the agent failed: timeouts, connection errors, 5xx, rate limits."""
    UNKNOWN = "unknown"
    """No rule matched."""
