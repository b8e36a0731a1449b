"""Proactive checkpoints: the triggers that stop a step *before* it runs, what the step's
checkpoint knows (`CheckpointContext`), and whether the step may run, must warn first, or must
wait for a confirmation (`evaluate_checkpoint`)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agora.core.limits import MAX_ID_CHARS, MAX_ITEMS, Name, Note, Text

__all__ = [
    "CheckpointContext",
    "CheckpointGate",
    "CheckpointTrigger",
    "CheckpointVerdict",
    "checkpoint_message",
    "evaluate_checkpoint",
    "should_checkpoint",
    "trigger_matches",
]


class CheckpointTrigger(BaseModel):
    """Conditions that stop a step *before* it runs, to warn or to ask for confirmation.

    The conditions that are set must all hold (AND); a condition left as None is not checked, so
    a trigger with none set fires before every step. Within `prompt_contains`, one keyword
    appearing anywhere in the prompt is enough (OR), compared case-insensitively (casefold).
    Empty lists are refused: they could never match, which is never what was meant (use None).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, serialize_by_alias=True)

    name: Name
    steps: list[Annotated[int, Field(ge=0)]] | None = Field(
        default=None,
        alias="sheet_nums",
        min_length=1,
        max_length=MAX_ITEMS,
        description="Specific step numbers to checkpoint (None = all steps).",
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

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, serialize_by_alias=True)

    job_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    step: int = Field(ge=0, alias="sheet_num", description="Step number about to execute.")
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
    if trigger.steps is not None and context.step not in trigger.steps:
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
    return f"checkpoint '{trigger.name}' triggered before step {context.step} of job {context.job_id}"


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
