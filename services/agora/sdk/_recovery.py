"""Recovering from a failed attempt: failure triage classifies the attempt from its trajectory,
the escalation ladder says how far the run has climbed (retry, let the agent analyse its failure
first, notify the people watching, wait for a person, abort), and what the next attempt is
told; a run automated recovery cannot fix is handed to a person. Both agent runtimes use it:
the `AgentRunner` (with a `RecoveryPolicy`) and the reference worker."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agora.core.escalation.context import EscalationContext
from agora.core.escalation.ladder import (
    DEFAULT_ESCALATION_CONFIG,
    EscalationConfig,
    EscalationLevel,
    next_level,
)
from agora.core.escalation.record import ParkRequest, WaitingParty
from agora.core.triage.context import Step as TriageStep
from agora.core.triage.decision import DEFAULT_REPEAT_LIMIT, TriageDecision, triage
from agora.core.triage.diagnosis import build_failure_context
from agora.core.triage.failures import FailureType
from agora.llm import ChatMessage, extract_json_object

__all__ = [
    "FAILURE_ANALYSIS_SCHEMA",
    "AttemptHistory",
    "FailureAnalysis",
    "Recovery",
    "RecoveryPolicy",
    "analyse",
    "handover",
    "last_confidence",
    "recovery_after",
]

AttemptHistory = list[tuple[FailureType, str]]
"""Triage's record of the recoveries tried so far in one run: (failure type, recovery)."""


class RecoveryPolicy(BaseModel):
    """How a runner recovers failed attempts: automatic recoveries per failure type before a
    person is asked (`repeat_limit`), and the escalation ladder failed attempts climb."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repeat_limit: int = Field(default=DEFAULT_REPEAT_LIMIT, ge=0, le=100)
    ladder: EscalationConfig = DEFAULT_ESCALATION_CONFIG


class FailureAnalysis(BaseModel):
    """The agent's own analysis of a failed attempt (the ladder's agent-analysis rung)."""

    cause: str = Field(max_length=500)
    next_approach: str = Field(max_length=500)


FAILURE_ANALYSIS_SCHEMA: dict[str, Any] = FailureAnalysis.model_json_schema()


@dataclass(frozen=True)
class Recovery:
    """What follows a failed attempt: triage's decision and the ladder's rung."""

    decision: TriageDecision
    level: EscalationLevel
    confidence: float | None
    """The agent's confidence in the attempt's last step (None: no step was taken)."""

    @property
    def failed_attempt(self) -> int:
        """The number of the attempt that failed (1: the first)."""
        return self.decision.attempt_number + 1

    @property
    def note(self) -> str:
        return f"Attempt {self.failed_attempt} failed ({self.decision.failure_type.value})."


def recovery_after(
    trajectory: list[TriageStep],
    *,
    task: str,
    history: AttemptHistory,
    policy: RecoveryPolicy,
    available_tools: Collection[str] | None = None,
) -> Recovery:
    """Triage a failed attempt at `task` (its `trajectory`, with the recoveries tried so far;
    a call of a tool outside `available_tools` is a wrong tool) and place it on the ladder: a
    low-confidence failure goes straight to a person, and so does one triage escalates
    (automated recovery has nothing left to try), unless the ladder aborts."""
    context = build_failure_context(
        trajectory,
        original_task=task,
        raw_error=None if trajectory else "the attempt ended before its first step",
        available_tools=available_tools,
        attempt_history=history,
    )
    decision = triage(context, repeat_limit=policy.repeat_limit)
    confidence = last_confidence(trajectory)
    level = next_level(decision.attempt_number + 1, confidence=confidence, config=policy.ladder)
    if decision.escalated and level is not EscalationLevel.ABORT:
        level = EscalationLevel.REQUIRE_DECISION  # automated recovery has nothing left to try
    return Recovery(decision=decision, level=level, confidence=confidence)


def last_confidence(trajectory: list[TriageStep]) -> float | None:
    """The agent's own confidence in the last step of an attempt (None: no step was taken)."""
    if not trajectory:
        return None
    confidence = trajectory[-1].metadata.get("confidence")
    return float(confidence) if isinstance(confidence, int | float) else None


async def analyse(
    ask: Callable[[list[ChatMessage]], Awaitable[str]], transcript: Sequence[ChatMessage], note: str
) -> str | None:
    """The ladder's agent-analysis rung: the agent studies its failed attempt before the next
    one (`ask` gives the model's answer to the messages, as a `FailureAnalysis`); the analysis
    guides that attempt (None: no usable analysis, plain retry)."""
    request = ChatMessage(
        role="user",
        content=f"{note} Before trying again, analyse the failure: what caused it, and what "
        "you will do differently.",
    )
    answer = await ask([*transcript, request])
    try:
        analysis = FailureAnalysis.model_validate(extract_json_object(answer))
    except (ValueError, ValidationError):
        return None
    return f"Your analysis: {analysis.cause} Next approach: {analysis.next_approach}"


def handover(
    *,
    waiting_party: WaitingParty,
    recovery: Recovery,
    history: AttemptHistory,
    prompt_used: str,
    output_summary: str,
    who: str,
) -> tuple[str, ParkRequest]:
    """The escalation that hands a run automated recovery could not fix to a person: its id
    (`<waiting party id>.attempt-<n>`) and what to park."""
    decision = recovery.decision
    escalation_id = f"{waiting_party.id}.attempt-{decision.attempt_number + 1}"
    request = ParkRequest(
        waiting_party=waiting_party,
        context=EscalationContext(
            job_id=waiting_party.id,
            step=decision.attempt_number + 1,
            validation_results=[],
            confidence=recovery.confidence or 0.0,
            retry_count=decision.attempt_number,
            error_history=[f"{kind.value} -> {action}" for kind, action in history],
            prompt_used=prompt_used,
            output_summary=output_summary,
        ),
        who=who,
        why=decision.action.reason or f"{decision.failure_type.value}: automated recovery exhausted",
    )
    return escalation_id, request
