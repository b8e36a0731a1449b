"""The steps of an award's run in its agent app (the `agent_run` workflow's activities): execute
the award, resume it as a person decided, end it at its deadline, and report its outcome on the
task board. A step that ends the run reports its outcome itself."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from agora.core import topics
from agora.core.errors import AgoraError
from agora.core.market import TaskOutcome
from agora.core.messages import DeadLetter
from agora.runtime.interfaces import TaskInterface
from agora.runtime.pubsub import Publisher
from agora.runtime.workflows import WorkflowHost, step_span
from agora.sdk._agent import Agent
from agora.sdk._app_deadlines import RunDeadlines
from agora.sdk._app_meter import RunMeter
from agora.sdk._app_run import (
    AGENT_RUN,
    DEADLINE,
    EXECUTE,
    REPORT,
    RESUME,
    AgentRunDecision,
    AgentRunReport,
    AgentRunStart,
    RunProgress,
    agent_run,
    agent_run_failed,
    run_attributes,
)
from agora.sdk._app_run_feeds import RunFeeds
from agora.sdk._app_steps import execute_award, resume_award
from agora.sdk._mcp import durable_call_scope
from agora.sdk._monitor import UncertaintyStepMonitor
from agora.sdk._runner import AgentStateStore

__all__ = ["RunActivities"]

log = logging.getLogger(__name__)


class RunActivities:
    """The `agent_run` workflow's activities for this app's agents. At most `max_runs_in_flight`
    runs go on at once (the engine holds the others' next steps until a slot frees); `reporting`
    names the runs (by workflow instance) whose outcome is being recorded and announced."""

    def __init__(
        self,
        agents: dict[str, Agent],
        store: AgentStateStore,
        monitor: UncertaintyStepMonitor | None,
        meter: RunMeter | None,
        deadlines: RunDeadlines,
        tasks: Callable[[str], TaskInterface],
        publisher: Publisher,
        *,
        app_id: str,
        dapr_http_endpoint: str,
        max_runs_in_flight: int,
        feeds: RunFeeds | None = None,
    ) -> None:
        self._agents = agents
        self._store = store
        self._monitor = monitor
        self._meter = meter
        self._deadlines = deadlines
        self._tasks = tasks
        self._publisher = publisher
        self._app_id = app_id
        self._dapr_http_endpoint = dapr_http_endpoint
        self._run_slots = asyncio.Semaphore(max_runs_in_flight)
        self._feeds = feeds or RunFeeds()
        """The events of the runs going on here, for their streams (`GET /v1/runs/{task_id}/events`)."""
        self.reporting: set[str] = set()
        """Runs (by workflow instance) whose outcome is being recorded and announced."""

    def register(self, host: WorkflowHost) -> None:
        """The `agent_run` workflow and its activities, on the app's workflow runtime."""
        host.workflow(AGENT_RUN, agent_run, on_failure=agent_run_failed)
        host.activity(EXECUTE, self.execute)
        host.activity(RESUME, self.resume)
        host.activity(REPORT, self.report)
        host.activity(DEADLINE, self.deadline_passed)

    @contextlib.asynccontextmanager
    async def _working(self, agent: Agent) -> AsyncIterator[None]:
        """One of the app's run slots, counted as the agent's load while the run works, with the
        agent connected to the sidecar (a run resumed after a crash may come before warm-up did)."""
        async with self._run_slots:
            agent.runs_in_flight += 1
            try:
                await agent.connect(self._dapr_http_endpoint)
                yield
            finally:
                agent.runs_in_flight -= 1

    async def execute(self, start: AgentRunStart) -> RunProgress:
        award = start.award
        agent = self._agents[award.agent_id]

        async def run() -> RunProgress:
            async with self._working(agent):
                with (
                    step_span("agent.execute", start.traceparent, run_attributes(award)),
                    durable_call_scope(start.instance),
                ):
                    events = self._feeds.sink(award.task_id)
                    return await execute_award(agent, award, self._store, self._meter, events)

        # Its deadline counts from the award: the wait for a run slot is within it too.
        progress = await self._deadlines.bounded(award, start.instance, start.deadline, run)
        self.reporting.add(start.instance)
        try:
            return await self.reported(progress, start.traceparent)
        finally:
            self.reporting.discard(start.instance)

    async def resume(self, decision: AgentRunDecision) -> RunProgress:
        award = decision.award
        agent = self._agents[award.agent_id]

        async def run() -> RunProgress:
            async with self._working(agent):
                # Each decision continues the run once: its calls are numbered afresh.
                with (
                    step_span("agent.resume", decision.traceparent, run_attributes(award)),
                    durable_call_scope(f"{decision.instance}.{decision.decided.escalation_id}"),
                ):
                    events = self._feeds.sink(award.task_id)
                    return await resume_award(
                        agent, decision, self._store, self._monitor, self._tasks, self._meter, events
                    )

        progress = await self._deadlines.bounded(award, decision.instance, decision.deadline, run)
        return await self.reported(progress, decision.traceparent)

    async def deadline_passed(self, start: AgentRunStart) -> RunProgress:
        """The run's workflow timer: the run ends at its deadline, if it has not yet."""
        with step_span("agent.deadline", start.traceparent, run_attributes(start.award)):
            progress = await self._deadlines.passed(start)
        return await self.reported(progress, start.traceparent)

    def stop_cancelled(self, instance: str) -> bool:
        """Stop the run of `instance` going on in this process, its task cancelled; whether one was."""
        return self._deadlines.stop_cancelled(instance)

    async def reported(self, progress: RunProgress, traceparent: str | None) -> RunProgress:
        """A run that ended announces its outcome in the step that ended it."""
        if progress.outcome is None or progress.reported:
            return progress
        await self.report(AgentRunReport(outcome=progress.outcome, traceparent=traceparent))
        return progress.model_copy(update={"reported": True})

    async def _recorded_already(self, outcome: TaskOutcome) -> bool:
        """Whether the board holds an outcome of this same award (its token) for the task."""
        if outcome.award_token is None:
            return False
        board = await self._tasks(outcome.task_id).get_task()
        recorded = board.outcome
        return recorded is not None and recorded.award_token == outcome.award_token

    async def report(self, report: AgentRunReport) -> None:
        """The outcome on the board (it acknowledges the award, within its window), which
        announces what it records. One the board refuses goes to the dead-letter topic
        with the board's reason, so the refusal is seen, not only logged here."""
        outcome = report.outcome
        with step_span("agent.report", report.traceparent, {"task_id": outcome.task_id}):
            try:
                await self._tasks(outcome.task_id).mark_outcome(outcome)
            except AgoraError as exc:
                if not exc.permanent:
                    raise
                if await self._recorded_already(outcome):
                    # Two steps of the run ended it at once (the run itself at its deadline, and
                    # the workflow's timer): the board took the first. The run ended once.
                    log.info(
                        "the run's end was on the board already",
                        extra={"task_id": outcome.task_id, "agent_id": outcome.agent_id},
                    )
                    return
                reason = f"{exc.code}: {exc.message}"
                log.warning(
                    "the board refused a run's outcome",
                    extra={"task_id": outcome.task_id, "agent_id": outcome.agent_id, "reason": reason},
                )
                await self._publisher.dead_letter(
                    DeadLetter(
                        topic=topics.TASK_OUTCOME.name,
                        message_id=f"outcome:{outcome.task_id}",
                        subscriber=self._app_id,
                        reason=f"the task board refused the outcome: {reason}",
                        payload=outcome.model_dump(mode="json"),
                    )
                )
