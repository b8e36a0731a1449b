"""The default recovery of each failure type (`DEFAULT_RECOVERY`), and that recovery filled in
with what the failure's context knows (`default_recovery`: the tool manifest, the violated
constraint, the repeated steps, the checkpoint, the subgoal, the expected schema, the task, an
exponential backoff)."""

from __future__ import annotations

import json
from typing import Any

from agora.core.triage.actions import RecoveryAction, RecoveryKind
from agora.core.triage.context import FailureContext, prior_attempts
from agora.core.triage.failures import FailureType

__all__ = ["BACKOFF_BASE_S", "BACKOFF_MAX_S", "DEFAULT_RECOVERY", "default_recovery"]

F = FailureType
K = RecoveryKind

DEFAULT_RECOVERY: dict[FailureType, RecoveryAction] = {
    F.WRONG_TOOL_CALLED: RecoveryAction(kind=K.RETRY, description="Retry with correct manifest"),
    F.CONSTRAINT_IGNORED: RecoveryAction(kind=K.REPLAN, description="Replan with constraint reminder"),
    F.LOOP_DETECTED: RecoveryAction(kind=K.REPLAN, description="Replan or rollback"),
    F.HALLUCINATED_STATE: RecoveryAction(kind=K.ROLLBACK, description="Rollback to checkpoint"),
    F.PLAN_INCOMPLETE: RecoveryAction(kind=K.RESUME, description="Resume from subgoal"),
    F.SCHEMA_MISMATCH: RecoveryAction(kind=K.RETRY, description="Retry with schema hint"),
    F.CONTEXT_OVERFLOW: RecoveryAction(
        kind=K.REPLAN, description="Replan with compressed context", compress_context=True
    ),
    F.GOAL_DRIFT: RecoveryAction(kind=K.REPLAN, description="Replan with goal restatement"),
    F.EXTERNAL_FAULT: RecoveryAction(kind=K.RETRY, description="Backoff and retry", backoff_s=1.0),
    F.UNKNOWN: RecoveryAction(
        kind=K.ESCALATE, description="Escalate", reason="The failure could not be classified."
    ),
}
"""The default recovery per failure type, before `default_recovery` adds the context's details."""

BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 60.0
"""External faults back off exponentially: `min(BASE * 2**n, MAX)` with `n` prior external-fault
attempts in this run, so a struggling dependency gets 1 s, 2 s, 4 s... never more than a minute."""


def default_recovery(context: FailureContext) -> RecoveryAction:
    """`DEFAULT_RECOVERY[context.failure_type]` with the context's details filled in:

    * wrong tool: a hint naming the tool and the manifest;
    * constraint ignored: a hint restating the violated constraint (or the task's constraints);
    * loop: replan with a hint naming the repeated steps — or, when a replan for a loop was
      already tried in this run and a checkpoint exists, roll back to it instead;
    * hallucinated state: roll back to `last_checkpoint_id` (None = start over), hint with the error;
    * plan incomplete: resume from `metadata["subgoal"]` when given, else from the original task;
    * schema mismatch: a hint with the expected schema (compact JSON) or the error;
    * context overflow: replan with `compress_context`;
    * goal drift: replan with the original task restated;
    * external fault: retry after `min(1 s * 2**n, 60 s)`, `n` = earlier external-fault attempts;
    * unknown: escalate with the error.
    """
    failure_type = context.failure_type
    base = DEFAULT_RECOVERY[failure_type]
    step = context.failed_step
    error = context.raw_error or (step.error if step else None)
    update: dict[str, Any] = {}
    if failure_type is F.WRONG_TOOL_CALLED:
        tool = f"'{step.tool_called}' " if step and step.tool_called else ""
        manifest = ", ".join(context.available_tools) if context.available_tools else None
        update["hint"] = f"The tool {tool}is not available." + (
            f" Call only tools from the manifest: {manifest}."
            if manifest
            else " Call only tools from the manifest."
        )
    elif failure_type is F.CONSTRAINT_IGNORED:
        violated = context.violated_constraint or "; ".join(context.constraints) or error
        update["hint"] = (
            f"A constraint was violated: {violated}. Replan so that every step respects it."
            if violated
            else "A constraint of the task was violated. Replan so that every step respects the constraints."
        )
    elif failure_type is F.LOOP_DETECTED:
        repeated = context.loop_steps or []
        action = step.action if step else "the same action"
        update["hint"] = f"Steps {repeated} repeat {action!r} without progress; take a different approach."
        if "replan" in prior_attempts(context, failure_type) and context.last_checkpoint_id:
            update |= {"kind": K.ROLLBACK, "checkpoint_id": context.last_checkpoint_id}
    elif failure_type is F.HALLUCINATED_STATE:
        update["checkpoint_id"] = context.last_checkpoint_id
        detail = f" ({error})" if error else ""
        update["hint"] = (
            f"The previous attempt relied on state that does not exist{detail}. "
            "Check the actual state before acting on it."
        )
    elif failure_type is F.PLAN_INCOMPLETE:
        subgoal = context.metadata.get("subgoal")
        update["subgoal"] = subgoal if isinstance(subgoal, str) and subgoal else context.original_task
        done = len(context.trajectory)
        update["hint"] = f"{done} step(s) were completed; continue from the unfinished subgoal."
    elif failure_type is F.SCHEMA_MISMATCH:
        if context.expected_schema is not None:
            schema = json.dumps(context.expected_schema, sort_keys=True, separators=(",", ":"))
            update["hint"] = f"The output must match this JSON schema: {schema}"
        else:
            update["hint"] = (
                f"The input or output did not match the expected schema: {error or 'unknown error'}"
            )
    elif failure_type is F.CONTEXT_OVERFLOW:
        update["hint"] = (
            "The context outgrew the model's window; summarise earlier steps and keep only what matters."
        )
    elif failure_type is F.GOAL_DRIFT:
        update["hint"] = f"Stay on the original task: {context.original_task}"
    elif failure_type is F.EXTERNAL_FAULT:
        earlier = len(prior_attempts(context, failure_type))
        update["backoff_s"] = min(BACKOFF_BASE_S * 2.0**earlier, BACKOFF_MAX_S)
    elif failure_type is F.UNKNOWN:
        update["reason"] = f"The failure could not be classified: {error}" if error else base.reason
    return base.model_copy(update=update)
