"""Failure triage: say *why* an agent run failed, then pick the recovery that fits that reason.

Without a reason every failure gets the same blunt answer (retry from scratch, or give up). A
wrong tool call needs the manifest, a schema mismatch needs the schema, a 503 needs a pause;
retrying blindly fixes only the last. So a failed trajectory goes through three pure steps:

    diagnose / classify  ─►  FailureContext  ─►  triage(context, strategy)  ─►  TriageDecision

* `classify` assigns exactly one `FailureType` by the documented, ordered rules in `diagnose`.
* `DEFAULT_RECOVERY` is the table of default recoveries, one per failure type; `triage` fills
  it in with what the context knows (the violated constraint, the expected schema, the
  checkpoint...). A strategy callable (or a mapping of them per failure type) overrides the
  default.
* Repeated failures escalate: once the same failure type has had `repeat_limit` recovery attempts
  in this run (`attempt_history`), the next one goes to a person whatever the strategy says,
  so a run cannot retry the same broken thing forever (fewer than 3 recoveries of a type: retry;
  from the third on: escalate to a person).

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
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# --- taxonomy --------------------------------------------------------------------------------


class FailureType(StrEnum):
    """Why a run failed. The string values are stable public identifiers (logs, stored state)."""

    WRONG_TOOL_CALLED = "wrong_tool_called"
    """A tool outside the manifest was called (or the runtime did not know it)."""
    CONSTRAINT_IGNORED = "constraint_ignored"
    """A constraint of the task was violated."""
    LOOP_DETECTED = "loop_detected"
    """The agent repeated the same action (or came back to the same state) without progress."""
    HALLUCINATED_STATE = "hallucinated_state"
    """The agent acted on state that does not exist (a file, record or id it assumed)."""
    PLAN_INCOMPLETE = "plan_incomplete"
    """The agent stopped, or ran out of steps, before finishing the plan."""
    SCHEMA_MISMATCH = "schema_mismatch"
    """Input or output did not fit the expected schema (validation, JSON parse errors)."""
    CONTEXT_OVERFLOW = "context_overflow"
    """The prompt outgrew the model's context window."""
    GOAL_DRIFT = "goal_drift"
    """The latest steps have nothing to do with the original task any more."""
    EXTERNAL_FAULT = "external_fault"
    """Something outside the agent failed: timeouts, connection errors, 5xx, rate limits."""
    UNKNOWN = "unknown"
    """No rule matched."""


class RecoveryKind(StrEnum):
    RETRY = "retry"
    """Run the failed step again (with a hint, optionally after a pause)."""
    REPLAN = "replan"
    """Make a new plan for the task (with a hint; optionally from a compressed context)."""
    ROLLBACK = "rollback"
    """Restore a checkpoint and continue from there."""
    RESUME = "resume"
    """Continue from an unfinished subgoal, keeping the work done so far."""
    ESCALATE = "escalate"
    """Stop automated recovery and ask a person."""


class RecoveryAction(BaseModel):
    """What to do about a failure. The kind says which recovery; the other fields carry its details."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: RecoveryKind
    description: str = Field(default="", description="The recovery in words, e.g. 'Backoff and retry'.")
    hint: str | None = Field(default=None, description="Text for the agent's next prompt (_triage_hint).")
    subgoal: str | None = Field(default=None, description="Where to resume (_triage_subgoal).")
    checkpoint_id: str | None = Field(
        default=None, description="Checkpoint to roll back to; None with ROLLBACK = from the start."
    )
    backoff_s: float = Field(default=0.0, ge=0.0, description="Pause before a retry, in seconds.")
    compress_context: bool = Field(default=False, description="Replan from a summarised context.")
    reason: str | None = Field(default=None, description="Why (shown to the person on ESCALATE).")

    @classmethod
    def retry(cls, hint: str | None = None, *, backoff_s: float = 0.0) -> RecoveryAction:
        return cls(kind=RecoveryKind.RETRY, description="Retry", hint=hint, backoff_s=backoff_s)

    @classmethod
    def replan(cls, hint: str | None = None, *, compress_context: bool = False) -> RecoveryAction:
        return cls(
            kind=RecoveryKind.REPLAN, description="Replan", hint=hint, compress_context=compress_context
        )

    @classmethod
    def rollback(cls, checkpoint_id: str | None = None, *, hint: str | None = None) -> RecoveryAction:
        return cls(kind=RecoveryKind.ROLLBACK, description="Rollback", checkpoint_id=checkpoint_id, hint=hint)

    @classmethod
    def resume(cls, subgoal: str, *, hint: str | None = None) -> RecoveryAction:
        return cls(kind=RecoveryKind.RESUME, description="Resume from subgoal", subgoal=subgoal, hint=hint)

    @classmethod
    def escalate(cls, reason: str) -> RecoveryAction:
        return cls(kind=RecoveryKind.ESCALATE, description="Escalate", reason=reason)

    # Upper-case aliases, so a strategy reads like the action it names:
    # `RecoveryAction.ESCALATE("Too many retries.")`.
    @classmethod
    def RETRY(cls, hint: str | None = None, *, backoff_s: float = 0.0) -> RecoveryAction:
        return cls.retry(hint, backoff_s=backoff_s)

    @classmethod
    def REPLAN(cls, hint: str | None = None, *, compress_context: bool = False) -> RecoveryAction:
        return cls.replan(hint, compress_context=compress_context)

    @classmethod
    def ROLLBACK(cls, checkpoint_id: str | None = None, *, hint: str | None = None) -> RecoveryAction:
        return cls.rollback(checkpoint_id, hint=hint)

    @classmethod
    def RESUME(cls, subgoal: str, *, hint: str | None = None) -> RecoveryAction:
        return cls.resume(subgoal, hint=hint)

    @classmethod
    def ESCALATE(cls, reason: str) -> RecoveryAction:
        return cls.escalate(reason)


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

DEFAULT_REPEAT_LIMIT = 3
"""Recovery attempts allowed per failure type in one run; the next failure of that type escalates
(retry while fewer than 3 recoveries were tried, then escalate to a person)."""

BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 60.0
"""External faults back off exponentially: `min(BASE * 2**n, MAX)` with `n` prior external-fault
attempts in this run, so a struggling dependency gets 1 s, 2 s, 4 s... never more than a minute."""

LOOP_REPEAT_THRESHOLD = 3
"""Occurrences of one identical step that make a loop. Twice can be a legitimate re-check;
a third identical call with nothing new in between is no longer progress."""

GOAL_DRIFT_WINDOW = 3
"""Trailing steps that must all be unrelated to the task (while an earlier step was related)
before the run counts as drifting; fewer would flag a single digression."""


# --- trajectory and contexts ------------------------------------------------------------------


class Step(BaseModel):
    """A single recorded action in the agent's trajectory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(ge=0, description="Position in the trajectory.")
    action: str = Field(description="Human-readable description.")
    tool_called: str | None = None
    tool_input: dict[str, Any] | None = None
    tool_output: Any = None
    llm_output: str | None = None
    error: str | None = None
    timestamp: float = Field(default_factory=time.time, description="Unix timestamp (auto-set).")
    state_hash: str | None = Field(default=None, description="Optional hash of the state, for dedup.")
    metadata: dict[str, Any] = Field(default_factory=dict)


class FailureContext(BaseModel):
    """Everything needed to decide a recovery; passed to every strategy callable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failure_type: FailureType = FailureType.UNKNOWN
    trajectory: list[Step] = Field(default_factory=list)
    critical_step_index: int = Field(default=0, ge=0, description="Position of the failed step.")
    original_task: str = ""
    last_checkpoint_id: str | None = None
    loop_steps: list[int] | None = None
    violated_constraint: str | None = None
    expected_schema: dict[str, Any] | None = None
    raw_error: str | None = Field(default=None, description="The error as text: 'TypeName: message'.")
    metadata: dict[str, Any] = Field(default_factory=dict, description='Includes "attempt_number".')
    attempt_history: list[tuple[FailureType, str]] = Field(
        default_factory=list, description="(failure type, action kind) of every prior recovery in this run."
    )
    available_tools: list[str] | None = Field(
        default=None, description="The tool manifest, when known (None = not known)."
    )
    constraints: list[str] = Field(default_factory=list, description="The task's constraints.")

    @property
    def failed_step(self) -> Step | None:
        """The step at `critical_step_index`, or None (empty trajectory, index out of range)."""
        if self.critical_step_index < len(self.trajectory):
            return self.trajectory[self.critical_step_index]
        return None

    @property
    def steps_after_failure(self) -> list[Step]:
        return list(self.trajectory[self.critical_step_index + 1 :])

    @property
    def attempt_number(self) -> int:
        """0-based attempt index: `metadata["attempt_number"]`, else the number of prior attempts."""
        value = self.metadata.get("attempt_number")
        return value if isinstance(value, int) and value >= 0 else len(self.attempt_history)


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

    def agent_kwargs(self) -> dict[str, Any]:
        """The kwargs for the agent: `_triage_context` plus the individual legacy kwargs."""
        return {
            "_triage_context": self,
            "_triage_hint": self.hint,
            "_triage_subgoal": self.subgoal,
            "_triage_state": dict(self.state),
        }


# --- classification --------------------------------------------------------------------------

_STOPWORDS_TEXT = (
    "a an and are as at be been but by can could did do does for from had has have if in into is it its "
    "of on or our so than that the their them then there these this those to was we were what when where "
    "which while who will with would you your i me my not no"
)
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def normalise_text(text: str) -> str:
    """NFKC, lower case, every run of non-alphanumerics (except `_`) collapsed to one space."""
    folded = unicodedata.normalize("NFKC", text).lower()
    return " ".join(re.findall(r"[a-z0-9_]+", folded))


def content_tokens(text: str) -> frozenset[str]:
    """The normalised words of `text` without stopwords and one-letter words: what similarity
    (Jaccard) and relatedness checks compare, so "the file" and "File!" count as the same word."""
    return frozenset(t for t in normalise_text(text).split() if len(t) > 1 and t not in STOPWORDS)


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


def error_text(error: BaseException | str | None) -> str | None:
    """An exception as `"TypeName: message"` (strings pass through), so it can be stored."""
    if error is None or isinstance(error, str):
        return error
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


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


# --- recovery --------------------------------------------------------------------------------

Strategy = Callable[[FailureContext], RecoveryAction | None]
"""Decides the recovery for a context; returning None means "no opinion, use the default"."""


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


def _prior_attempts(context: FailureContext, failure_type: FailureType) -> list[str]:
    return [kind for earlier, kind in context.attempt_history if earlier == failure_type]


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
        if "replan" in _prior_attempts(context, failure_type) and context.last_checkpoint_id:
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
        earlier = len(_prior_attempts(context, failure_type))
        update["backoff_s"] = min(BACKOFF_BASE_S * 2.0**earlier, BACKOFF_MAX_S)
    elif failure_type is F.UNKNOWN:
        update["reason"] = f"The failure could not be classified: {error}" if error else base.reason
    return base.model_copy(update=update)


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
    prior = _prior_attempts(context, failure_type)
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
