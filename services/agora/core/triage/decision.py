"""The triage decision: the recovery chosen for a classified failure, by the repeat limit
first (a failure type that already had `repeat_limit` recoveries in this run escalates), then
the caller's strategy, then the default (`triage`), with the context the agent is handed for
its next attempt (`TriageContext`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agora.core.triage.actions import RecoveryAction, RecoveryKind
from agora.core.triage.context import FailureContext, prior_attempts
from agora.core.triage.failures import FailureType
from agora.core.triage.recovery import default_recovery

__all__ = [
    "DEFAULT_REPEAT_LIMIT",
    "DecisionSource",
    "Strategy",
    "TriageContext",
    "TriageDecision",
    "triage",
]

DEFAULT_REPEAT_LIMIT = 3
"""Recovery attempts allowed per failure type in one run; the next failure of that type escalates
(retry while fewer than 3 recoveries were tried, then escalate to a person)."""

Strategy = Callable[[FailureContext], RecoveryAction | None]
"""Decides the recovery for a context; returning None means "no opinion, use the default"."""


class TriageContext(BaseModel):
    """Recovery context injected into the agent as `_triage_context` (one typed object instead of
    the scattered `_triage_hint`, `_triage_subgoal` and `_triage_state` kwargs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failure_type: FailureType
    attempt_number: int = Field(ge=0, description="0-based attempt index in this run.")
    hint: str | None = None
    subgoal: str | None = None
    state: dict[str, Any] = Field(
        default_factory=dict, description="Restored checkpoint state; filled by whoever restores it."
    )


class DecisionSource(StrEnum):
    DEFAULT = "default"
    """`default_recovery` for the failure type."""
    STRATEGY = "strategy"
    """The caller's strategy."""
    REPEAT_LIMIT = "repeat_limit"
    """Escalated because the same failure type already had `repeat_limit` attempts."""


class TriageDecision(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    failure_type: FailureType
    action: RecoveryAction
    source: DecisionSource
    attempt_number: int = Field(ge=0)
    prior_attempts_same_type: int = Field(ge=0, description="Earlier attempts for this failure type.")
    triage_context: TriageContext

    @property
    def escalated(self) -> bool:
        return self.action.kind is RecoveryKind.ESCALATE

    @property
    def history_entry(self) -> tuple[FailureType, str]:
        """What to append to `attempt_history` once this recovery has been attempted."""
        return (self.failure_type, self.action.kind.value)


def triage(
    context: FailureContext,
    strategy: Strategy | Mapping[FailureType, Strategy] | None = None,
    *,
    repeat_limit: int | None = DEFAULT_REPEAT_LIMIT,
) -> TriageDecision:
    """Decide the recovery for a classified failure.

    1. If this failure type already had `repeat_limit` recovery attempts in `attempt_history`,
       escalate — before asking the strategy, so a strategy cannot keep a run retrying forever.
       With the default 3, the 1st to 3rd failure of a type are recovered automatically and the 4th
       escalates. `repeat_limit=None` leaves escalation to the strategy.
    2. Otherwise ask `strategy` (a callable, or a mapping from failure type to callable); its
       action wins unless it returns None.
    3. Otherwise `default_recovery(context)`.
    """
    if repeat_limit is not None and repeat_limit < 0:
        raise ValueError(f"repeat_limit must be >= 0 or None, got {repeat_limit!r}")
    failure_type = context.failure_type
    prior = prior_attempts(context, failure_type)
    action: RecoveryAction | None = None
    source = DecisionSource.DEFAULT
    if repeat_limit is not None and len(prior) >= repeat_limit:
        tried = ", ".join(prior) or "none"
        action = RecoveryAction.escalate(
            f"{failure_type.value} failed again after {len(prior)} recovery attempt(s) ({tried}); "
            "automated recovery is not fixing it."
        )
        source = DecisionSource.REPEAT_LIMIT
    else:
        chosen = strategy.get(failure_type) if isinstance(strategy, Mapping) else strategy
        if chosen is not None:
            action = chosen(context)
            source = DecisionSource.STRATEGY
        if action is None:
            action = default_recovery(context)
            source = DecisionSource.DEFAULT
    attempt_number = context.attempt_number
    return TriageDecision(
        failure_type=failure_type,
        action=action,
        source=source,
        attempt_number=attempt_number,
        prior_attempts_same_type=len(prior),
        triage_context=TriageContext(
            failure_type=failure_type, attempt_number=attempt_number, hint=action.hint, subgoal=action.subgoal
        ),
    )
