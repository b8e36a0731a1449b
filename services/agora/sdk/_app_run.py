"""An award's run as a Dapr workflow (`agent_run`): what its steps take and give, their typed
declarations, and the workflow that executes the award, waits for a person while the run is
paused, reports its outcome, and ends it at its deadline."""

from __future__ import annotations

from typing import Any, TypeVar

from dapr.ext.workflow import DaprWorkflowContext, when_any
from pydantic import AwareDatetime, BaseModel, Field

from agora.core.limits import MAX_NOTE_CHARS
from agora.core.market import TaskOutcome
from agora.core.messages import EscalationResolved, TaskAwarded
from agora.runtime.patches import RUN_DEADLINES
from agora.runtime.workflows import ActivityRef, Decisions, Pending, RunFailure, Steps, WorkflowRef

__all__ = [
    "AGENT_RUN",
    "DEADLINE",
    "EXECUTE",
    "REPORT",
    "RESUME",
    "RUN_DEADLINES",
    "RUN_DECISIONS",
    "AgentRunDecision",
    "AgentRunReport",
    "AgentRunStart",
    "RunProgress",
    "agent_run",
    "agent_run_failed",
    "failed_outcome",
    "run_attributes",
    "run_instance",
]

T = TypeVar("T")


class AgentRunStart(BaseModel):
    award: TaskAwarded
    traceparent: str | None = None
    """The award's trace: every step of the run is a span of it, however often the workflow is
    replayed or moved to another process."""
    instance_id: str | None = None
    """The run's workflow instance (`run_instance`); none in a run scheduled before it was kept."""
    deadline: AwareDatetime | None = None
    """When the run must have ended (`run_deadline`: the task's `deadline_ms` after the award);
    None: the task has none, or the run was scheduled before deadlines were kept."""
    handle: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    """Given to the deadline's step of a run paused at its deadline: what its paused step handed
    on (`RunProgress.handle`), for its agent to stop its side of the run."""

    @property
    def instance(self) -> str:
        return self.instance_id or run_instance(self.award.task_id)


class RunProgress(BaseModel):
    """Where a run stands after a step of its workflow: ended with an outcome, or paused for a
    person on an escalation."""

    outcome: TaskOutcome | None = None
    waiting_on: str | None = None
    handed_over: bool = False
    """The task went to another agent, as a person decided: the run ends without an outcome."""
    cancelled: bool = False
    """A person cancelled the task while it ran (`agora.task.cancelled`): the run was stopped
    and ends without an outcome (the board ended the task)."""
    reported: bool = False
    """The step that ended the run announced its outcome too (one recorded step fewer; a step
    run again announces the same event id, which its subscribers take once)."""
    handle: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    """A paused run's: what its agent needs to go on (a handler agent's `HandlerResult.handle`)."""


class AgentRunDecision(BaseModel):
    """A person's decision on the escalation a paused run waits on."""

    award: TaskAwarded
    decided: EscalationResolved
    traceparent: str | None = None
    instance_id: str | None = None
    """The run's workflow instance, as in `AgentRunStart`."""
    deadline: AwareDatetime | None = None
    """The run's deadline, as in `AgentRunStart`."""
    handle: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    """What the paused step handed on (`RunProgress.handle`)."""

    @property
    def instance(self) -> str:
        return self.instance_id or run_instance(self.award.task_id)


class AgentRunReport(BaseModel):
    """A run's outcome, to announce in the run's trace."""

    outcome: TaskOutcome
    traceparent: str | None = None


# The run's activities and workflow (their names are recorded in each run's history).
EXECUTE = ActivityRef("agent.execute", AgentRunStart, RunProgress)
RESUME = ActivityRef("agent.resume", AgentRunDecision, RunProgress)
REPORT = ActivityRef("agent.report", AgentRunReport, None)
DEADLINE = ActivityRef("agent.deadline", AgentRunStart, RunProgress)
AGENT_RUN = WorkflowRef("agent_run", AgentRunStart, None)
RUN_DECISIONS = Decisions(EscalationResolved, lambda event: event)
"""A paused run takes the decision as it was announced (an escalation's or a checkpoint's answer)."""


def run_attributes(award: TaskAwarded) -> dict[str, Any]:
    return {"task_id": award.task_id, "agent_id": award.agent_id}


def run_instance(task_id: str, turn: int = 1) -> str:
    """The workflow instance that runs the `turn`-th award of a task in its agent app: one per
    award, so a task a person hands over to another agent of the same app is a run of its own."""
    return f"run.{task_id}" if turn <= 1 else f"run.{task_id}.{turn}"


def agent_run(ctx: DaprWorkflowContext, start: AgentRunStart) -> Steps[None]:
    """An award's run: execute it; while it is paused for a person, wait for the decision (a
    workflow event, kept by the engine across crashes) and go on as decided; then report its
    outcome (each step recorded once). With a deadline, each of those steps races a durable
    timer at it: the timer first, the run is ended at its deadline instead (`DEADLINE`: FAILED,
    `DEADLINE_EXCEEDED`), whatever its process's fate (a run paused for a person, or lost with
    its app, is stopped as surely as one the app stops itself)."""
    deadline = start.deadline if RUN_DEADLINES.applies(ctx) else None
    # One timer for the whole run (the engine's clock, replayed from the history).
    timer = ctx.create_timer(deadline) if deadline is not None else None
    progress = yield from _before_deadline(EXECUTE.schedule(ctx, start), timer)
    paused_with: str | None = None
    while progress is not None:
        if progress.outcome is not None:
            if not progress.reported:  # a step recorded before steps announced their outcomes
                report = AgentRunReport(outcome=progress.outcome, traceparent=start.traceparent)
                yield from REPORT.run(ctx, report)
            return None
        if progress.handed_over:
            return None  # the task's next holder reports its outcome
        if progress.cancelled:
            return None  # the board ended the task
        waiting_on = progress.waiting_on or ""
        paused_with = progress.handle
        decided = yield from _before_deadline(RUN_DECISIONS.waiting(ctx, waiting_on), timer)
        if decided is None:
            break
        resumed = AgentRunDecision(
            award=start.award,
            decided=decided,
            traceparent=start.traceparent,
            instance_id=start.instance_id,
            deadline=deadline,
            handle=progress.handle,
        )
        progress = yield from _before_deadline(RESUME.schedule(ctx, resumed), timer)
    yield from DEADLINE.run(ctx, start.model_copy(update={"handle": paused_with}))
    return None


def _before_deadline(step: Pending[T], timer: Any | None) -> Steps[T | None]:
    """`step`'s result, or None when `timer` (the run's deadline; None: it has none) fires
    first. The step left behind is not waited for: the run ends at its deadline."""
    if timer is None:
        return (yield from step.wait())
    first = yield when_any([step.task, timer])
    return None if first is timer else step.result(step.task.get_result())


def agent_run_failed(ctx: DaprWorkflowContext, start: AgentRunStart, failure: RunFailure) -> Steps[None]:
    """A run that broke down still ends its task: a failed outcome with the reason."""
    report = AgentRunReport(
        outcome=failed_outcome(start.award, failure.reason), traceparent=start.traceparent
    )
    yield from REPORT.run(ctx, report)


def failed_outcome(award: TaskAwarded, reason: str, *, cost_usd: float = 0.0, steps: int = 0,
                   input_tokens: int = 0, output_tokens: int = 0) -> TaskOutcome:  # fmt: skip
    return TaskOutcome(
        task_id=award.task_id,
        agent_id=award.agent_id,
        actual_success=False,
        actual_cost_usd=cost_usd,
        actual_steps=steps,
        summary=reason[:MAX_NOTE_CHARS],
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        award_token=award.award_token,
    )
