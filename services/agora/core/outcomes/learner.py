"""The outcome learner: records outcomes in a store and answers the learning questions
(patterns, similar outcomes, relevant patterns, effectiveness, similar escalations) over the
stored history."""

from __future__ import annotations

from agora.core.outcomes.derived import with_derived_fields
from agora.core.outcomes.effectiveness import PatternEffectiveness, pattern_effectiveness
from agora.core.outcomes.patterns import MIN_OUTCOMES_FOR_PATTERNS, DetectedPattern, detect_patterns
from agora.core.outcomes.prompts import DEFAULT_PATTERN_LIMIT, get_relevant_patterns
from agora.core.outcomes.record import StepOutcome
from agora.core.outcomes.similar import DEFAULT_SIMILAR_LIMIT, QueryLike, query_similar
from agora.core.outcomes.store import OutcomeStore

__all__ = ["OutcomeLearner"]


class OutcomeLearner:
    """Records outcomes and answers the learning questions over the stored history.

    `history_limit` bounds the work per question: when set, only the last `history_limit`
    outcomes are analysed (`store.recent`), else all of them.
    """

    def __init__(
        self,
        store: OutcomeStore,
        *,
        min_outcomes: int = MIN_OUTCOMES_FOR_PATTERNS,
        history_limit: int | None = None,
    ) -> None:
        if min_outcomes < 1:
            raise ValueError(f"min_outcomes must be >= 1, got {min_outcomes!r}")
        if history_limit is not None and history_limit < 1:
            raise ValueError(f"history_limit must be >= 1 or None, got {history_limit!r}")
        self.store = store
        self.min_outcomes = min_outcomes
        self.history_limit = history_limit

    async def history(self) -> list[StepOutcome]:
        """The outcomes the questions are answered over (at most `history_limit`, the latest)."""
        if self.history_limit is None:
            return await self.store.all()
        return await self.store.recent(self.history_limit)

    async def record(self, outcome: StepOutcome) -> StepOutcome:
        """Store the outcome (with fields derived from its validation results, see
        `with_derived_fields`). When the history including it has at least `min_outcomes`
        outcomes, pattern detection runs and `patterns_detected` is set on it. Returns what
        was stored."""
        outcome = with_derived_fields(outcome)
        history = [o for o in await self.history() if o.outcome_id != outcome.outcome_id]
        patterns = detect_patterns([*history, outcome], min_outcomes=self.min_outcomes)
        if patterns:
            outcome = outcome.model_copy(update={"patterns_detected": [p.description for p in patterns]})
        await self.store.add(outcome)
        return outcome

    async def detect_patterns(self) -> list[DetectedPattern]:
        return detect_patterns(await self.history(), min_outcomes=self.min_outcomes)

    async def query_similar(
        self, context: QueryLike, limit: int = DEFAULT_SIMILAR_LIMIT
    ) -> list[StepOutcome]:
        return query_similar(await self.history(), context, limit)

    async def get_relevant_patterns(
        self, context: QueryLike, limit: int = DEFAULT_PATTERN_LIMIT
    ) -> list[str]:
        return get_relevant_patterns(await self.history(), context, limit, min_outcomes=self.min_outcomes)

    async def pattern_effectiveness(self) -> list[PatternEffectiveness]:
        return pattern_effectiveness(await self.history())
