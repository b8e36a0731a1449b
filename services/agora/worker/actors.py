"""The `WorkerAgent` actor: one per registered agent, executing the tasks awarded to it.

Execution is a small ReAct loop through the model client (`agora.worker.react`), bounded by the
agent's `max_steps`; the actor remembers the tasks it executed last, so an award redelivered
before its outcome reached the board is not run twice (the worker skips an award whose task the
board already holds an outcome for). Before the award's delivery is acknowledged, the worker
registers a reminder for the run (`agora.worker.reminders`: kept by the Dapr scheduler, carrying
the award); the run removes it once its outcome is announced or the task is parked. An award
that arrives while the worker has as many runs under way as it allows waits as that reminder,
which starts it. When the worker or its sidecar dies mid-run, the reminder starts the run again
once the actor is back, or announces an outcome committed but not yet announced. A run started
again after the monitor had parked it finds the session waiting and parks under that
escalation; if the person decided meanwhile, the run goes on as the session now stands (running
again, or ended by an abort).

With uncertainty checks on, every step is reported to the uncertainty monitor
(`agora.worker.monitoring`; session = task id). When the monitor pauses the session, the task is
parked here with its transcript and stays ALLOCATED on the board; the person's decision
(`agora.escalation.resolved`) resumes it: retry runs the step again, modify_prompt continues
with the new instruction, skip ends the task as partial, abort ends it as failed. Like an award,
the decision is kept as a reminder on the agent (`decided:<escalation_id>`, carrying it) before
its delivery is acknowledged, and removed once applied, so a crash or a call that timed out
cannot lose it.

With failure triage on (`agora.sdk._recovery`, the runner's own), an attempt that ends without success is
classified from its trajectory (`agora.core.triage`): the recovery the policy picks (retry,
replan, a hint...) is tried automatically as a new attempt with the hint in the transcript,
until the policy escalates (an unclassifiable failure, or the same failure type again after its
repeat limit); then the task is parked for a person exactly like an uncertain step. Between the
two, failed attempts climb the escalation ladder (`agora.core.escalation.ladder.next_level`):
the first attempts are retried automatically, the next one after the agent has analysed the
failure, the next with a notice to the people watching, and from then on a person decides;
after the ladder's last attempt the task is aborted. A low-confidence failure (after the first
attempt) goes straight to a person.

Every agent learns from its own recent runs (`agora.sdk._learning`, the runner's own, over
`agora.core.outcomes`): before a task, the patterns its recent outcomes show that are relevant
to the task are added to its prompt; the outcome of each run is kept with the patterns that
were applied, so their effectiveness (success with the pattern against without) can be read
from `GET /v1/agents/{agent_id}/learning`.
"""

import logging
import time
from dataclasses import dataclass

from dapr.actor import Remindable
from opentelemetry import trace

from agora.core import topics
from agora.core.contracts import AgentLearning
from agora.core.errors import AgoraError
from agora.core.escalation.ladder import DEFAULT_ESCALATION_CONFIG, EscalationConfig, EscalationLevel
from agora.core.escalation.record import WaitingParty, WaitingPartyKind
from agora.core.market import TaskOutcome
from agora.core.messages import EscalationResolved, TaskAwarded
from agora.core.models import CapabilityProfile
from agora.core.triage.decision import DEFAULT_REPEAT_LIMIT
from agora.llm import ChatMessage, ModelClient
from agora.runtime.actor import ActorClient, PydanticActor, actor_endpoint
from agora.runtime.clients import escalation_actors
from agora.runtime.interfaces import WorkerAgentInterface
from agora.runtime.pubsub import Publisher
from agora.runtime.sidecar import DaprError, DaprSidecar
from agora.sdk._learning import LEARNING_KEPT, Lessons, learning_report, learnt
from agora.sdk._recovery import (
    FAILURE_ANALYSIS_SCHEMA,
    Recovery,
    RecoveryPolicy,
    analyse,
    handover,
    recovery_after,
)
from agora.worker.monitoring import report_step
from agora.worker.react import Attempt, ReactStep, attempt_outcome, opening, run_steps, step_budget
from agora.worker.reminders import (
    DECISION_REMINDER_PREFIX,
    RUN_REMINDER_PREFIX,
    RUN_WATCHDOG,
    decision_reminder,
    run_reminder,
)
from agora.worker.runs import ParkedTask, Run, WorkerState

__all__ = ["EXECUTED_KEPT", "WorkerAgent", "WorkerDeps"]

log = logging.getLogger(__name__)

EXECUTED_KEPT = 50
"""Recent outcomes kept to recognise a redelivered award (later ones: the board has the outcome)."""


@dataclass(frozen=True)
class WorkerDeps:
    """What every `WorkerAgent` actor of a worker works with."""

    profiles: dict[str, CapabilityProfile]
    model: ModelClient
    publisher: Publisher
    sidecar: DaprSidecar
    uncertainty_app_id: str | None = None
    """The uncertainty monitor that checks every step; None: no per-step checks."""
    triage_failures: bool = False
    """Classify failed attempts and recover or escalate them."""
    triage_repeat_limit: int = DEFAULT_REPEAT_LIMIT
    escalation: EscalationConfig = DEFAULT_ESCALATION_CONFIG
    """The escalation ladder failed attempts climb (with triage on)."""


class WorkerAgent(PydanticActor[WorkerState, WorkerDeps], WorkerAgentInterface, Remindable):
    state_model = WorkerState
    _lessons: Lessons | None = None
    """The patterns in the agent's recent runs, as last looked for (per activation, not saved)."""

    @property
    def lessons(self) -> Lessons:
        if self._lessons is None:
            self._lessons = Lessons()
        return self._lessons

    @actor_endpoint
    async def execute(self, award: TaskAwarded) -> TaskOutcome | None:
        return await self._execute(award)

    async def _execute(self, award: TaskAwarded) -> TaskOutcome | None:
        if award.task_id in self.state.parked:
            return None  # waiting for a person
        done = self.state.executed.get(award.task_id)
        if done is not None:
            await self._announce(done)
            await self._run_ended(award.task_id)
            return done
        patterns = self.lessons.for_task(self.state.learning, award.spec.description)
        run = Run(patterns_applied=patterns, started_at=time.time())
        transcript = opening(self._profile(award), award, patterns)
        done = await self._attempt(award, transcript, 0, self._step_budget(award), run)
        if done is not None:
            await self._finish(award, done, run)
        await self._run_ended(award.task_id)
        return done

    @actor_endpoint
    async def resume(self, resolved: EscalationResolved) -> TaskOutcome | None:
        return await self._resume(resolved)

    async def _resume(self, resolved: EscalationResolved) -> TaskOutcome | None:
        """Go on with a parked task as the person decided. The decision's reminder (registered
        before its delivery was acknowledged) is removed only once this is done, so a crash
        anywhere in between brings the decision back."""
        parked = self.state.parked.get(resolved.waiting_party.id)
        if parked is None or parked.escalation_id != resolved.escalation_id:
            log.info(
                "decision for no parked task of this agent (resumed already, or not ours)",
                extra={"escalation_id": resolved.escalation_id, "agent_id": self.id.id},
            )
            await self._decision_taken(resolved.escalation_id)
            return None
        # From here the task is a run again: its reminder first, so a crash once the task is no
        # longer parked starts it afresh rather than losing it.
        await self.register_reminder(
            run_reminder(parked.award.task_id),
            parked.award.model_dump_json().encode(),
            RUN_WATCHDOG,
            RUN_WATCHDOG,
        )
        del self.state.parked[resolved.waiting_party.id]
        await self.commit()
        task, action = parked.award, str(resolved.decision.action)
        run = parked.run(time.time())
        done: TaskOutcome | None
        if action in ("abort", "skip"):
            run.aborted = action == "abort"
            summary = f"{action} by {resolved.decided_by}"
            done = attempt_outcome(
                self._profile(task),
                task,
                parked.steps,
                succeeded=False,
                partial=action == "skip",
                summary=summary,
            )
        else:
            transcript = list(parked.transcript)
            if resolved.decision.modified_prompt:
                transcript.append(ChatMessage(role="user", content=resolved.decision.modified_prompt))
            elif resolved.decision.guidance:
                transcript.append(ChatMessage(role="user", content=resolved.decision.guidance))
            limit = parked.step_limit or parked.steps + self._step_budget(task)
            done = await self._attempt(task, transcript, parked.steps, limit, run)
        if done is not None:
            await self._finish(task, done, run)
        await self._run_ended(task.task_id)
        await self._decision_taken(resolved.escalation_id)
        return done

    async def on_reminder(self, name: str, state: bytes) -> None:
        if name.startswith(DECISION_REMINDER_PREFIX):
            resolved = EscalationResolved.model_validate_json(state)
            try:
                await self._resume(resolved)
            except (AgoraError, DaprError) as exc:
                self.doubt_state()  # it may have stopped between a change and its save
                log.warning(
                    "a decision taken up by its reminder cannot be applied yet; trying later",
                    extra={"escalation_id": resolved.escalation_id, "agent_id": self.id.id,
                           "reason": str(exc)[:300]},
                )  # fmt: skip
            return
        if not name.startswith(RUN_REMINDER_PREFIX):
            return
        task_id = name.removeprefix(RUN_REMINDER_PREFIX)
        done = self.state.executed.get(task_id)
        if done is not None:
            await self._announce(done)  # committed, then perhaps cut short before it went out
        elif task_id not in self.state.parked:
            award = TaskAwarded.model_validate_json(state)
            # The worker was busy when the award came (it waited here), or the run was cut short
            # by a crash: either way it starts now, from its first step.
            log.info("run started by its reminder", extra={"task_id": task_id, "agent_id": self.id.id})
            try:
                await self._execute(award)
            except (AgoraError, DaprError) as exc:
                self.doubt_state()  # it may have stopped between a change and its save
                log.warning(
                    "a run started by its reminder cannot go on yet; trying later",
                    extra={"task_id": task_id, "agent_id": self.id.id, "reason": str(exc)[:300]},
                )
            return
        await self._run_ended(task_id)

    async def _run_ended(self, task_id: str) -> None:
        """The outcome is out or the task is parked: nothing to start again after a crash."""
        await self.drop_reminder(run_reminder(task_id))

    async def _decision_taken(self, escalation_id: str) -> None:
        """The decision was applied (or is not for this agent): nothing to take up again."""
        await self.drop_reminder(decision_reminder(escalation_id))

    @actor_endpoint
    async def learning(self) -> AgentLearning:
        return learning_report(self.id.id, self.state.learning)

    def _profile(self, task: TaskAwarded) -> CapabilityProfile:
        return self.deps.profiles[task.agent_id]

    def _step_budget(self, task: TaskAwarded) -> int:
        return step_budget(self._profile(task), task)

    async def _attempt(
        self, task: TaskAwarded, transcript: list[ChatMessage], steps: int, limit: int, run: Run
    ) -> TaskOutcome | None:
        """Run the task; with triage on, failed attempts climb the escalation ladder (None:
        parked for a person)."""
        while True:
            attempt = await self._run(task, transcript, steps, limit, run)
            done = attempt.outcome
            if done is None or done.actual_success or not self.deps.triage_failures:
                return done
            recovery = recovery_after(
                attempt.trajectory,
                task=task.spec.description,
                history=run.history,
                policy=RecoveryPolicy(
                    repeat_limit=self.deps.triage_repeat_limit, ladder=self.deps.escalation
                ),
            )
            decision, level, failed_attempt = recovery.decision, recovery.level, recovery.failed_attempt
            trace.get_current_span().add_event(
                "triage",
                {
                    "agora.failure_type": decision.failure_type.value,
                    "agora.recovery": decision.action.kind.value,
                    "agora.attempt": decision.attempt_number,
                    "agora.escalation_level": level.value,
                },
            )
            run.history = [*run.history, decision.history_entry]
            if level is EscalationLevel.ABORT:
                run.aborted = True
                summary = f"aborted after {failed_attempt} failed attempts ({decision.failure_type.value})"
                return attempt_outcome(
                    self._profile(task),
                    task,
                    done.actual_steps,
                    succeeded=False,
                    partial=False,
                    summary=summary,
                )
            if level is EscalationLevel.REQUIRE_DECISION:
                await self._park_failed(task, transcript, done, recovery, run)
                return None
            guidance = decision.action.hint or "Try again."
            if level is EscalationLevel.AGENT_ANALYSIS:
                guidance = await analyse(self._ask, transcript, recovery.note) or guidance
            elif level is EscalationLevel.NOTIFY:
                log.warning(
                    "task keeps failing; continuing without waiting for a person",
                    extra={"task_id": task.task_id, "agent_id": task.agent_id, "attempt": failed_attempt,
                           "failure_type": decision.failure_type.value, "escalation_level": level.value},
                )  # fmt: skip
            transcript = [*transcript, ChatMessage(role="user", content=f"{recovery.note} {guidance}")]
            steps, limit = done.actual_steps, done.actual_steps + self._step_budget(task)

    async def _ask(self, messages: list[ChatMessage]) -> str:
        return (await self.deps.model.complete(messages, json_schema=FAILURE_ANALYSIS_SCHEMA)).text

    async def _park_failed(
        self,
        task: TaskAwarded,
        transcript: list[ChatMessage],
        done: TaskOutcome,
        recovery: Recovery,
        run: Run,
    ) -> None:
        """Hand a task automated recovery could not fix to a person (waiting party: the task)."""
        escalation_id, request = handover(
            waiting_party=WaitingParty(kind=WaitingPartyKind.TASK, id=task.task_id),
            recovery=recovery,
            history=run.history,
            prompt_used=task.spec.description,
            output_summary=done.summary or f"failed after {done.actual_steps} steps",
            who=f"worker:{task.agent_id}",
        )
        await escalation_actors(ActorClient(self.deps.sidecar))(escalation_id).park(request)
        self.state.parked[task.task_id] = ParkedTask.of(
            task, transcript, done.actual_steps, escalation_id, run
        )
        await self.commit()

    async def _run(
        self, task: TaskAwarded, transcript: list[ChatMessage], steps: int, limit: int, run: Run
    ) -> Attempt:
        """One attempt through the ReAct loop, each step reported to the uncertainty monitor (if
        on); a step it pauses parks the task here (no outcome)."""
        model = self.deps.model
        assert model is not None

        async def check(steps: int, step: ReactStep) -> str | None:
            return await report_step(self.deps.sidecar, self.deps.uncertainty_app_id, task, steps, step)

        async def park(steps: int, escalation_id: str) -> None:
            self.state.parked[task.task_id] = ParkedTask.of(
                task, transcript, steps, escalation_id, run, step_limit=limit
            )
            await self.commit()

        return await run_steps(
            model, self._profile(task), task, transcript, steps, limit, check=check, park=park
        )

    async def _finish(self, task: TaskAwarded, done: TaskOutcome, run: Run) -> None:
        if task.task_id not in self.state.executed:
            self.state.executed = dict(
                list({**self.state.executed, task.task_id: done}.items())[-EXECUTED_KEPT:]
            )
            lesson = learnt(
                done.task_id,
                succeeded=done.actual_success,
                partial=done.partial,
                aborted=run.aborted,
                started_at=run.started_at,
                history=run.history,
                patterns_applied=run.patterns_applied,
                summary=done.summary,
            )
            self.state.learning = [*self.state.learning, lesson][-LEARNING_KEPT:]
            self.lessons.ran()
            await self.commit()
        await self._announce(done)

    async def _announce(self, done: TaskOutcome) -> None:
        await self.deps.publisher.publish(topics.TASK_OUTCOME, done, message_id=f"outcome:{done.task_id}")
