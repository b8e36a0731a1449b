"""Classification: which one `FailureType` a failed trajectory has, by ordered rules over its
error text and its steps (`diagnose`, with its evidence as a `Diagnosis`; `classify`), and the
`FailureContext` a strategy decides on, built from the trajectory and its diagnosis
(`build_failure_context`)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agora.core.triage.context import FailureContext, Step, error_text
from agora.core.triage.failures import FailureType
from agora.core.triage.words import content_tokens, normalise_text

__all__ = [
    "GOAL_DRIFT_WINDOW",
    "LOOP_REPEAT_THRESHOLD",
    "Diagnosis",
    "build_failure_context",
    "classify",
    "diagnose",
    "diagnose_context",
]

F = FailureType

LOOP_REPEAT_THRESHOLD = 3
"""Occurrences of one identical step that make a loop. Twice can be a legitimate re-check;
a third identical call with nothing new in between is no longer progress."""

GOAL_DRIFT_WINDOW = 3
"""Trailing steps that must all be unrelated to the task (while an earlier step was related)
before the run counts as drifting; fewer would flag a single digression."""


def _patterns(*sources: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(source) for source in sources)


def _status(codes: str) -> str:
    """An HTTP status in `codes` (a regex) where it reads as a status: after "http", "status",
    "code", "error" or "response"; or opening the message as "503:" / "503 -". A bare number
    ("500 rows processed") is not a status."""
    return rf"\b(?:http|status|code|error|response)\b\W{{0,3}}(?:{codes})\b|^(?:{codes})\s*[:\-]"


_EXTERNAL = _patterns(
    r"time(?:d)?\s?out",
    r"connect(?:ion)?\s*(?:refused|reset|aborted|error|closed|timeout)",
    r"\b(?:econn(?:refused|reset)|etimedout|enotfound)\b|name resolution",
    r"temporar(?:y|ily) (?:failure|unavailable)",
    r"service unavailable|bad gateway|gateway timeout|internal server error",
    r"rate.?limit|too many requests",
    r"network (?:error|is unreachable)|broken pipe",
    _status(r"5\d\d|429"),
)
_CONTEXT_OVERFLOW = _patterns(
    r"context[\s_]*(?:length|window|size)",
    r"maximum context|too many tokens|token limit|prompt is too long",
    r"maximum (?:number of )?tokens|reduce the length",
)
_WRONG_TOOL = _patterns(
    r"(?:unknown|invalid|unsupported|unavailable|unregistered) (?:tool|function)",
    r"(?:tool|function) (?:\S+ )?(?:not found|does not exist|(?:is )?not available|is not registered)",
    r"no such (?:tool|function)|not a valid tool",
)
_SCHEMA = _patterns(
    r"validation ?error|schema|json ?decode|invalid json|\bjson\b|expecting value|malformed",
    r"field required|missing (?:\d+ )?required|required (?:property|field|argument)",
    r"unexpected keyword argument|is not of type|type mismatch",
    r"expected (?:type|an? \w+|object|array|string|integer|number|boolean)",
    r"(?:could not|failed to|unable to) parse|parse error",
)
_CONSTRAINT = _patterns(
    r"constraint|violat|not (?:allowed|permitted)|forbidden|prohibited|disallowed|must not",
    r"(?:over|exceed(?:s|ed)?) (?:the )?budget|budget exceeded",
)
_HALLUCINATED = _patterns(
    r"not ?found|does not exist|doesn't exist|no such",
    r"keyerror|unknown (?:id|key|file|record|entity|user|item)",
    _status("404"),
    r"hallucinat|no (?:record|entry|row)s? (?:found|with)",
)
_GOAL_DRIFT = _patterns(r"drift|off[- ]?(?:task|topic)|unrelated to the (?:task|goal)")
_PLAN_INCOMPLETE = _patterns(
    r"max(?:imum)?[\s_]*(?:steps|iterations|turns)|step (?:limit|budget)|ran out of steps",
    r"incomplete|not (?:finished|completed)|unfinished|(?:remaining|pending) (?:subgoal|step|task)s?",
)

_NEGATION = re.compile(r"\b(?:do not|don't|dont|never|must not|mustn't|should not|shouldn't|avoid|no)\s+(.+)")
_CONSTRAINT_FILLER = frozenset(
    {"use", "using", "call", "calling", "tool", "tools", "any", "ever", "run", "running", "invoke", "touch"}
)


class Diagnosis(BaseModel):
    """A classification with its evidence: which step, which rule, which constraint or loop."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failure_type: FailureType
    critical_step_index: int = Field(default=0, ge=0)
    loop_steps: list[int] | None = None
    violated_constraint: str | None = None
    evidence: str = Field(description="Which rule fired and on what, for logs.")


def _match(patterns: Sequence[re.Pattern[str]], text: str) -> str | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return found.group(0).strip()
    return None


def _step_text(step: Step) -> str:
    parts = [step.action, step.tool_called or "", step.llm_output or ""]
    if step.tool_input:
        parts.append(json.dumps(step.tool_input, sort_keys=True, default=str))
    return " ".join(parts)


def _signature(step: Step) -> tuple[str, ...]:
    if step.state_hash:
        return ("state", step.state_hash)
    if step.tool_called:
        return ("tool", step.tool_called, json.dumps(step.tool_input, sort_keys=True, default=str))
    return ("action", normalise_text(step.action), normalise_text(step.llm_output or ""))


def _find_loop(trajectory: Sequence[Step]) -> tuple[int, list[int]] | None:
    """The position where some step signature reaches `LOOP_REPEAT_THRESHOLD` occurrences (the
    earliest such position), with every position that signature occurs at."""
    seen: Counter[tuple[str, ...]] = Counter()
    for position, step in enumerate(trajectory):
        signature = _signature(step)
        seen[signature] += 1
        if seen[signature] >= LOOP_REPEAT_THRESHOLD:
            occurrences = [i for i, other in enumerate(trajectory) if _signature(other) == signature]
            return position, occurrences
    return None


def _violated_constraint(trajectory: Sequence[Step], constraints: Sequence[str]) -> tuple[int, str] | None:
    """A prohibition ("never X", "do not X", "avoid X", "no X") whose content words all occur in
    one step's action, tool name, input or LLM output; filler words such as "use", "call" and
    "tool" are ignored so "never call the delete_file tool" matches a call of `delete_file`."""
    for constraint in constraints:
        negated = _NEGATION.search(constraint.lower())
        if not negated:
            continue
        forbidden = content_tokens(negated.group(1)) - _CONSTRAINT_FILLER
        if not forbidden:
            continue
        for position, step in enumerate(trajectory):
            if forbidden <= content_tokens(_step_text(step)):
                return position, constraint
    return None


def _schema_violation(step: Step, schema: Mapping[str, Any]) -> str | None:
    """A top-level check of the step's output against `schema`: the declared object/array type
    and the `required` keys. (Not a full JSON Schema validator: enough to see the output's shape
    is wrong, which is what "retry with schema hint" needs.)"""
    output: Any = step.tool_output
    if output is None and step.llm_output is not None:
        try:
            output = json.loads(step.llm_output)
        except ValueError:
            return "output is not valid JSON"
    if output is None:
        return None
    expected_type = schema.get("type")
    if expected_type == "object" and not isinstance(output, dict):
        return f"expected an object, got {type(output).__name__}"
    if expected_type == "array" and not isinstance(output, list):
        return f"expected an array, got {type(output).__name__}"
    required = schema.get("required")
    if isinstance(output, dict) and isinstance(required, list):
        missing = [key for key in required if isinstance(key, str) and key not in output]
        if missing:
            return f"missing required keys {missing}"
    return None


def _drift_start(trajectory: Sequence[Step], original_task: str) -> int | None:
    task_words = content_tokens(original_task)
    if not task_words:
        return None
    related = [i for i, step in enumerate(trajectory) if task_words & content_tokens(_step_text(step))]
    if not related:
        return None
    first_unrelated = related[-1] + 1
    if len(trajectory) - first_unrelated >= GOAL_DRIFT_WINDOW:
        return first_unrelated
    return None


def diagnose(
    trajectory: Sequence[Step],
    *,
    original_task: str = "",
    raw_error: BaseException | str | None = None,
    constraints: Sequence[str] = (),
    available_tools: Collection[str] | None = None,
    expected_schema: Mapping[str, Any] | None = None,
) -> Diagnosis:
    """Classify a failed trajectory. The first rule that applies wins, in this order:

    The *error text* is `raw_error` plus the error of the last step that has one (the failure
    that ended the run); the failed step is that step (else the last step).

    1. EXTERNAL_FAULT — the error text says timeout / timed out, connection refused or reset,
       DNS failure, rate limit / 429, 5xx status or "service unavailable"/"bad gateway". First,
       because an outside fault says nothing about the agent's reasoning: back off and retry.
    2. CONTEXT_OVERFLOW — context length / window exceeded, too many tokens, prompt too long.
    3. WRONG_TOOL_CALLED — a step called a tool outside `available_tools`, or the error says
       unknown / invalid / unavailable tool, tool not found.
    4. SCHEMA_MISMATCH — validation or schema error, JSON decode/parse errors, missing required
       field, unexpected keyword argument, wrong type; or (with `expected_schema`) the last
       step's output is not JSON, not the declared object/array, or lacks a `required` key.
    5. CONSTRAINT_IGNORED — the error says constraint, violates, not allowed, forbidden, must
       not, over budget; or a step does what one of `constraints` prohibits ("never X",
       "do not X", "avoid X", "no X": every content word of X appears in the step).
    6. LOOP_DETECTED — one identical step occurs `LOOP_REPEAT_THRESHOLD` (3) times: same
       `state_hash` if set, else the same tool with the same input, else the same action and
       LLM output. Checked after the error rules because a specific error (schema, constraint)
       gives a more specific fix than "you are repeating yourself".
    7. HALLUCINATED_STATE — the error says not found, does not exist, no such file, KeyError,
       unknown id, 404: the agent acted on state that is not there.
    8. GOAL_DRIFT — the error says drift / off-task; or, given `original_task`, the last
       `GOAL_DRIFT_WINDOW` (3) or more steps share no content word with the task while an
       earlier step did.
    9. PLAN_INCOMPLETE — the error says max steps / iterations, incomplete, unfinished, pending
       subgoals; or there is no error at all and the trajectory is not empty: the agent stopped
       before the task was done.
    10. UNKNOWN — an error no rule recognises, or nothing to go on (no steps, no error).
    """
    steps = list(trajectory)
    raw = error_text(raw_error)
    error_positions = [i for i, step in enumerate(steps) if step.error]
    last_error_position = error_positions[-1] if error_positions else None
    text = " ".join(
        part.lower()
        for part in (raw, steps[last_error_position].error if last_error_position is not None else None)
        if part
    )
    failed = last_error_position if last_error_position is not None else max(len(steps) - 1, 0)

    def found(failure_type: FailureType, evidence: str, position: int = failed, **extra: Any) -> Diagnosis:
        return Diagnosis(failure_type=failure_type, critical_step_index=position, evidence=evidence, **extra)

    if text and (hit := _match(_EXTERNAL, text)):
        return found(F.EXTERNAL_FAULT, f"error text: {hit!r}")
    if text and (hit := _match(_CONTEXT_OVERFLOW, text)):
        return found(F.CONTEXT_OVERFLOW, f"error text: {hit!r}")
    if available_tools is not None:
        manifest = set(available_tools)
        for position, step in enumerate(steps):
            if step.tool_called is not None and step.tool_called not in manifest:
                return found(
                    F.WRONG_TOOL_CALLED, f"tool {step.tool_called!r} is not in the manifest", position
                )
    if text and (hit := _match(_WRONG_TOOL, text)):
        return found(F.WRONG_TOOL_CALLED, f"error text: {hit!r}")
    if text and (hit := _match(_SCHEMA, text)):
        return found(F.SCHEMA_MISMATCH, f"error text: {hit!r}")
    if expected_schema is not None and steps and (problem := _schema_violation(steps[-1], expected_schema)):
        return found(F.SCHEMA_MISMATCH, f"expected schema: {problem}", len(steps) - 1)
    violation = _violated_constraint(steps, constraints)
    if text and (hit := _match(_CONSTRAINT, text)):
        # Name the constraint when a step visibly breaks one, or when the task has only one.
        violated = violation[1] if violation else (constraints[0] if len(constraints) == 1 else None)
        return found(F.CONSTRAINT_IGNORED, f"error text: {hit!r}", violated_constraint=violated)
    if violation:
        position, constraint = violation
        evidence = f"step {position} does what {constraint!r} prohibits"
        return found(F.CONSTRAINT_IGNORED, evidence, position, violated_constraint=constraint)
    if loop := _find_loop(steps):
        position, occurrences = loop
        return found(F.LOOP_DETECTED, f"identical steps at {occurrences}", position, loop_steps=occurrences)
    if text and (hit := _match(_HALLUCINATED, text)):
        return found(F.HALLUCINATED_STATE, f"error text: {hit!r}")
    if text and (hit := _match(_GOAL_DRIFT, text)):
        return found(F.GOAL_DRIFT, f"error text: {hit!r}")
    if (drift := _drift_start(steps, original_task)) is not None:
        return found(F.GOAL_DRIFT, f"steps from {drift} on share no word with the task", drift)
    if text and (hit := _match(_PLAN_INCOMPLETE, text)):
        return found(F.PLAN_INCOMPLETE, f"error text: {hit!r}")
    if not text and steps:
        return found(F.PLAN_INCOMPLETE, "the run stopped without an error before the task was done")
    return found(F.UNKNOWN, f"unrecognised error: {text!r}" if text else "no steps and no error")


def classify(
    source: FailureContext | Sequence[Step],
    *,
    original_task: str = "",
    raw_error: BaseException | str | None = None,
    constraints: Sequence[str] = (),
    available_tools: Collection[str] | None = None,
    expected_schema: Mapping[str, Any] | None = None,
) -> FailureType:
    """The `FailureType` of a trajectory, by the rules of `diagnose`. Given a `FailureContext`,
    its own fields are used and the keyword arguments are ignored."""
    if isinstance(source, FailureContext):
        return diagnose_context(source).failure_type
    return diagnose(
        source,
        original_task=original_task,
        raw_error=raw_error,
        constraints=constraints,
        available_tools=available_tools,
        expected_schema=expected_schema,
    ).failure_type


def diagnose_context(context: FailureContext) -> Diagnosis:
    return diagnose(
        context.trajectory,
        original_task=context.original_task,
        raw_error=context.raw_error,
        constraints=context.constraints,
        available_tools=context.available_tools,
        expected_schema=context.expected_schema,
    )


def build_failure_context(
    trajectory: Sequence[Step],
    *,
    original_task: str = "",
    raw_error: BaseException | str | None = None,
    constraints: Sequence[str] = (),
    available_tools: Collection[str] | None = None,
    expected_schema: Mapping[str, Any] | None = None,
    last_checkpoint_id: str | None = None,
    attempt_history: Sequence[tuple[FailureType, str]] = (),
    metadata: Mapping[str, Any] | None = None,
) -> FailureContext:
    """Diagnose the trajectory and package the result with everything a strategy needs.
    `metadata["attempt_number"]` is set to the number of prior attempts unless given."""
    diagnosis = diagnose(
        trajectory,
        original_task=original_task,
        raw_error=raw_error,
        constraints=constraints,
        available_tools=available_tools,
        expected_schema=expected_schema,
    )
    extra = {"attempt_number": len(attempt_history), **(metadata or {})}
    return FailureContext(
        failure_type=diagnosis.failure_type,
        trajectory=list(trajectory),
        critical_step_index=diagnosis.critical_step_index,
        original_task=original_task,
        last_checkpoint_id=last_checkpoint_id,
        loop_steps=diagnosis.loop_steps,
        violated_constraint=diagnosis.violated_constraint,
        expected_schema=dict(expected_schema) if expected_schema is not None else None,
        raw_error=error_text(raw_error),
        metadata=extra,
        attempt_history=list(attempt_history),
        available_tools=sorted(available_tools) if available_tools is not None else None,
        constraints=list(constraints),
    )
