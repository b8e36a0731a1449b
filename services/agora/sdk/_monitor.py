"""The uncertainty monitor as a runner's step monitor: every step of a run is reported to the
monitor (session = the run's session, a task id in an agent app), which may pause the session
for a person (the run parks as WAITING_FOR_HUMAN on the escalation it opened) or end it."""

from __future__ import annotations

import asyncio

from agora.core.contracts import SessionState, StepReport
from agora.core.limits import MAX_TEXT_CHARS
from agora.core.uncertainty.aborts import SessionNotRunning, UncertaintyAbort
from agora.runtime.clients import UncertaintyClient
from agora.runtime.sidecar import DaprSidecar
from agora.sdk._runner import AgentState, ReactStep, StepCheck

__all__ = ["UncertaintyStepMonitor"]

DECISION_TAKEN_WAIT_S = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0)
"""How long a resumed run waits, step by step, for the monitor to take the decision it was
resumed by (the monitor hears of it on the same topic, perhaps a moment later)."""


class UncertaintyStepMonitor:
    """Reports each step to the uncertainty monitor app `app_id` through the sidecar."""

    def __init__(self, sidecar: DaprSidecar, app_id: str) -> None:
        self._monitor = UncertaintyClient(sidecar, app_id)

    async def check(self, state: AgentState, step: ReactStep) -> StepCheck:
        said = step.answer if step.action == "final" else f"calls {step.tool}"
        report = StepReport(
            step_id=str(state.iterations),
            text=f"{step.thought} {said} Confidence: {step.confidence:.0%}"[:MAX_TEXT_CHARS],
            prompt=_task_of(state),
        )
        try:
            verdict = await self._monitor.llm_response(state.session_id, report)
        except (SessionNotRunning, UncertaintyAbort):
            return _where(await self._monitor.session(state.session_id))
        if verdict.parked is not None:
            return StepCheck(action="pause", escalation_id=verdict.parked, reason="uncertain step")
        return StepCheck()

    async def decision_taken(self, session_id: str, escalation_id: str) -> SessionState:
        """Wait until the monitor's session no longer waits on `escalation_id` (it took the
        person's decision), so the resumed run's next step is not refused; the session as it
        then stands. `TimeoutError` when it still waits after about 16 s."""
        for delay in (0.0, *DECISION_TAKEN_WAIT_S):
            await asyncio.sleep(delay)
            session = await self._monitor.session(session_id)
            if session.status != "WAITING_FOR_HUMAN" or session.escalation_id != escalation_id:
                return session
        raise TimeoutError(f"the uncertainty monitor has not taken the decision on {escalation_id} yet")


def _where(session: SessionState) -> StepCheck:
    """A refused step: the session was ended, or waits for a person (a run started again after
    a crash, once the monitor had paused it)."""
    if session.status == "WAITING_FOR_HUMAN" and session.escalation_id:
        return StepCheck(action="pause", escalation_id=session.escalation_id, reason="uncertain step")
    reason = session.abort_summary.reason if session.abort_summary else "ended by the uncertainty monitor"
    return StepCheck(action="abort", reason=f"stopped by the uncertainty monitor: {reason}")


def _task_of(state: AgentState) -> str | None:
    first = next((m.content for m in state.messages if m.role == "user"), None)
    return first[:MAX_TEXT_CHARS] if first is not None else None
