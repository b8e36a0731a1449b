"""Outcome learning: remember how past step executions went and feed what recurs back into prompts.

A run that failed because a file was not created will likely fail the same way next time unless
the prompt says so. This package keeps one `StepOutcome` per execution and derives from the history:

* patterns (`patterns.detect_patterns`), once at least `MIN_OUTCOMES_FOR_PATTERNS` (5) outcomes exist —
  fewer is anecdote, not a pattern: failure categories, semantic failure phrases, error codes and
  validation types that recur in at least `MIN_PATTERN_FREQUENCY` (2) outcomes;
* `similar.query_similar`: past outcomes ranked by a documented similarity (`similar.similarity`);
* `prompts.get_relevant_patterns`: pattern texts ready to inject into the next prompt; the caller
  stores the injected texts in `patterns_applied`, which is what makes effectiveness measurable;
* `effectiveness.pattern_effectiveness`: success rate (`success_without_retry`) with a pattern
  applied vs without;
* `suggestions.historical_suggestions`: similar past escalations, successful outcomes first (what
  `EscalationContext.historical_suggestions` shows a person deciding a new escalation).

All of that is pure functions over a list of outcomes (the record in `record`, the fields derived
from its validation results in `derived`). Storage is the `OutcomeStore` protocol (`store`: a Dapr
state store in a service, `DaprOutcomeStore`; `InMemoryOutcomeStore` serves tests), and
`learner.OutcomeLearner` composes the two.

Choices behind the data model:

* `validation_pass_rate` is a fraction in [0, 1], like every other rate in Agora.
* `execution_duration`, `completion_mode_used` and `validation_pass_rate` may be None: an
  outcome records what was measured, and an escalation's record or an agent's task run has no
  timing, completion mode or validations to report, rather than made-up values.
* `final_status` is an `OutcomeStatus`; an outcome *succeeded* when it is COMPLETED.
* Besides what was measured, an outcome carries `outcome_id` (stable store key, makes
  re-recording idempotent), `failure_type` (the triage classification), and `escalation_action`,
  `escalation_guidance`, `escalation_confidence`, `escalation_id` (the escalation decision taken
  for this step, if any), which `historical_suggestions` turns into the escalation module's
  `HistoricalSuggestion`.
* No caching of detected patterns: the store may be shared by several replicas, so a cache here
  could not tell when another replica recorded an outcome.

Each name is imported from the module that holds its idea (`agora.core.outcomes.record`...);
this package exports nothing itself.
"""

__all__: list[str] = []
