"""Recovering from a failed attempt (with failure triage on): triage classifies the attempt
from its trajectory, the escalation ladder says how far the task has climbed (retry, let the
agent analyse its failure first, notify the people watching, wait for a person, abort), and
what the next attempt is told; a task automated recovery cannot fix is handed to a person."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from agora.core.escalation.context import EscalationContext
from agora.core.escalation.ladder import EscalationConfig, EscalationLevel, next_level
from agora.core.escalation.record import ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.market import TaskOutcome
from agora.core.messages import TaskAwarded
from agora.core.triage.context import Step as TriageStep
from agora.core.triage.decision import TriageDecision, triage
from agora.core.triage.diagnosis import build_failure_context
from agora.llm import ChatMessage, ModelClient, ModelOutputInvalid, complete_json
from agora.worker.react import Attempt
from agora.worker.runs import Run

__all__ = ["FailureAnalysis", "Recovery", "analyse", "escalation_for", "last_confidence", "recovery_after"]


class FailureAnalysis(BaseModel):
    """The agent's own analysis of a failed attempt (the ladder's agent-analysis rung)."""

    cause: str = Field(max_length=500)
    next_approach: str = Field(max_length=500)


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
    attempt: Attempt, task: TaskAwarded, run: Run, *, repeat_limit: int, ladder: EscalationConfig
) -> Recovery:
    """Triage the failed `attempt` of `task` (with the recoveries `run` tried so far) and place
    it on the ladder: a low-confidence failure goes straight to a person, and so does one triage
    escalates (automated recovery has nothing left to try), unless the ladder aborts."""
    context = build_failure_context(
        attempt.trajectory,
        original_task=task.spec.description,
        raw_error=None if attempt.trajectory else "the attempt ended before its first step",
        attempt_history=run.history,
    )
    decision = triage(context, repeat_limit=repeat_limit)
    confidence = last_confidence(attempt.trajectory)
    level = next_level(decision.attempt_number + 1, confidence=confidence, config=ladder)
    if decision.escalated and level is not EscalationLevel.ABORT:
        level = EscalationLevel.REQUIRE_DECISION  # automated recovery has nothing left to try
    return Recovery(decision=decision, level=level, confidence=confidence)


def last_confidence(trajectory: list[TriageStep]) -> float | None:
    """The agent's own confidence in the last step of an attempt (None: no step was taken)."""
    if not trajectory:
        return None
    confidence = trajectory[-1].metadata.get("confidence")
    return float(confidence) if isinstance(confidence, int | float) else None


async def analyse(model: ModelClient, transcript: list[ChatMessage], note: str) -> str | None:
    """The ladder's agent-analysis rung: the agent studies its failed attempt before the
    next one; its analysis guides that attempt (None: no usable analysis, plain retry)."""
    ask = ChatMessage(
        role="user",
        content=f"{note} Before trying again, analyse the failure: what caused it, and what "
        "you will do differently.",
    )
    try:
        analysis, _ = await complete_json(model, [*transcript, ask], FailureAnalysis)
    except ModelOutputInvalid:
        return None
    return f"Your analysis: {analysis.cause} Next approach: {analysis.next_approach}"


def escalation_for(
    task: TaskAwarded, done: TaskOutcome, recovery: Recovery, run: Run
) -> tuple[str, ParkRequest]:
    """The escalation that hands a task automated recovery could not fix to a person (waiting
    party: the task): its id and what to park."""
    decision = recovery.decision
    escalation_id = f"{task.task_id}.attempt-{decision.attempt_number + 1}"
    request = ParkRequest(
        waiting_party=WaitingParty(kind=WaitingPartyKind.TASK, id=task.task_id),
        context=EscalationContext(
            job_id=task.task_id,
            sheet_num=decision.attempt_number + 1,
            validation_results=[],
            confidence=recovery.confidence or 0.0,
            retry_count=decision.attempt_number,
            error_history=[f"{kind.value} -> {action}" for kind, action in run.history],
            prompt_used=task.spec.description,
            output_summary=done.summary or f"failed after {done.actual_steps} steps",
        ),
        who=f"worker:{task.agent_id}",
        why=decision.action.reason or f"{decision.failure_type.value}: automated recovery exhausted",
    )
    return escalation_id, request
