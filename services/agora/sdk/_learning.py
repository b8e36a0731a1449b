"""What an agent learns from its own recent runs: the patterns they show, the relevant ones
added to a new task's prompt, each run kept as an outcome with the patterns it was given, and
the report of how runs fared with each pattern against without. Both agent runtimes use it:
the `AgentRunner` (with an `OutcomeHistory`) and the reference worker."""

from __future__ import annotations

import time
from typing import Protocol

from agora.core.checks import RecordedError
from agora.core.contracts import AgentLearning
from agora.core.limits import MAX_ITEMS, MAX_TEXT_CHARS
from agora.core.outcomes.effectiveness import pattern_effectiveness
from agora.core.outcomes.patterns import DetectedPattern, detect_patterns
from agora.core.outcomes.prompts import select_relevant_patterns
from agora.core.outcomes.record import OutcomeStatus, StepOutcome
from agora.core.triage.failures import FailureType

__all__ = [
    "LEARNING_KEPT",
    "PATTERNS_APPLIED",
    "PATTERNS_REFRESHED_EVERY",
    "InMemoryOutcomeHistory",
    "Lessons",
    "OutcomeHistory",
    "learning_report",
    "learnt",
]

LEARNING_KEPT = 50
"""Recent runs an agent learns from (its own; bounded, as they are saved with its state)."""
PATTERNS_REFRESHED_EVERY = 5
"""Runs after which the agent looks for patterns in its history again (not on every task)."""
PATTERNS_APPLIED = 3
"""Most patterns added to one task's prompt."""


class Lessons:
    """The patterns in an agent's recent runs, as last looked for (kept per activation of its
    actor, not saved), looked for again every `PATTERNS_REFRESHED_EVERY` runs."""

    def __init__(self) -> None:
        self._found: list[DetectedPattern] | None = None
        self._runs_since = 0

    def ran(self) -> None:
        """One more run was kept in the history."""
        self._runs_since += 1

    @property
    def stale(self) -> bool:
        """Whether the history must be read (and its patterns looked for) before the next task:
        the history is read once per refresh, not once per run."""
        return self._found is None or self._runs_since >= PATTERNS_REFRESHED_EVERY

    def refresh(self, history: list[StepOutcome]) -> None:
        self._found = detect_patterns(history)
        self._runs_since = 0

    def for_task(self, description: str) -> list[str]:
        """The texts of the patterns relevant to a task, to add to its prompt (at most
        `PATTERNS_APPLIED`), from the patterns last found."""
        relevant = select_relevant_patterns(self._found or [], {"text": description}, PATTERNS_APPLIED)
        return [p.description for p in relevant]


def learnt(
    run_id: str,
    *,
    succeeded: bool,
    partial: bool,
    aborted: bool,
    started_at: float,
    history: list[tuple[FailureType, str]],
    patterns_applied: list[str],
    summary: str,
) -> StepOutcome:
    """What one run (`run_id`: its task or session) teaches the agent: how it ended, after how
    many failed attempts and of which kinds, and which patterns its prompt carried. A run has
    no validations, so the validation fields stay unset."""
    if succeeded:
        status = OutcomeStatus.COMPLETED
    elif partial:
        status = OutcomeStatus.SKIPPED
    elif aborted:
        status = OutcomeStatus.ABORTED
    else:
        status = OutcomeStatus.FAILED
    return StepOutcome(
        outcome_id=f"task-{run_id}",
        step_id="1",
        job_id=run_id,
        execution_duration=max(0.0, time.time() - started_at),
        retry_count=len(history),
        final_status=status,
        success_without_retry=succeeded and not history,
        patterns_applied=patterns_applied,
        error_history=[
            RecordedError(error_code=kind.value, category=kind.value, message=f"{kind.value}: {recovery}")
            for kind, recovery in history
        ],
        failure_type=history[-1][0] if history else None,
        stdout_tail=summary[-500:],
    )


class OutcomeHistory(Protocol):
    """Where an agent's recent runs are kept (the latest `LEARNING_KEPT`, oldest first)."""

    async def outcomes(self, agent_id: str) -> list[StepOutcome]: ...

    async def record(self, agent_id: str, outcome: StepOutcome) -> None: ...


class InMemoryOutcomeHistory:
    """An outcome history in this process only (tests, one-off scripts)."""

    def __init__(self) -> None:
        self._outcomes: dict[str, list[StepOutcome]] = {}

    async def outcomes(self, agent_id: str) -> list[StepOutcome]:
        return list(self._outcomes.get(agent_id, []))

    async def record(self, agent_id: str, outcome: StepOutcome) -> None:
        kept = [o for o in self._outcomes.get(agent_id, []) if o.outcome_id != outcome.outcome_id]
        self._outcomes[agent_id] = [*kept, outcome][-LEARNING_KEPT:]


def learning_report(agent_id: str, history: list[StepOutcome]) -> AgentLearning:
    """What the agent learnt from `history`: the patterns it shows and their effectiveness. A
    worker's runs show a few patterns (one per failure type at most); the cut only keeps the
    answer within its bounds whatever the history holds."""
    return AgentLearning(
        agent_id=agent_id,
        outcomes=len(history),
        patterns=[p.description[:MAX_TEXT_CHARS] for p in detect_patterns(history)][:MAX_ITEMS],
        effectiveness=pattern_effectiveness(history)[:MAX_ITEMS],
    )
