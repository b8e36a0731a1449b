"""Pattern effectiveness: how outcomes fared with a pattern in their prompt against without it."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from agora.core.limits import Text
from agora.core.outcomes.record import StepOutcome

__all__ = ["PatternEffectiveness", "effectiveness_of", "pattern_effectiveness", "stable_pattern_text"]

_SEEN = re.compile(r"\s*\(seen \d+x\)")


def stable_pattern_text(text: str) -> str:
    """A pattern text without its "(seen Nx)" count, which grows as history does: the same
    pattern injected at different times counts as one for effectiveness."""
    return _SEEN.sub("", text).strip()


class PatternEffectiveness(BaseModel):
    """How outcomes fared with a pattern in their prompt vs without (success = success_without_retry)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: Text
    applied_count: int = Field(ge=0)
    applied_successes: int = Field(ge=0)
    applied_success_rate: float | None = Field(ge=0.0, le=1.0, description="None when never applied.")
    baseline_count: int = Field(ge=0, description="Outcomes whose prompt did not have the pattern.")
    baseline_successes: int = Field(ge=0)
    baseline_success_rate: float | None = Field(ge=0.0, le=1.0, description="None without a baseline.")
    lift: float | None = Field(description="applied - baseline success rate; None if either is unknown.")


def effectiveness_of(outcomes: Sequence[StepOutcome], pattern: str) -> PatternEffectiveness:
    """Success rate of outcomes where `pattern` was applied vs the outcomes where it was not.
    Patterns are compared by `stable_pattern_text`."""
    wanted = stable_pattern_text(pattern)
    applied = [o for o in outcomes if wanted in {stable_pattern_text(p) for p in o.patterns_applied}]
    applied_ids = {o.outcome_id for o in applied}
    baseline = [o for o in outcomes if o.outcome_id not in applied_ids]
    applied_ok = sum(o.success_without_retry for o in applied)
    baseline_ok = sum(o.success_without_retry for o in baseline)
    applied_rate = applied_ok / len(applied) if applied else None
    baseline_rate = baseline_ok / len(baseline) if baseline else None
    return PatternEffectiveness(
        pattern=wanted,
        applied_count=len(applied),
        applied_successes=applied_ok,
        applied_success_rate=applied_rate,
        baseline_count=len(baseline),
        baseline_successes=baseline_ok,
        baseline_success_rate=baseline_rate,
        lift=applied_rate - baseline_rate if applied_rate is not None and baseline_rate is not None else None,
    )


def pattern_effectiveness(outcomes: Sequence[StepOutcome]) -> list[PatternEffectiveness]:
    """`effectiveness_of` every pattern applied at least once; highest lift first (unknown lift
    last), then most applied, then by text."""
    patterns = sorted({stable_pattern_text(p) for o in outcomes for p in o.patterns_applied})
    results = [effectiveness_of(outcomes, p) for p in patterns]
    results.sort(key=lambda r: (r.lift is None, -(r.lift or 0.0), -r.applied_count, r.pattern))
    return results
