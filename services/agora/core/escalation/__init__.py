"""Escalation: asking a person (or another decision-maker) before or after a risky step.

Two mechanisms:

* **Proactive checkpoints** (`checkpoints`: `CheckpointTrigger`, `evaluate_checkpoint`):
  *before* a step runs, configured triggers (step numbers, prompt keywords, retry count) either
  warn or require an explicit confirmation (`CheckpointResponse`: proceed / abort / skip /
  modify_prompt).
* **Reactive escalation** (`ladder`: `should_escalate`, `escalation_level`, `next_level`):
  *after* an attempt, a low confidence or a run of failures moves the step up a ladder whose top
  rungs wait for a decision (`EscalationResponse`: retry / skip / abort / modify_prompt), shown
  what led there (`context`: `EscalationContext`) and how similar past decisions turned out
  (`suggestions`).

A wait for a decision is an `EscalationRecord` (`record`), held by the `Escalation` actor. Its
lifecycle:

    park ─► WAITING_FOR_HUMAN ─┬─ resolve(decision) ──────────────► RESOLVED
                               └─ expire(now >= deadline) ────────► EXPIRED  (default decision)

A decision is applied exactly once: resolving or expiring a record that no longer waits raises
`AgentNotWaiting` (resolve) or does nothing (expire). A decision to abort produces an
`AbortSummary` (partial progress and what completed), so an abort is graceful.
The answers themselves, of either kind, are in `decisions`.

`step` is the number of the step that waits (a plan step, a
task's attempt, a debate round...).

Everything here is pure and deterministic: time comes in as `now` (a timezone-aware datetime).
Each name is imported from the module that holds its idea (`agora.core.escalation.record`...);
this package exports nothing itself.
"""

__all__: list[str] = []
