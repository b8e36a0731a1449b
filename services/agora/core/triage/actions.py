"""What can be done about a failure: the kinds of recovery (retry, replan, rollback, resume,
escalate) and one action with the details of its kind (`RecoveryAction`: a hint for the next
prompt, where to resume, the checkpoint, a pause before a retry, a compressed context, why a
person is asked)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RecoveryAction", "RecoveryKind"]


class RecoveryKind(StrEnum):
    RETRY = "retry"
    """Run the failed step again (with a hint, optionally after a pause)."""
    REPLAN = "replan"
    """Make a new plan for the task (with a hint; optionally from a compressed context)."""
    ROLLBACK = "rollback"
    """Restore a checkpoint and continue from there."""
    RESUME = "resume"
    """Continue from an unfinished subgoal, keeping the work done so far."""
    ESCALATE = "escalate"
    """Stop automated recovery and ask a person."""


class RecoveryAction(BaseModel):
    """What to do about a failure. The kind says which recovery; the other fields carry its details."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: RecoveryKind
    description: str = Field(default="", description="The recovery in words, e.g. 'Backoff and retry'.")
    hint: str | None = Field(default=None, description="Text for the agent's next prompt (_triage_hint).")
    subgoal: str | None = Field(default=None, description="Where to resume (_triage_subgoal).")
    checkpoint_id: str | None = Field(
        default=None, description="Checkpoint to roll back to; None with ROLLBACK = from the start."
    )
    backoff_s: float = Field(default=0.0, ge=0.0, description="Pause before a retry, in seconds.")
    compress_context: bool = Field(default=False, description="Replan from a summarised context.")
    reason: str | None = Field(default=None, description="Why (shown to the person on ESCALATE).")

    @classmethod
    def retry(cls, hint: str | None = None, *, backoff_s: float = 0.0) -> RecoveryAction:
        return cls(kind=RecoveryKind.RETRY, description="Retry", hint=hint, backoff_s=backoff_s)

    @classmethod
    def replan(cls, hint: str | None = None, *, compress_context: bool = False) -> RecoveryAction:
        return cls(
            kind=RecoveryKind.REPLAN, description="Replan", hint=hint, compress_context=compress_context
        )

    @classmethod
    def rollback(cls, checkpoint_id: str | None = None, *, hint: str | None = None) -> RecoveryAction:
        return cls(kind=RecoveryKind.ROLLBACK, description="Rollback", checkpoint_id=checkpoint_id, hint=hint)

    @classmethod
    def resume(cls, subgoal: str, *, hint: str | None = None) -> RecoveryAction:
        return cls(kind=RecoveryKind.RESUME, description="Resume from subgoal", subgoal=subgoal, hint=hint)

    @classmethod
    def escalate(cls, reason: str) -> RecoveryAction:
        return cls(kind=RecoveryKind.ESCALATE, description="Escalate", reason=reason)

    # Upper-case aliases, so a strategy reads like the action it names:
    # `RecoveryAction.ESCALATE("Too many retries.")`.
    @classmethod
    def RETRY(cls, hint: str | None = None, *, backoff_s: float = 0.0) -> RecoveryAction:
        return cls.retry(hint, backoff_s=backoff_s)

    @classmethod
    def REPLAN(cls, hint: str | None = None, *, compress_context: bool = False) -> RecoveryAction:
        return cls.replan(hint, compress_context=compress_context)

    @classmethod
    def ROLLBACK(cls, checkpoint_id: str | None = None, *, hint: str | None = None) -> RecoveryAction:
        return cls.rollback(checkpoint_id, hint=hint)

    @classmethod
    def RESUME(cls, subgoal: str, *, hint: str | None = None) -> RecoveryAction:
        return cls.resume(subgoal, hint=hint)

    @classmethod
    def ESCALATE(cls, reason: str) -> RecoveryAction:
        return cls.escalate(reason)
