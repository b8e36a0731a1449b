"""What an agent learns from its own recent runs: the patterns they show, the relevant ones
added to a new task's prompt, each run kept as an outcome with the patterns it was given, and
the report of how runs fared with each pattern against without."""

from __future__ import annotations

import time

from agora.core.checks import RecordedError
from agora.core.contracts import AgentLearning
from agora.core.limits import MAX_ITEMS, MAX_TEXT_CHARS
from agora.core.market import TaskOutcome
from agora.core.outcomes.effectiveness import pattern_effectiveness
from agora.core.outcomes.patterns import DetectedPattern, detect_patterns
from agora.core.outcomes.prompts import select_relevant_patterns
from agora.core.outcomes.record import OutcomeStatus, SheetOutcome
from agora.worker.runs import Run

__all__ = [
    "LEARNING_KEPT",
    "PATTERNS_APPLIED",
    "PATTERNS_REFRESHED_EVERY",
    "Lessons",
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

    def patterns(self, history: list[SheetOutcome]) -> list[DetectedPattern]:
        if self._found is None or self._runs_since >= PATTERNS_REFRESHED_EVERY:
            self._found = detect_patterns(history)
            self._runs_since = 0
        return self._found

    def for_task(self, history: list[SheetOutcome], description: str) -> list[str]:
        """The texts of the patterns relevant to a task, to add to its prompt (at most
        `PATTERNS_APPLIED`)."""
        relevant = select_relevant_patterns(self.patterns(history), {"text": description}, PATTERNS_APPLIED)
        return [p.description for p in relevant]


def learnt(done: TaskOutcome, run: Run) -> SheetOutcome:
    """What one run teaches the agent: how it ended, after how many failed attempts and of
    which kinds, and which patterns its prompt carried. A run has no validations, so the
    validation fields stay unset."""
    if done.actual_success:
        status = OutcomeStatus.COMPLETED
    elif done.partial:
        status = OutcomeStatus.SKIPPED
    elif run.aborted:
        status = OutcomeStatus.ABORTED
    else:
        status = OutcomeStatus.FAILED
    return SheetOutcome(
        outcome_id=f"task-{done.task_id}",
        sheet_id="1",
        job_id=done.task_id,
        execution_duration=max(0.0, time.time() - run.started_at),
        retry_count=len(run.history),
        final_status=status,
        success_without_retry=done.actual_success and not run.history,
        patterns_applied=run.patterns_applied,
        error_history=[
            RecordedError(error_code=kind.value, category=kind.value, message=f"{kind.value}: {recovery}")
            for kind, recovery in run.history
        ],
        failure_type=run.history[-1][0] if run.history else None,
        stdout_tail=done.summary[-500:],
    )


def learning_report(agent_id: str, history: list[SheetOutcome]) -> AgentLearning:
    """What the agent learnt from `history`: the patterns it shows and their effectiveness. A
    worker's runs show a few patterns (one per failure type at most); the cut only keeps the
    answer within its bounds whatever the history holds."""
    return AgentLearning(
        agent_id=agent_id,
        outcomes=len(history),
        patterns=[p.description[:MAX_TEXT_CHARS] for p in detect_patterns(history)][:MAX_ITEMS],
        effectiveness=pattern_effectiveness(history)[:MAX_ITEMS],
    )
