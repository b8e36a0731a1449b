"""Reporting each step of a run to the uncertainty monitor: whether the session goes on, was
parked for a person (the escalation it waits on), or was ended (`SESSION_ABORTED`)."""

from __future__ import annotations

from agora.core.contracts import StepReport
from agora.core.messages import TaskAwarded
from agora.core.uncertainty.aborts import SessionNotRunning, UncertaintyAbort
from agora.runtime.clients import UncertaintyClient
from agora.runtime.sidecar import DaprSidecar
from agora.worker.react import SESSION_ABORTED, ReactStep

__all__ = ["report_step"]


async def report_step(
    sidecar: DaprSidecar, uncertainty_app_id: str | None, task: TaskAwarded, steps: int, step: ReactStep
) -> str | None:
    """Report the step to the uncertainty monitor (none: no check); the escalation id when it
    paused the session, or `SESSION_ABORTED` when it ended the session (critical uncertainty)."""
    if uncertainty_app_id is None:
        return None
    report = StepReport(
        step_id=str(steps),
        text=f"{step.thought} {step.observation} Confidence: {step.confidence:.0%}",
        prompt=task.spec.description,
    )
    monitor = UncertaintyClient(sidecar, uncertainty_app_id)
    try:
        return (await monitor.llm_response(task.task_id, report)).parked
    except (SessionNotRunning, UncertaintyAbort):
        # The session takes no more steps: the monitor ended it, or it waits for a person
        # (a run cut short by a crash and started again after the monitor parked it).
        session = await monitor.session(task.task_id)
        if session.status == "ABORTED":
            return SESSION_ABORTED
        if session.status == "WAITING_FOR_HUMAN" and session.escalation_id:
            return session.escalation_id
        raise
