"""The uncertainty monitor as a runner's step monitor: every step of a run is reported to the
monitor (session = the run's session, a task id in an agent app), which may pause the session
for a person (the run parks as WAITING_FOR_HUMAN on the escalation it opened) or end it.

Before each step the monitor evaluates the checkpoint triggers (its own and the runner's), and
before each tool call it checks the tool (a tool that cannot be undone waits for a person at
medium uncertainty): either holds the step before it runs. A step it doubts (high uncertainty)
comes back with the monitor's reflection prompt for the next model call. The decision a person
took on a held step is read from the session's continuations."""

from __future__ import annotations

import asyncio
import json

from agora.core.contracts import CheckpointRequest, Continuation, SessionState, StepReport
from agora.core.escalation.checkpoints import CheckpointGate
from agora.core.escalation.decisions import CheckpointAction, CheckpointResponse, EscalationResponse
from agora.core.limits import MAX_TEXT_CHARS
from agora.core.uncertainty.aborts import SessionNotRunning, UncertaintyAbort
from agora.core.uncertainty.policy import REFLECTION_PROMPT
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
        reflection = REFLECTION_PROMPT if verdict.step.reflection_injected else ""
        if verdict.parked is not None:
            return StepCheck(
                action="pause", escalation_id=verdict.parked, reason="uncertain step", reflection=reflection
            )
        return StepCheck(reflection=reflection)

    async def before_tool(self, state: AgentState, step: ReactStep) -> StepCheck:
        """The tool of `step` (step number `state.iterations`), checked before it runs."""
        tool = step.tool or "(none)"
        report = StepReport(
            step_id=f"tool-{state.iterations}",
            text=f"{step.thought} Calls {tool} with {json.dumps(step.arguments, sort_keys=True)}"[
                :MAX_TEXT_CHARS
            ],
            prompt=_task_of(state),
            step_type="tool_call",
            tool_name=tool,
        )
        try:
            verdict = await self._monitor.tool_call(state.session_id, report)
        except (SessionNotRunning, UncertaintyAbort):
            return _where(await self._monitor.session(state.session_id))
        if verdict.parked is not None:
            return StepCheck(
                action="pause", escalation_id=verdict.parked, reason=f"confirm before tool {tool}"
            )
        return StepCheck()

    async def before_step(self, state: AgentState, request: CheckpointRequest) -> StepCheck:
        """The checkpoint before step `request.step`: the monitor's triggers and the request's."""
        try:
            answer = await self._monitor.checkpoint(state.session_id, request)
        except SessionNotRunning:
            return _where(await self._monitor.session(state.session_id))
        verdict = answer.verdict
        if answer.status == "WAITING_FOR_HUMAN" and answer.escalation_id:
            return StepCheck(action="pause", escalation_id=answer.escalation_id, reason=verdict.message)
        if verdict.gate is CheckpointGate.WARN:
            return StepCheck(reason=verdict.message)
        return StepCheck()

    async def decision_on(
        self, session_id: str, escalation_id: str
    ) -> CheckpointResponse | EscalationResponse | None:
        """The decision the session received on `escalation_id` (None: none yet)."""
        session = await self._monitor.session(session_id)
        taken = next((c for c in reversed(session.continuations) if c.escalation_id == escalation_id), None)
        return _response(taken) if taken is not None else None

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


def _response(taken: Continuation) -> CheckpointResponse | EscalationResponse:
    """A recorded continuation as the answer it was given (an answer of either kind to a
    checkpoint-kind action name reads as a checkpoint answer: they mean the same to a step)."""
    action = str(taken.action)
    if action in {str(a) for a in CheckpointAction}:
        return CheckpointResponse(
            action=CheckpointAction(action), modified_prompt=taken.next_prompt, guidance=taken.guidance
        )
    return EscalationResponse.model_validate(
        {"action": action, "modified_prompt": taken.next_prompt, "guidance": taken.guidance}
    )


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
