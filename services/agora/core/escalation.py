"""Escalation: asking a person (or another decision-maker) before or after a risky step.

Two mechanisms:

* **Proactive checkpoints** (`CheckpointTrigger`, `should_checkpoint`): *before* a step runs,
  configured triggers (step numbers, prompt keywords, retry count) either warn or require an
  explicit confirmation (`CheckpointResponse`: proceed / abort / skip / modify_prompt).
* **Reactive escalation** (`should_escalate`, `escalation_level`): *after* an attempt, a low
  confidence or a run of failures moves the step up a ladder whose top rungs wait for a
  decision (`EscalationResponse`: retry / skip / abort / modify_prompt).

A wait for a decision is an `EscalationRecord`, held by the `Escalation` actor. Its lifecycle:

    park ─► WAITING_FOR_HUMAN ─┬─ resolve(decision) ──────────────► RESOLVED
                               └─ expire(now >= deadline) ────────► EXPIRED  (default decision)

A decision is applied exactly once: resolving or expiring a record that no longer waits raises
`AgentNotWaiting` (resolve) or does nothing (expire). A decision to abort produces an
`AbortSummary` (partial progress and what completed), so an abort is graceful.

A "sheet" is one step of a job: `sheet_num` is the step number of whatever waits (a plan step, a
task's attempt, a debate round...).

Everything here is pure and deterministic: time comes in as `now` (a timezone-aware datetime).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agora.core.checks import ValidationResult
from agora.core.errors import AgoraError, IllegalTransition, NotFound
from agora.core.limits import MAX_ID_CHARS, MAX_ITEMS, IdRef, Name, NameRef, Note, Text

# --------------------------------------------------------------------------------------------
# Errors (registered with agora.core.errors.error_from by subclassing AgoraError)
# --------------------------------------------------------------------------------------------


class AgentNotWaiting(AgoraError):
    """A decision arrived for an escalation that no longer waits for one (already resolved or
    expired)."""

    code = "AGENT_NOT_WAITING"
    http_status = 409


class ConflictingEscalation(AgoraError):
    """An escalation id was parked again with a different waiting party, context or deadline."""

    code = "CONFLICTING_ESCALATION"
    http_status = 409


class UnverifiedDecision(AgoraError):
    """An announced decision that its escalation's own record does not hold (forged, or
    altered on the way): the waiting party keeps waiting."""

    code = "UNVERIFIED_DECISION"
    http_status = 409


class InvalidDecision(AgoraError):
    """A decision that does not fit the escalation (a checkpoint answer to a reactive escalation,
    or the other way round)."""

    code = "INVALID_DECISION"
    http_status = 422


"""The error types this module adds; `NotFound` (unknown escalation id) is reused."""

SYSTEM_ACTOR = "system"
"""The `who` of audit entries written by the system itself (expiry)."""

Probability = float
_ID_PATTERN = r"^[^\s|]+$"


def _blank_to_none(value: str | None) -> str | None:
    return None if value is None or not value.strip() else value


# --------------------------------------------------------------------------------------------
# Proactive checkpoints
# --------------------------------------------------------------------------------------------


class CheckpointTrigger(BaseModel):
    """Conditions that stop a step *before* it runs, to warn or to ask for confirmation.

    The conditions that are set must all hold (AND); a condition left as None is not checked, so
    a trigger with none set fires before every step. Within `prompt_contains`, one keyword
    appearing anywhere in the prompt is enough (OR), compared case-insensitively (casefold).
    Empty lists are refused: they could never match, which is never what was meant (use None).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    sheet_nums: list[Annotated[int, Field(ge=0)]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ITEMS,
        description="Specific sheet (step) numbers to checkpoint (None = all sheets).",
    )
    prompt_contains: list[Note] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ITEMS,
        description="Keywords in prompt that trigger checkpoint (case-insensitive).",
    )
    min_retry_count: int | None = Field(
        default=None, ge=0, description="Trigger if retry count >= this value."
    )
    requires_confirmation: bool = Field(
        default=True,
        description="Whether to require explicit confirmation (True) or just warn (False).",
    )
    message: Note = Field(default="", description="Custom message to show when checkpoint triggers.")

    @field_validator("prompt_contains")
    @classmethod
    def _keywords_not_blank(cls, keywords: list[str] | None) -> list[str] | None:
        if keywords is not None and any(not keyword.strip() for keyword in keywords):
            raise ValueError("checkpoint keywords must not be blank (a blank keyword matches every prompt)")
        return keywords


class CheckpointContext(BaseModel):
    """What a checkpoint handler knows about the step about to run.

    `trigger` is None while the triggers are being evaluated (`should_checkpoint`) and names the
    trigger that fired once the context is handed to a decision-maker.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    sheet_num: int = Field(ge=0, description="Step number about to execute.")
    prompt: Text = Field(description="The prompt to be used.")
    retry_count: int = Field(default=0, ge=0, description="Number of retry attempts already made.")
    trigger: CheckpointTrigger | None = Field(default=None, description="The trigger that fired.")
    previous_errors: list[Note] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Errors of the earlier attempts of this step, oldest first.",
    )
    kind: Literal["checkpoint"] = Field(
        default="checkpoint", description="Tells a checkpoint from an escalation in a record."
    )


class CheckpointAction(StrEnum):
    PROCEED = "proceed"
    """Continue with execution."""
    ABORT = "abort"
    """Stop the entire job."""
    SKIP = "skip"
    """Skip this sheet and continue to the next."""
    MODIFY_PROMPT = "modify_prompt"
    """Proceed with modified prompt (requires `modified_prompt`)."""


class CheckpointResponse(BaseModel):
    """A checkpoint decision. `modified_prompt` is required with modify_prompt and refused with
    any other action (it would be silently ignored); a blank prompt counts as none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: CheckpointAction
    modified_prompt: Text | None = Field(
        default=None,
        validate_default=True,
        description="Modified prompt to use if action is 'modify_prompt'.",
    )
    guidance: Note | None = Field(
        default=None, description="Optional guidance or reasoning for the decision."
    )
    kind: Literal["checkpoint"] = Field(
        default="checkpoint", description="Tells a checkpoint answer from an escalation answer."
    )

    @field_validator("modified_prompt")
    @classmethod
    def _prompt_fits_action(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _check_modified_prompt(value, info.data.get("action"), {CheckpointAction.MODIFY_PROMPT})


class CheckpointGate(StrEnum):
    """What the step must do before running, after its checkpoint triggers were evaluated."""

    NONE = "none"
    """No trigger fired: run."""
    WARN = "warn"
    """Only warn-only triggers fired: show `message`, then run."""
    CONFIRM = "confirm"
    """A trigger requiring confirmation fired: park the step until a `CheckpointResponse`."""


class CheckpointVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gate: CheckpointGate
    trigger: CheckpointTrigger | None = None
    message: Note = ""


def trigger_matches(trigger: CheckpointTrigger, context: CheckpointContext) -> bool:
    """Whether every condition set on `trigger` holds for the step described by `context`."""
    if trigger.sheet_nums is not None and context.sheet_num not in trigger.sheet_nums:
        return False
    if trigger.prompt_contains is not None:
        prompt = context.prompt.casefold()
        if not any(keyword.casefold() in prompt for keyword in trigger.prompt_contains):
            return False
    return trigger.min_retry_count is None or context.retry_count >= trigger.min_retry_count


def should_checkpoint(
    triggers: CheckpointTrigger | Sequence[CheckpointTrigger], context: CheckpointContext
) -> CheckpointTrigger | None:
    """The first trigger (in configured order) that matches the step, or None (reference
    semantics). Accepts one trigger or a list. To decide warn vs confirm across several matching
    triggers, use `evaluate_checkpoint`, which does not let a warn-only trigger hide a stricter one.
    """
    candidates = [triggers] if isinstance(triggers, CheckpointTrigger) else triggers
    return next((trigger for trigger in candidates if trigger_matches(trigger, context)), None)


def checkpoint_message(trigger: CheckpointTrigger, context: CheckpointContext) -> str:
    """The trigger's custom message, or a default naming the trigger and the step."""
    if trigger.message.strip():
        return trigger.message
    return f"checkpoint '{trigger.name}' triggered before sheet {context.sheet_num} of job {context.job_id}"


def evaluate_checkpoint(
    triggers: CheckpointTrigger | Sequence[CheckpointTrigger], context: CheckpointContext
) -> CheckpointVerdict:
    """Whether the step may run, must warn first, or must wait for confirmation.

    Among the matching triggers, the first that requires confirmation wins; otherwise the first
    warn-only one. (Not simply the first match: a warn-only trigger listed earlier must not let a step
    through that a later trigger guards with a confirmation.)
    """
    candidates = [triggers] if isinstance(triggers, CheckpointTrigger) else list(triggers)
    matching = [trigger for trigger in candidates if trigger_matches(trigger, context)]
    if not matching:
        return CheckpointVerdict(gate=CheckpointGate.NONE)
    confirming = [trigger for trigger in matching if trigger.requires_confirmation]
    chosen = confirming[0] if confirming else matching[0]
    gate = CheckpointGate.CONFIRM if confirming else CheckpointGate.WARN
    return CheckpointVerdict(gate=gate, trigger=chosen, message=checkpoint_message(chosen, context))


# --------------------------------------------------------------------------------------------
# Reactive escalation: context, decision, when to escalate, the ladder
# --------------------------------------------------------------------------------------------


class EscalationAction(StrEnum):
    RETRY = "retry"
    """Retry the sheet with the same or modified prompt."""
    SKIP = "skip"
    """Skip this sheet and continue to the next."""
    ABORT = "abort"
    """Stop the entire job."""
    MODIFY_PROMPT = "modify_prompt"
    """Retry with a modified prompt (requires `modified_prompt`)."""


class HistoricalSuggestion(BaseModel):
    """A past escalation decision similar to the current one, and how it turned out.

    Its fields are what a decision-maker needs: what was decided, in what situation, and whether
    it worked.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: EscalationAction = Field(description="What was decided then.")
    confidence: Probability = Field(ge=0.0, le=1.0, description="Confidence that triggered that escalation.")
    outcome_succeeded: bool | None = Field(
        default=None, description="Whether the step succeeded after the decision (None = unknown)."
    )
    guidance: Note | None = Field(default=None, description="Guidance given with that decision.")
    similarity: Probability = Field(
        default=1.0, ge=0.0, le=1.0, description="How close that situation was to this one."
    )
    escalation_id: IdRef | None = Field(default=None, description="The past escalation, when known.")


def rank_suggestions(suggestions: Sequence[HistoricalSuggestion]) -> list[HistoricalSuggestion]:
    """Order by relevance: successful outcomes first, then unknown, then
    failed; within each group most similar first; ties keep their given order (stable sort)."""
    outcome_rank = {True: 0, None: 1, False: 2}
    return sorted(suggestions, key=lambda s: (outcome_rank[s.outcome_succeeded], -s.similarity))


class EscalationContext(BaseModel):
    """Everything about the step's state that led to escalation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    sheet_num: int = Field(ge=0)
    validation_results: list[ValidationResult] = Field(
        max_length=MAX_ITEMS,
        description="The checks of the work so far (a plan's subgoals, a debate's rounds).",
    )
    confidence: Probability = Field(
        ge=0.0, le=1.0, description="Aggregate confidence score that triggered escalation (0.0-1.0)."
    )
    retry_count: int = Field(ge=0, description="Retries already made (attempt number - 1).")
    error_history: list[Note] = Field(
        max_length=MAX_ITEMS, description="Errors of the attempts so far, oldest first."
    )
    prompt_used: Text
    output_summary: Text
    historical_suggestions: list[HistoricalSuggestion] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Similar past escalation decisions that may inform this decision, ordered by "
        "relevance (successful outcomes first; see rank_suggestions).",
    )
    kind: Literal["escalation"] = Field(
        default="escalation", description="Tells an escalation from a checkpoint in a record."
    )


class EscalationResponse(BaseModel):
    """An escalation decision. `modified_prompt` is required with modify_prompt, allowed with
    retry ("retry with the same or modified prompt"), refused with skip and abort; a blank prompt
    counts as none. `confidence_boost` is added to the next attempt's confidence when it is
    compared with the threshold (equivalently: it lowers the threshold for that attempt), so a
    decision-maker who vouches for a retry is not asked again for the same marginal score."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: EscalationAction
    modified_prompt: Text | None = Field(
        default=None,
        validate_default=True,
        description="Modified prompt to use if action is 'modify_prompt'.",
    )
    guidance: Note | None = Field(
        default=None, description="Optional guidance or reasoning for the decision."
    )
    confidence_boost: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Amount to boost confidence threshold for next attempt (0.0-1.0).",
    )
    kind: Literal["escalation"] = Field(
        default="escalation", description="Tells an escalation answer from a checkpoint answer."
    )

    @field_validator("modified_prompt")
    @classmethod
    def _prompt_fits_action(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _check_modified_prompt(
            value, info.data.get("action"), {EscalationAction.MODIFY_PROMPT, EscalationAction.RETRY}
        )


def _check_modified_prompt(value: str | None, action: Any, allowed_with: set[Any]) -> str | None:
    value = _blank_to_none(value)
    if action is None:  # the action itself failed validation; that error is reported instead
        return value
    if action == "modify_prompt" and value is None:
        raise ValueError("modified_prompt is required when action is modify_prompt")
    if value is not None and action not in allowed_with:
        allowed = " or ".join(sorted(str(a) for a in allowed_with))
        raise ValueError(f"modified_prompt is only used with action {allowed}, not {action}")
    return value


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

    confidence_threshold: Probability = Field(
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


def _check_aware(now: datetime) -> None:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be a timezone-aware datetime")


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


# --------------------------------------------------------------------------------------------
# The escalation record and its lifecycle
# --------------------------------------------------------------------------------------------


class EscalationStatus(StrEnum):
    WAITING_FOR_HUMAN = "WAITING_FOR_HUMAN"
    """Parked: the waiting party is paused until a decision arrives."""
    RESOLVED = "RESOLVED"
    """A decision-maker answered; `decision` holds the answer."""
    EXPIRED = "EXPIRED"
    """The deadline passed; `decision` holds the configured default decision."""


DECIDED_STATUSES = frozenset({EscalationStatus.RESOLVED, EscalationStatus.EXPIRED})


class WaitingPartyKind(StrEnum):
    TASK = "task"
    PLAN_STEP = "plan_step"
    DEBATE = "debate"
    SESSION = "session"


class WaitingParty(BaseModel):
    """What is paused until the escalation is decided (the actor to resume)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: WaitingPartyKind
    id: str = Field(min_length=1, max_length=MAX_ID_CHARS)


class AuditEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    who: Name = Field(description="A person's or service's identity, or 'system'.")
    when: AwareDatetime
    what: Note = Field(min_length=1, description="What happened, e.g. 'parked', 'resolved: retry'.")
    why: Note = Field(default="", description="The reason given, if any.")


class PartialProgress(BaseModel):
    """What the waiting party had achieved when it was aborted: its partial results kept and
    what completed, so nothing done is lost with the abort."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    completed: list[Note] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Steps/items that finished."
    )
    pending: list[Note] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Steps/items that will not run."
    )
    saved: dict[str, JsonValue] = Field(default_factory=dict, description="Partial results kept.")


class AbortSummary(BaseModel):
    """Produced when an escalation ends in abort (decided or by default): why, where it stopped,
    what completed. `cleanup_completed` turns True once the waiting party reports its cleanup
    (`complete_cleanup`), so an aborted workflow is known to have cleaned up after itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    escalation_id: IdRef
    waiting_party: WaitingParty
    aborted_by: NameRef
    aborted_at: AwareDatetime
    reason: Note = Field(description="Why the abort was necessary.")
    stopped_at_sheet: int | None = Field(default=None, description="The step that was waiting.")
    last_error: Note | None = None
    progress: PartialProgress = Field(default_factory=PartialProgress)
    progress_summary: Text = Field(description="Human-readable summary of what completed.")
    cleanup_completed: bool = False


AnyContext = Annotated[EscalationContext | CheckpointContext, Field(discriminator="kind")]
AnyResponse = Annotated[EscalationResponse | CheckpointResponse, Field(discriminator="kind")]


class ParkRequest(BaseModel):
    """What a waiting party sends the `Escalation` actor (`park`) to wait for a person."""

    waiting_party: WaitingParty
    context: AnyContext
    deadline: datetime | None = None
    default_decision: AnyResponse | None = None
    who: Name = SYSTEM_ACTOR
    why: Note = ""


class EscalationRecord(BaseModel):
    """One wait for a decision, as the `Escalation` actor stores it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    escalation_id: str = Field(min_length=1, max_length=256, pattern=_ID_PATTERN)
    waiting_party: WaitingParty
    context: AnyContext = Field(description="Everything the decision-maker is shown.")
    status: EscalationStatus = EscalationStatus.WAITING_FOR_HUMAN
    created_at: AwareDatetime
    deadline: AwareDatetime | None = Field(
        default=None, description="When the default decision applies; set together with default_decision."
    )
    default_decision: AnyResponse | None = None
    decision: AnyResponse | None = Field(default=None, description="The decision applied (once).")
    decided_by: NameRef | None = None
    decided_at: AwareDatetime | None = None
    abort_summary: AbortSummary | None = None
    audit: list[AuditEntry] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Who did what when: parked, decided (or expired), cleaned up (three entries at most).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> EscalationRecord:
        kind = self.context.kind
        for name, response in (("decision", self.decision), ("default_decision", self.default_decision)):
            if response is not None and response.kind != kind:
                raise ValueError(f"{name} is a {response.kind} answer but the context is a {kind}")
        if (self.deadline is None) != (self.default_decision is None):
            raise ValueError("deadline and default_decision are set together (a deadline needs a default)")
        if self.deadline is not None and self.deadline <= self.created_at:
            raise ValueError("deadline must be later than created_at")
        decided = self.status in DECIDED_STATUSES
        if decided != (self.decision is not None) or decided != (self.decided_at is not None):
            raise ValueError("decision and decided_at are set exactly when the status is RESOLVED or EXPIRED")
        if self.status is EscalationStatus.EXPIRED and self.decision != self.default_decision:
            raise ValueError("an EXPIRED escalation applied its default_decision")
        aborted = self.decision is not None and self.decision.action == "abort"
        if aborted != (self.abort_summary is not None):
            raise ValueError("abort_summary is present exactly when the decision is abort")
        return self

    @property
    def waiting(self) -> bool:
        return self.status is EscalationStatus.WAITING_FOR_HUMAN


def _evolve(record: EscalationRecord, **update: Any) -> EscalationRecord:
    """A copy with `update` applied and the record's invariants checked again."""
    return EscalationRecord.model_validate({**dict(record), **update})


def require_record(record: EscalationRecord | None, escalation_id: str) -> EscalationRecord:
    """The stored record, or NotFound for an unknown escalation id."""
    if record is None:
        raise NotFound(f"no escalation {escalation_id}")
    return record


def park(
    escalation_id: str,
    waiting_party: WaitingParty,
    context: EscalationContext | CheckpointContext,
    *,
    now: datetime,
    who: str = SYSTEM_ACTOR,
    why: str = "",
    deadline: datetime | None = None,
    default_decision: EscalationResponse | CheckpointResponse | None = None,
    existing: EscalationRecord | None = None,
) -> EscalationRecord:
    """A new record WAITING_FOR_HUMAN, with a "parked" audit entry.

    Idempotent: given the record already stored under this id (`existing`), parking again with
    the same waiting party, context, deadline and default returns it unchanged (whatever its
    status: a redelivered park must not reopen a decided escalation); anything different raises
    ConflictingEscalation. `now` and `deadline` are timezone-aware datetimes.
    """
    if existing is not None:
        same = (
            existing.escalation_id == escalation_id
            and existing.waiting_party == waiting_party
            and existing.context == context
            and existing.deadline == deadline
            and existing.default_decision == default_decision
        )
        if not same:
            raise ConflictingEscalation(
                f"escalation {escalation_id} is already parked with a different party, context or deadline"
            )
        return existing
    return EscalationRecord(
        escalation_id=escalation_id,
        waiting_party=waiting_party,
        context=context,
        created_at=now,
        deadline=deadline,
        default_decision=default_decision,
        audit=[AuditEntry(who=who, when=now, what="parked", why=why)],
    )


def _context_sheet_and_error(context: EscalationContext | CheckpointContext) -> tuple[int, str | None]:
    errors = context.error_history if isinstance(context, EscalationContext) else context.previous_errors
    return context.sheet_num, (errors[-1] if errors else None)


def summarize_progress(progress: PartialProgress, stopped_at_sheet: int | None, reason: str) -> str:
    """A one-line, deterministic account of an abort: what completed, what will not run, where it
    stopped and why."""
    parts = [f"completed: {', '.join(progress.completed) if progress.completed else 'nothing'}"]
    if progress.pending:
        parts.append(f"not run: {', '.join(progress.pending)}")
    if stopped_at_sheet is not None:
        parts.append(f"stopped at sheet {stopped_at_sheet}")
    parts.append(f"reason: {reason}")
    return "; ".join(parts)


def abort_summary(
    record: EscalationRecord,
    *,
    who: str,
    now: datetime,
    reason: str,
    progress: PartialProgress | None = None,
) -> AbortSummary:
    """The summary of an escalation ending in abort (built by `resolve` and `expire`)."""
    progress = progress or PartialProgress()
    sheet, last_error = _context_sheet_and_error(record.context)
    return AbortSummary(
        escalation_id=record.escalation_id,
        waiting_party=record.waiting_party,
        aborted_by=who,
        aborted_at=now,
        reason=reason,
        stopped_at_sheet=sheet,
        last_error=last_error,
        progress=progress,
        progress_summary=summarize_progress(progress, sheet, reason),
    )


def _apply(
    record: EscalationRecord,
    response: EscalationResponse | CheckpointResponse,
    *,
    status: EscalationStatus,
    who: str,
    what: str,
    why: str,
    now: datetime,
    progress: PartialProgress | None,
) -> EscalationRecord:
    summary = None
    if response.action == "abort":
        reason = why.strip() or (response.guidance or "").strip() or f"aborted by {who}"
        summary = abort_summary(record, who=who, now=now, reason=reason, progress=progress)
    return _evolve(
        record,
        status=status,
        decision=response,
        decided_by=who,
        decided_at=now,
        abort_summary=summary,
        audit=[*record.audit, AuditEntry(who=who, when=now, what=what, why=why)],
    )


def resolve(
    record: EscalationRecord,
    response: EscalationResponse | CheckpointResponse,
    who: str,
    why: str,
    now: datetime,
    *,
    progress: PartialProgress | None = None,
) -> EscalationRecord:
    """Apply a decision, exactly once: WAITING_FOR_HUMAN -> RESOLVED, with an audit entry.

    Raises AgentNotWaiting when the record was already resolved or expired (also for the same
    decision delivered twice: the caller decides whether that is harmless), and InvalidDecision
    when the answer's kind does not match the context (checkpoint vs escalation). A decision that
    arrives after the deadline but before `expire` ran is still applied: a person's answer wins
    over the default until the default has actually been applied. An abort also builds the
    record's AbortSummary from `progress` (what the waiting party reported, if anything).
    """
    if not record.waiting:
        raise AgentNotWaiting(
            f"escalation {record.escalation_id} is {record.status}, not waiting for a decision"
        )
    if response.kind != record.context.kind:
        raise InvalidDecision(
            f"escalation {record.escalation_id} waits for a {record.context.kind} answer, "
            f"got a {response.kind} answer"
        )
    return _apply(
        record,
        response,
        status=EscalationStatus.RESOLVED,
        who=who,
        what=f"resolved: {response.action}",
        why=why,
        now=now,
        progress=progress,
    )


def is_overdue(record: EscalationRecord, now: datetime) -> bool:
    """Whether the record still waits and its deadline is reached (now >= deadline)."""
    _check_aware(now)
    return record.waiting and record.deadline is not None and now >= record.deadline


def expire(
    record: EscalationRecord,
    now: datetime,
    *,
    who: str = SYSTEM_ACTOR,
    progress: PartialProgress | None = None,
) -> EscalationRecord:
    """Apply the default decision if the deadline is reached: WAITING_FOR_HUMAN -> EXPIRED.

    A no-op (the same record is returned) when there is no deadline, it is not reached yet, or
    the record was already decided, so a late or repeated deadline reminder is harmless. The
    deadline counts as passed from the deadline instant itself (now >= deadline), so a reminder
    firing exactly on time applies the default.
    """
    if not is_overdue(record, now):
        return record
    default, deadline = record.default_decision, record.deadline
    if default is None or deadline is None:  # unreachable: is_overdue needs a deadline, which needs a default
        return record
    return _apply(
        record,
        default,
        status=EscalationStatus.EXPIRED,
        who=who,
        what=f"expired: default {default.action} applied",
        why=f"deadline {deadline.isoformat()} passed without a decision",
        now=now,
        progress=progress,
    )


CLEANUP_COMPLETED = "cleanup completed"


def complete_cleanup(
    record: EscalationRecord,
    *,
    who: str,
    now: datetime,
    progress: PartialProgress | None = None,
    progress_summary: str | None = None,
) -> EscalationRecord:
    """Record that the aborted party finished its cleanup (saved partial progress, documented
    what completed). `progress` replaces the progress known at abort time; `progress_summary`
    replaces the generated summary (otherwise it is regenerated from the progress). Repeating it
    is harmless: the repeat's audit entry replaces the earlier cleanup's, so the trail keeps one.
    Raises IllegalTransition when the escalation did not end in abort."""
    summary = record.abort_summary
    if summary is None:
        raise IllegalTransition(
            f"escalation {record.escalation_id} did not end in abort; nothing to clean up"
        )
    new_progress = progress or summary.progress
    text = _blank_to_none(progress_summary) or summarize_progress(
        new_progress, summary.stopped_at_sheet, summary.reason
    )
    updated = summary.model_copy(
        update={"progress": new_progress, "progress_summary": text, "cleanup_completed": True}
    )
    entry = AuditEntry(who=who, when=now, what=CLEANUP_COMPLETED, why=text)
    earlier = [e for e in record.audit if e.what != CLEANUP_COMPLETED]
    return _evolve(record, abort_summary=updated, audit=[*earlier, entry])


def resume_message(response: EscalationResponse | CheckpointResponse) -> str:
    """The text to hand back to a paused session when it resumes (injected as a user message):
    the decision, then the modified prompt and guidance if given."""
    lines = [f"Decision: {response.action}."]
    if response.modified_prompt is not None:
        lines.append(f"Use this prompt instead:\n{response.modified_prompt}")
    if response.guidance:
        lines.append(f"Guidance: {response.guidance}")
    return "\n".join(lines)
