"""Historical suggestions from outcomes: past escalations in situations similar to the present
one, and how they turned out, for `EscalationContext.historical_suggestions`."""

from __future__ import annotations

from collections.abc import Iterable

from agora.core.escalation.suggestions import HistoricalSuggestion, rank_suggestions
from agora.core.outcomes.record import StepOutcome
from agora.core.outcomes.similar import QueryLike, check_limit, rank_similar

__all__ = ["DEFAULT_SUGGESTION_LIMIT", "historical_suggestions"]

DEFAULT_SUGGESTION_LIMIT = 5


def historical_suggestions(
    outcomes: Iterable[StepOutcome], context: QueryLike, limit: int = DEFAULT_SUGGESTION_LIMIT
) -> list[HistoricalSuggestion]:
    """Past escalations similar to `context`, as `EscalationContext.historical_suggestions`:
    outcomes with an `escalation_action` and a similarity > 0 (any, for an empty query), ordered
    by `rank_suggestions` (successful outcomes first: what worked is the useful suggestion;
    then by similarity; equal ones most recent first). At most `limit`."""
    check_limit(limit)
    suggestions: list[HistoricalSuggestion] = []
    for scored in rank_similar((o for o in outcomes if o.escalation_action is not None), context):
        past = scored.outcome
        action, confidence = past.escalation_action, past.escalation_confidence
        if action is None or confidence is None:  # excluded above / by validation; narrows the types
            continue
        suggestions.append(
            HistoricalSuggestion(
                action=action,
                confidence=confidence,
                outcome_succeeded=past.succeeded,
                guidance=past.escalation_guidance,
                similarity=scored.score,
                escalation_id=past.escalation_id,
            )
        )
    return rank_suggestions(suggestions)[:limit]
