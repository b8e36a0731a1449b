"""The three-tier ladder: how a propagated confidence becomes an uncertainty level, and a level
an action (`UncertaintyPolicy`: thresholds and switches)::

    c >= 0.80 -> LOW       -> PROCEED
    c >= 0.60 -> MEDIUM    -> PROCEED_WITH_LOG  (PAUSE_FOR_HUMAN before an irreversible tool)
    c >= 0.40 -> HIGH      -> PAUSE_FOR_HUMAN   (System-2 reflection flagged on model steps)
    c <  0.40 -> CRITICAL  -> ABORT

Each boundary belongs to the more confident tier."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["REFLECTION_PROMPT", "UncertaintyAction", "UncertaintyLevel", "UncertaintyPolicy"]

REFLECTION_PROMPT = (
    "Before you continue, make your uncertainty explicit. List the points in your current "
    "reasoning that you are not confident about. For each one, state (1) what you know, "
    "(2) what you do not know, and (3) what information would resolve it."
)
"""System-2 reflection. When a step has `reflection_injected`, the caller appends this as a
system message before pausing, so the next model call (after the human answers) sees it."""


class UncertaintyLevel(StrEnum):
    """How uncertain a step is, from the propagated confidence (see `UncertaintyPolicy`)."""

    LOW = "low"
    """confidence >= low_threshold"""
    MEDIUM = "medium"
    """medium_threshold <= confidence < low_threshold"""
    HIGH = "high"
    """high_threshold <= confidence < medium_threshold"""
    CRITICAL = "critical"
    """confidence < high_threshold"""


class UncertaintyAction(StrEnum):
    """What the caller does with a step."""

    PROCEED = "proceed"
    """The run continues."""
    PROCEED_WITH_LOG = "proceed_with_log"
    """The run continues; the caller logs a warning."""
    PAUSE_FOR_HUMAN = "pause_for_human"
    """The run parks (WAITING_FOR_HUMAN) until a person resumes it."""
    ABORT = "abort"
    """The run ends with `UncertaintyAbort`."""


class UncertaintyPolicy(BaseModel):
    """Thresholds and switches: how a confidence becomes a level, and a level an action."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    low_threshold: float = Field(default=0.80, ge=0.0, le=1.0, description="Confidence floor for LOW")
    medium_threshold: float = Field(default=0.60, ge=0.0, le=1.0, description="Floor for MEDIUM")
    high_threshold: float = Field(default=0.40, ge=0.0, le=1.0, description="Floor for HIGH")
    enable_p_true: bool = Field(default=True, description="Run the P(True) follow-up call")
    enable_semantic_sampling: bool = Field(
        default=False, description="Enable the adaptive semantic-entropy slow path"
    )
    irreversible_tool_names: list[str] = Field(
        default_factory=list,
        description="Tool name substrings (case-insensitive) that turn MEDIUM into PAUSE_FOR_HUMAN",
    )
    inject_reflection_on_high: bool = Field(
        default=True, description="Flag a System-2 reflection on model steps at HIGH, before the pause"
    )

    @field_validator("irreversible_tool_names")
    @classmethod
    def _names_are_clean(cls, names: list[str]) -> list[str]:
        # A blank substring would match every tool, pausing every MEDIUM tool call.
        cleaned = [name.strip() for name in names]
        if any(not name for name in cleaned):
            raise ValueError("irreversible tool names must be non-empty strings")
        return cleaned

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> UncertaintyPolicy:
        if not self.low_threshold >= self.medium_threshold >= self.high_threshold:
            raise ValueError("thresholds must satisfy low_threshold >= medium_threshold >= high_threshold")
        return self

    def classify(self, confidence: float) -> UncertaintyLevel:
        """The tier of `confidence`; a value exactly on a threshold belongs to the tier above it
        (0.80 is LOW, 0.60 MEDIUM, 0.40 HIGH at the defaults)."""
        if confidence >= self.low_threshold:
            return UncertaintyLevel.LOW
        if confidence >= self.medium_threshold:
            return UncertaintyLevel.MEDIUM
        if confidence >= self.high_threshold:
            return UncertaintyLevel.HIGH
        return UncertaintyLevel.CRITICAL

    def is_irreversible(self, tool_name: str | None) -> bool:
        """Whether `tool_name` contains any of `irreversible_tool_names`, ignoring case."""
        if not tool_name:
            return False
        lowered = tool_name.lower()
        return any(name.lower() in lowered for name in self.irreversible_tool_names)

    def decide(self, level: UncertaintyLevel, *, tool_name: str | None = None) -> UncertaintyAction:
        """The action for `level`; `tool_name` is the tool about to run, if any. Only MEDIUM
        depends on the tool: LOW is safe even for an irreversible tool, HIGH pauses anyway."""
        if level is UncertaintyLevel.LOW:
            return UncertaintyAction.PROCEED
        if level is UncertaintyLevel.MEDIUM:
            if self.is_irreversible(tool_name):
                return UncertaintyAction.PAUSE_FOR_HUMAN
            return UncertaintyAction.PROCEED_WITH_LOG
        if level is UncertaintyLevel.HIGH:
            return UncertaintyAction.PAUSE_FOR_HUMAN
        return UncertaintyAction.ABORT
