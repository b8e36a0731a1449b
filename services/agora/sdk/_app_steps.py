"""What the steps of an award's run do with its agent: run the award (its handler, or its
runner within the task's budget), go on with a paused run as a person decided (or hand the task
over), and the outcome a run comes to. Each takes what it works with, so each runs without the
app."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from agora.core.acceptance import VerdictStatus
from agora.core.errors import AgoraError, NotFound
from agora.core.escalation.decisions import EscalationAction, EscalationResponse, resume_message
from agora.core.limits import MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.market import TaskOutcome
from agora.core.messages import EscalationResolved, HandOver, TaskAwarded
from agora.core.task_lifecycle import failure_summary, verdict_on
from agora.runtime.interfaces import TaskInterface
from agora.sdk._agent import Agent, HandlerResult
from agora.sdk._app_meter import RunMeter
from agora.sdk._app_run import AgentRunDecision, RunProgress, failed_outcome
from agora.sdk._monitor import UncertaintyStepMonitor
from agora.sdk._runner import AgentState, AgentStateStore, ExecutionResult, RunEventSink, RunStatus

__all__ = ["charged", "execute_award", "resume_award"]

log = logging.getLogger(__name__)


async def execute_award(
    agent: Agent,
    award: TaskAwarded,
    store: AgentStateStore,
    meter: RunMeter | None = None,
    events: RunEventSink | None = None,
) -> RunProgress:
    """Run the award: the agent's handler, or its runner on the task's description within the
    task's budget (its events, the model's text as it streams among them, to `events`). A run
    that fails (its budget, its iteration limit, a model that is gone) ends as a failed outcome
    with the reason and what it spent; a run the step monitor paused waits for a person."""
    if agent.handler is not None:
        return _handled(agent, award, await agent.handler(award))
    assert agent.runner is not None
    saved = await store.load(agent.agent_id, award.task_id)
    if saved is not None and saved.status is RunStatus.WAITING_FOR_HUMAN:
        # This step ran before and paused the run (then the app stopped before the engine
        # recorded it): the run waits for that escalation's decision, not for a second one.
        return RunProgress(waiting_on=saved.escalation_id)
    definition = agent.definition
    # A run may take twice the steps its bid estimated, within the agent's maximum.
    allowance = min(agent.profile.max_steps, 2 * max(1, award.bid.estimated_steps))
    if meter is not None:
        meter.begin(agent.agent_id, award.task_id)
    return await _progress(
        agent,
        award,
        store,
        agent.runner.run(
            definition,
            award.spec.description,
            session_id=award.task_id,
            budget_usd=award.spec.budget_usd,
            max_iterations=allowance,
            checkpoints=award.spec.checkpoints,
            events=events,
        ),
    )


async def resume_award(
    agent: Agent,
    decision: AgentRunDecision,
    store: AgentStateStore,
    monitor: UncertaintyStepMonitor | None,
    tasks: Callable[[str], TaskInterface],
    meter: RunMeter | None = None,
    events: RunEventSink | None = None,
) -> RunProgress:
    """Go on with a paused run as the person decided: abort ends it failed, reassign hands the
    task to another bidder; skip leaves out the step a gate held before it ran (the run goes
    on without it), or ends a run paused after a step as partial; anything else continues it
    with the decision (and a new prompt or guidance) as the next message, a held step going as
    decided."""
    award, decided = decision.award, decision.decided
    if agent.handler is not None:
        return await _resume_handled(agent, decision, tasks)
    assert agent.runner is not None
    saved = await store.load(agent.agent_id, award.task_id)
    if saved is None:
        raise NotFound(f"no saved run of agent {agent.agent_id} for task {award.task_id}")
    if saved.status is not RunStatus.WAITING_FOR_HUMAN or saved.escalation_id != decided.escalation_id:
        # Applied before (the app stopped before the engine recorded it): as the run now stands.
        return _progress_of(agent, award, saved)
    if (
        isinstance(decided.decision, EscalationResponse)
        and decided.decision.action is EscalationAction.REASSIGN
    ):
        return await _hand_over(agent, award, decided, decided.decision, saved, store, tasks)
    action = str(decided.decision.action)
    if action == "abort" or (action == "skip" and saved.held is None):
        reason = f"{action} by {decided.decided_by}"[:MAX_NOTE_CHARS]
        ended = saved.model_copy(update={"status": RunStatus.FAILED, "reason": reason})
        await store.save(ended)
        outcome = _outcome_of(agent, award, ended)
        return RunProgress(outcome=outcome.model_copy(update={"partial": action == "skip"}))
    if monitor is not None:
        await monitor.decision_taken(award.task_id, decided.escalation_id)
    if meter is not None:
        meter.begin(agent.agent_id, award.task_id, saved)
    return await _progress(
        agent,
        award,
        store,
        agent.runner.resume(
            agent.agent_id,
            award.task_id,
            resume_message(decided.decision),
            decision=decided.decision,
            events=events,
        ),
    )


def claimed(agent: Agent, award: TaskAwarded, outcome: TaskOutcome) -> TaskOutcome:
    """The outcome as an honest agent claims it: a success whose output fails the task's own
    check (one the SDK can run here, as the board will) is reported as the failure it is, its
    output unchanged, instead of a success the check would contradict."""
    if not agent.check_before_report or not outcome.actual_success:
        return outcome
    verdict = verdict_on(award.spec, outcome, datetime.now(UTC))
    if verdict is None or verdict.status is not VerdictStatus.FAILED:
        return outcome
    log.info(
        "the run's output fails its task's check; reporting a failure",
        extra={"task_id": award.task_id, "agent_id": award.agent_id, "reason": verdict.reason[:300]},
    )
    return outcome.model_copy(update={"actual_success": False, "partial": False})


def _handled(agent: Agent, award: TaskAwarded, result: HandlerResult) -> RunProgress:
    """Where a handler's result leaves the run: waiting for a person, or ended with it."""
    if result.waiting_on is not None:
        return RunProgress(waiting_on=result.waiting_on, handle=result.handle)
    outcome = TaskOutcome(
        task_id=award.task_id,
        agent_id=award.agent_id,
        actual_success=result.success,
        actual_cost_usd=result.cost_usd,
        actual_steps=result.steps,
        partial=result.partial,
        summary=result.summary,
        input_tokens=result.input_tokens,
        output_tokens=result.output_tokens,
        award_token=award.award_token,
    )
    return RunProgress(outcome=claimed(agent, award, outcome))


async def _resume_handled(
    agent: Agent, decision: AgentRunDecision, tasks: Callable[[str], TaskInterface]
) -> RunProgress:
    """A handler agent's paused run, as the person decided: a reassign hands the task over (the
    agent's decision handler is told first, to stop its side of it), anything else is its
    decision handler's to carry out."""
    award, decided = decision.award, decision.decided
    if agent.decision_handler is None:
        reason = f"agent {agent.agent_id} cannot go on after a decision (it has no decision handler)"
        return RunProgress(outcome=failed_outcome(award, reason))
    result = await agent.decision_handler(award, decided, decision.handle)
    if (
        isinstance(decided.decision, EscalationResponse)
        and decided.decision.action is EscalationAction.REASSIGN
    ):
        return await _hand_over(agent, award, decided, decided.decision, None, None, tasks)
    return _handled(agent, award, result)


async def _hand_over(
    agent: Agent,
    award: TaskAwarded,
    decided: EscalationResolved,
    decision: EscalationResponse,
    saved: AgentState | None,
    store: AgentStateStore | None,
    tasks: Callable[[str], TaskInterface],
) -> RunProgress:
    """Give the task up for the bidder a person chose (or the next-best one): the board awards
    it again and the run ends with no outcome of its own. A hand-over the board refuses (the
    bidder chosen is gone from the task, nobody is left) ends the run failed, saying why."""
    who = decided.decided_by or "a person"
    given_up = HandOver(
        agent_id=award.agent_id,
        award_token=award.award_token,
        to_agent=decision.reassign_to,
        escalation_id=decided.escalation_id,
        decided_by=who,
    )
    try:
        board = await tasks(award.task_id).hand_over(given_up)
    except AgoraError as exc:
        if not exc.permanent:
            raise
        reason = f"reassign by {who} could not be done: {exc.code}: {exc.message}"[:MAX_NOTE_CHARS]
        if saved is None or store is None:  # a handler agent's run: nothing saved of it here
            return RunProgress(outcome=failed_outcome(award, reason))
        ended = saved.model_copy(update={"status": RunStatus.FAILED, "reason": reason})
        await store.save(ended)
        return RunProgress(outcome=_outcome_of(agent, award, ended))
    successor = board.awards[-1].agent_id if board.awards else "another agent"
    reason = f"handed over to {successor} by {who}"[:MAX_NOTE_CHARS]
    if saved is not None and store is not None:
        await store.save(
            saved.model_copy(update={"status": RunStatus.FAILED, "reason": reason, "handed_over": True})
        )
    return RunProgress(handed_over=True)


async def _progress(
    agent: Agent, award: TaskAwarded, store: AgentStateStore, running: Awaitable[ExecutionResult]
) -> RunProgress:
    try:
        run = await running
    except AgoraError as exc:
        reason = failure_summary(exc)
        spent = await store.load(award.agent_id, award.task_id)
        if spent is None:
            return RunProgress(outcome=failed_outcome(award, reason))
        failed = spent.model_copy(update={"status": RunStatus.FAILED, "output": "", "reason": reason})
        return RunProgress(outcome=_outcome_of(agent, award, failed))
    if run.status is RunStatus.WAITING_FOR_HUMAN:
        return RunProgress(waiting_on=run.escalation_id)
    return RunProgress(
        outcome=_ended_run(
            agent,
            award,
            run.status,
            run.total_cost_usd,
            run.iterations,
            run.output,
            run.reason,
            run.input_tokens,
            run.output_tokens,
            run.tools_called,
        )
    )


def charged(agent: Agent, model_cost_usd: float, steps: int) -> float:
    """What a run cost: its model calls at their prices, plus the agent's own price for each
    step (`cost_per_step_usd`: what it charges for its work, as its bids say)."""
    return round(model_cost_usd + steps * agent.profile.cost_per_step_usd, 6)


def _summary(status: RunStatus, output: str, reason: str) -> str:
    """An outcome's summary: the answer of a run that completed, why one that failed did."""
    said = (reason or output) if status is RunStatus.FAILED else (output or reason)
    return said[:MAX_TEXT_CHARS]


def _progress_of(agent: Agent, award: TaskAwarded, state: AgentState) -> RunProgress:
    if state.status is RunStatus.WAITING_FOR_HUMAN:
        return RunProgress(waiting_on=state.escalation_id)
    if state.handed_over:
        return RunProgress(handed_over=True)
    return RunProgress(outcome=_outcome_of(agent, award, state))


def _outcome_of(agent: Agent, award: TaskAwarded, state: AgentState) -> TaskOutcome:
    """The outcome a saved run's state shows (a run that ended, or is ended now)."""
    return _ended_run(
        agent, award, state.status, state.cost_usd, state.iterations, state.output, state.reason,
        state.input_tokens, state.output_tokens, state.tools_called,
    )  # fmt: skip


def _ended_run(
    agent: Agent, award: TaskAwarded, status: RunStatus, model_cost_usd: float, steps: int, output: str,
    reason: str, input_tokens: int, output_tokens: int, tools_called: list[str],
) -> TaskOutcome:  # fmt: skip
    """The outcome of a run that ended so, as the agent claims it (`claimed`)."""
    return claimed(
        agent,
        award,
        TaskOutcome(
            task_id=award.task_id,
            agent_id=award.agent_id,
            actual_success=status is RunStatus.COMPLETED,
            actual_cost_usd=charged(agent, model_cost_usd, steps),
            actual_steps=steps,
            summary=_summary(status, output, reason),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            tools_called=tools_called,
            award_token=award.award_token,
        ),
    )
