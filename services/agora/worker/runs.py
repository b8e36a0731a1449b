"""What an agent keeps of its tasks: one task's run across its attempts (`Run`), a run parked
for a person (`ParkedTask`), and the agent's actor state (`WorkerState`: tasks executed, tasks
parked, the recent runs it learns from)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from agora.core.market import TaskOutcome
from agora.core.messages import TaskAwarded
from agora.core.outcomes.record import SheetOutcome
from agora.core.triage.failures import FailureType
from agora.llm import ChatMessage

__all__ = ["ParkedTask", "Run", "WorkerState"]


@dataclass
class Run:
    """One task's run across its attempts: what the prompt was given and what went wrong."""

    patterns_applied: list[str]
    started_at: float
    history: list[tuple[FailureType, str]] = field(default_factory=list)
    aborted: bool = False
    """Ended by an abort (a person's decision, or the ladder's last rung)."""


class ParkedTask(BaseModel):
    award: TaskAwarded
    transcript: list[ChatMessage]
    steps: int
    escalation_id: str
    step_limit: int = 0
    """Where the interrupted attempt would have stopped (0: a new attempt on resume)."""
    attempt_history: list[tuple[FailureType, str]] = Field(default_factory=list)
    """Triage's record of the recoveries tried so far for this task."""
    patterns_applied: list[str] = Field(default_factory=list)
    """What the agent's learning added to the task's prompt."""
    started_at: float = 0.0
    """Wall-clock seconds when the task's first attempt started."""

    @classmethod
    def of(
        cls,
        task: TaskAwarded,
        transcript: list[ChatMessage],
        steps: int,
        escalation_id: str,
        run: Run,
        *,
        step_limit: int = 0,
    ) -> ParkedTask:
        """The run of `task`, parked under `escalation_id` after `steps` steps."""
        return cls(
            award=task,
            transcript=transcript,
            steps=steps,
            escalation_id=escalation_id,
            step_limit=step_limit,
            attempt_history=run.history,
            patterns_applied=run.patterns_applied,
            started_at=run.started_at,
        )

    def run(self, now: float) -> Run:
        """The parked run, going on (from `now` if its start was not kept)."""
        return Run(self.patterns_applied, self.started_at or now, list(self.attempt_history))


class WorkerState(BaseModel):
    executed: dict[str, TaskOutcome] = Field(default_factory=dict)
    parked: dict[str, ParkedTask] = Field(default_factory=dict)
    learning: list[SheetOutcome] = Field(default_factory=list)
    """The agent's most recent runs (at most `LEARNING_KEPT`), oldest first."""
