"""The answers a decision-maker gives: to a checkpoint (`CheckpointResponse`: proceed, abort,
skip, modify_prompt) or to an escalation (`EscalationResponse`: retry, skip, abort,
modify_prompt), the rule both follow on a modified prompt, and the text a paused session is
handed when it resumes (`resume_message`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from agora.core.limits import Identifier, Note, Text

__all__ = [
    "AnyResponse",
    "CheckpointAction",
    "CheckpointResponse",
    "EscalationAction",
    "EscalationResponse",
    "resume_message",
]


class CheckpointAction(StrEnum):
    PROCEED = "proceed"
    """Continue with execution."""
    ABORT = "abort"
    """Stop the entire job."""
    SKIP = "skip"
    """Skip this step and continue to the next."""
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


class EscalationAction(StrEnum):
    RETRY = "retry"
    """Retry the step with the same or modified prompt."""
    SKIP = "skip"
    """Skip this step and continue to the next."""
    ABORT = "abort"
    """Stop the entire job."""
    MODIFY_PROMPT = "modify_prompt"
    """Retry with a modified prompt (requires `modified_prompt`)."""
    REASSIGN = "reassign"
    """Hand a paused task's run to another of the task's bidders (`reassign_to`, or the next-best
    bid not tried yet): the agent that paused gives the task up, the market awards it again."""


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
    reassign_to: Identifier | None = Field(
        default=None,
        validate_default=True,
        description="With 'reassign': the bidder of the task to hand it to (none: the next-best bid "
        "not tried yet).",
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

    @field_validator("reassign_to")
    @classmethod
    def _target_fits_action(cls, value: str | None, info: ValidationInfo) -> str | None:
        action = info.data.get("action")
        if value is not None and action is not None and action != EscalationAction.REASSIGN:
            raise ValueError(f"reassign_to is only used with action reassign, not {action}")
        return value


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


def _blank_to_none(value: str | None) -> str | None:
    return None if value is None or not value.strip() else value


AnyResponse = Annotated[EscalationResponse | CheckpointResponse, Field(discriminator="kind")]
"""Either kind of answer, told apart by `kind`."""


def resume_message(response: EscalationResponse | CheckpointResponse) -> str:
    """The text to hand back to a paused session when it resumes (injected as a user message):
    the decision, then the modified prompt and guidance if given."""
    lines = [f"Decision: {response.action}."]
    if response.modified_prompt is not None:
        lines.append(f"Use this prompt instead:\n{response.modified_prompt}")
    if response.guidance:
        lines.append(f"Guidance: {response.guidance}")
    return "\n".join(lines)
