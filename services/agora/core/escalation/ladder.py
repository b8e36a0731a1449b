"""The escalation ladder: when a failed attempt of a step escalates and how far (retry
automatically, let the agent analyse, notify, wait for a decision, abort), from its attempt
number and its confidence."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_ESCALATION_CONFIG",
    "EscalationConfig",
    "EscalationLevel",
    "escalation_level",
    "next_level",
    "should_escalate",
    "within_retry_limit",
]


class EscalationLevel(StrEnum):
    """The rungs of the escalation ladder, lowest first."""

    AUTO_RETRY = "auto_retry"
    """Retry automatically, no one is involved."""
    AGENT_ANALYSIS = "agent_analysis"
    """An agent investigates the failure more deeply, then the step is retried."""
    NOTIFY = "notify"
    """A person is informed, but the step continues (is retried) without waiting."""
    REQUIRE_DECISION = "require_decision"
    """The step is parked (WAITING_FOR_HUMAN) until a decision arrives."""
    ABORT = "abort"
    """The workflow stops (graceful abort)."""

    @property
    def rank(self) -> int:
        return list(EscalationLevel).index(self)

    @property
    def waits_for_human(self) -> bool:
        return self is EscalationLevel.REQUIRE_DECISION


class EscalationConfig(BaseModel):
    """When to escalate and how far: confidence threshold 0.6, auto-retry on the first failure,
    retry limit 3, one attempt each of agent analysis and notify-and-continue, abort at 10."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    confidence_threshold: float = Field(
        default=0.6, ge=0.0, le=1.0, description="Confidence below which to escalate (0.0-1.0)."
    )
    auto_retry_on_first_failure: bool = Field(
        default=True,
        description="If True, auto-retry on first failure without escalating (reduces noise for "
        "transient issues).",
    )
    retry_limit: int = Field(
        default=3,
        ge=1,
        description="Attempts handled by plain automatic retry: after attempt n fails, retry while "
        "n < retry_limit, escalate from then on.",
    )
    agent_analysis_attempts: int = Field(
        default=1, ge=0, description="Failed attempts handled by agent analysis (0 skips the rung)."
    )
    notify_attempts: int = Field(
        default=1, ge=0, description="Failed attempts handled by notify-and-continue (0 skips the rung)."
    )
    max_attempts: int | None = Field(
        default=10,
        ge=1,
        description="After this many failed attempts the workflow aborts whatever was decided "
        "before (so a step cannot be retried for ever); None = only a decision aborts.",
    )


DEFAULT_ESCALATION_CONFIG = EscalationConfig()


def _check_attempt(attempt: int) -> None:
    if attempt < 1:
        raise ValueError(f"attempt numbers start at 1 (got {attempt})")


def _check_probability(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within [0, 1] (got {value})")


def should_escalate(
    confidence: float,
    *,
    attempt: int,
    config: EscalationConfig = DEFAULT_ESCALATION_CONFIG,
    confidence_boost: float = 0.0,
) -> bool:
    """Whether attempt number `attempt` (1 = the first attempt, i.e. retry_count + 1) scored so
    low that a decision-maker must be asked: confidence below the
    threshold, AND (not the first attempt OR auto_retry_on_first_failure is off).

    The comparison is strict: a confidence exactly at the threshold does not escalate.
    `confidence_boost` (from the previous `EscalationResponse`) is added to `confidence`, capped
    at 1.0, before the comparison.
    """
    _check_attempt(attempt)
    _check_probability("confidence", confidence)
    _check_probability("confidence_boost", confidence_boost)
    if min(1.0, confidence + confidence_boost) >= config.confidence_threshold:
        return False
    return attempt > 1 or not config.auto_retry_on_first_failure


def within_retry_limit(attempt: int, config: EscalationConfig = DEFAULT_ESCALATION_CONFIG) -> bool:
    """Whether failed attempt number `attempt` may simply be retried (attempt < retry_limit).
    False means escalate."""
    _check_attempt(attempt)
    return attempt < config.retry_limit


def escalation_level(attempt: int, config: EscalationConfig = DEFAULT_ESCALATION_CONFIG) -> EscalationLevel:
    """The ladder rung for a step whose attempt number `attempt` (1-based) has just failed.

    With R = retry_limit, A = agent_analysis_attempts, N = notify_attempts, M = max_attempts:

        attempt >= M (M set)      -> ABORT            (checked first: the hard cap wins)
        attempt <  R              -> AUTO_RETRY
        attempt <  R + A          -> AGENT_ANALYSIS
        attempt <  R + A + N      -> NOTIFY
        otherwise                 -> REQUIRE_DECISION

    Defaults (R=3, A=1, N=1, M=10): attempts 1-2 auto-retry (so attempts 1-3 run
    automatically), 3 agent analysis, 4 notify, 5-9 require a decision, 10 and
    later abort. A=N=0 gives the simple form: retry twice, then ask a person.
    """
    _check_attempt(attempt)
    if config.max_attempts is not None and attempt >= config.max_attempts:
        return EscalationLevel.ABORT
    analysis_end = config.retry_limit + config.agent_analysis_attempts
    if attempt < config.retry_limit:
        return EscalationLevel.AUTO_RETRY
    if attempt < analysis_end:
        return EscalationLevel.AGENT_ANALYSIS
    if attempt < analysis_end + config.notify_attempts:
        return EscalationLevel.NOTIFY
    return EscalationLevel.REQUIRE_DECISION


def next_level(
    attempt: int,
    *,
    confidence: float | None = None,
    config: EscalationConfig = DEFAULT_ESCALATION_CONFIG,
    confidence_boost: float = 0.0,
) -> EscalationLevel:
    """The ladder rung, raised to REQUIRE_DECISION when `should_escalate` says the attempt's
    confidence is too low: a confident-enough failure climbs the ladder one attempt at a time,
    a low-confidence one (after the first attempt, by default) goes straight to a decision-maker.
    ABORT is never lowered. Without a confidence this is `escalation_level`."""
    level = escalation_level(attempt, config)
    if (
        confidence is not None
        and level.rank < EscalationLevel.REQUIRE_DECISION.rank
        and should_escalate(confidence, attempt=attempt, config=config, confidence_boost=confidence_boost)
    ):
        return EscalationLevel.REQUIRE_DECISION
    return level
