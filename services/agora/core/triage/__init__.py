"""Failure triage: say *why* an agent run failed, then pick the recovery that fits that reason.

Without a reason every failure gets the same blunt answer (retry from scratch, or give up). A
wrong tool call needs the manifest, a schema mismatch needs the schema, a 503 needs a pause;
retrying blindly fixes only the last. So a failed trajectory goes through three pure steps:

    diagnose / classify  ─►  FailureContext  ─►  triage(context, strategy)  ─►  TriageDecision

* `diagnosis.classify` assigns exactly one `FailureType` (`failures`) by the documented, ordered
  rules in `diagnosis.diagnose`; `diagnosis.build_failure_context` packages the diagnosis with
  the run (`context`: `Step`, `FailureContext`).
* `recovery.DEFAULT_RECOVERY` is the table of default recoveries (`actions`: `RecoveryAction`),
  one per failure type; `recovery.default_recovery` fills it in with what the context knows (the
  violated constraint, the expected schema, the checkpoint...). A strategy callable (or a
  mapping of them per failure type) overrides the default (`decision.triage`).
* Repeated failures escalate: once the same failure type has had `repeat_limit` recovery attempts
  in this run (`attempt_history`), the next one goes to a person whatever the strategy says,
  so a run cannot retry the same broken thing forever (fewer than 3 recoveries of a type: retry;
  from the third on: escalate to a person).

Texts are compared by their content words (`words.content_tokens`), as outcome learning does.

Choices behind the data model:

* `raw_error` is kept as text (``"TypeName: message"``), not as an exception object, so a
  `FailureContext` survives a JSON round trip (it crosses Dapr as state or events).
* `critical_step_index` and `loop_steps` are positions in `trajectory` (equal to `Step.index`
  when steps are recorded in order, as `record_step` does).
* `FailureContext` carries `available_tools` and `constraints`: the classifier needs the
  manifest to spot a wrong tool, and the task's constraints to spot one being ignored.
* `RecoveryAction` is one model with a `kind` (retry, replan, rollback, resume, escalate) and the
  details for that kind; "Backoff and retry" is a retry with `backoff_s > 0`, "Replan with
  compressed context" a replan with `compress_context`. `attempt_history` records the kind's
  string value, so a strategy can test ``kind == "retry"`` against plain strings.

Each name is imported from the module that holds its idea (`agora.core.triage.decision`...);
this package exports nothing itself.
"""

__all__: list[str] = []
