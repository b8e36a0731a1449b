"""The `WorkerAgent` actor: one per registered agent, executing the tasks awarded to it.

Execution is a small ReAct loop through the model client, bounded by the agent's `max_steps`;
the actor remembers which tasks it executed, so a redelivered award is not run twice.

With uncertainty checks on, every step is reported to the uncertainty monitor (session = task
id). When the monitor pauses the session, the task is parked here with its transcript and
stays ALLOCATED on the board; the person's decision (`agora.escalation.resolved`) resumes it:
retry runs the step again, modify_prompt continues with the new instruction, skip ends the
task as partial, abort ends it as failed.

With failure triage on, an attempt that ends without success is classified from its
trajectory (`agora.core.triage`): the recovery the policy picks (retry, replan, a hint...) is
tried automatically as a new attempt with the hint in the transcript, until the policy
escalates (an unclassifiable failure, or the same failure type again after its repeat
limit); then the task is parked for a person exactly like an uncertain step.
"""

from dataclasses import dataclass
from typing import Literal

from dapr.actor import ActorInterface, actormethod
from opentelemetry import trace
from pydantic import BaseModel, Field

from agora.core.contracts import StepReport
from agora.core.escalation import EscalationContext, ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.market import TaskOutcome
from agora.core.messages import EscalationResolved, TaskAwarded, Topic
from agora.core.models import CapabilityProfile
from agora.core.triage import (
    DEFAULT_REPEAT_LIMIT,
    FailureType,
    TriageDecision,
    build_failure_context,
    triage,
)
from agora.core.triage import Step as TriageStep
from agora.llm import ChatMessage, ModelClient, complete_json
from agora.runtime.actor import ActorClient, PydanticActor, actor_endpoint
from agora.runtime.clients import EscalationActors, UncertaintyClient
from agora.runtime.pubsub import Publisher
from agora.runtime.sidecar import DaprSidecar
from agora.runtime.tracing import tracer

EXECUTED_KEPT = 500


class ReactStep(BaseModel):
    thought: str = Field(max_length=1000)
    action: Literal["work", "finish"]
    observation: str = Field(max_length=1000)
    succeeded: bool
    """Only read on `finish`: whether the agent judges the task done."""
    confidence: float = Field(ge=0.0, le=1.0)
    """How sure the agent is of this step (reported to the uncertainty monitor)."""


class ParkedTask(BaseModel):
    award: TaskAwarded
    transcript: list[ChatMessage]
    steps: int
    escalation_id: str
    step_limit: int = 0
    """Where the interrupted attempt would have stopped (0: a new attempt on resume)."""
    attempt_history: list[tuple[FailureType, str]] = Field(default_factory=list)
    """Triage's record of the recoveries tried so far for this task."""


class Attempt(BaseModel):
    """How one run of the ReAct loop ended: an outcome, or None when parked for a person."""

    outcome: TaskOutcome | None
    trajectory: list[TriageStep]


class WorkerState(BaseModel):
    executed: dict[str, TaskOutcome] = Field(default_factory=dict)
    parked: dict[str, ParkedTask] = Field(default_factory=dict)


class WorkerAgentInterface(ActorInterface):
    @actormethod(name="execute")
    async def execute(self, award: TaskAwarded) -> TaskOutcome | None: ...

    @actormethod(name="resume")
    async def resume(self, resolved: EscalationResolved) -> TaskOutcome | None: ...


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


class WorkerAgent(PydanticActor[WorkerState, WorkerDeps], WorkerAgentInterface):
    state_model = WorkerState

    @actor_endpoint
    async def execute(self, award: TaskAwarded) -> TaskOutcome | None:
        task = award
        if task.task_id in self.state.parked:
            return None  # waiting for a person
        done = self.state.executed.get(task.task_id)
        if done is None:
            done = await self._attempt(task, self._opening(task), 0, self._step_budget(task), [])
        if done is not None:
            await self._finish(task, done)
        return done

    @actor_endpoint
    async def resume(self, resolved: EscalationResolved) -> TaskOutcome | None:
        event = resolved
        parked = self.state.parked.get(event.waiting_party.id)
        if parked is None or parked.escalation_id != event.escalation_id:
            return None  # not ours, or resumed already
        del self.state.parked[event.waiting_party.id]
        await self.commit()
        task, action = parked.award, str(event.decision.action)
        done: TaskOutcome | None
        if action in ("abort", "skip"):
            done = self._outcome(task, parked.steps, succeeded=False, partial=action == "skip",
                                 summary=f"{action} by {event.decided_by}")  # fmt: skip
        else:
            transcript = list(parked.transcript)
            if event.decision.modified_prompt:
                transcript.append(ChatMessage(role="user", content=event.decision.modified_prompt))
            elif event.decision.guidance:
                transcript.append(ChatMessage(role="user", content=event.decision.guidance))
            limit = parked.step_limit or parked.steps + self._step_budget(task)
            done = await self._attempt(task, transcript, parked.steps, limit, parked.attempt_history)
        if done is not None:
            await self._finish(task, done)
        return done

    def _opening(self, task: TaskAwarded) -> list[ChatMessage]:
        profile = self.deps.profiles[task.agent_id]
        return [
            ChatMessage(
                role="system",
                content=(
                    f"You are {profile.agent_name}, skilled in {', '.join(profile.skill_tags)}. "
                    "Work on the task step by step. Each turn, think, then either keep working "
                    "(action 'work') or finish (action 'finish', saying whether you succeeded). "
                    "Report what you observed and how confident you are."
                ),
            ),
            ChatMessage(role="user", content=f"Task {task.task_id}: {task.spec.description}"),
        ]

    def _step_budget(self, task: TaskAwarded) -> int:
        """Steps one attempt may take: twice the bid's estimate, within the agent's maximum."""
        return min(self.deps.profiles[task.agent_id].max_steps, max(1, task.bid.estimated_steps) * 2)

    async def _attempt(
        self,
        task: TaskAwarded,
        transcript: list[ChatMessage],
        steps: int,
        limit: int,
        history: list[tuple[FailureType, str]],
    ) -> TaskOutcome | None:
        """Run the task; with triage on, recover failed attempts until the policy escalates
        (None: parked for a person)."""
        while True:
            attempt = await self._run(task, transcript, steps, limit)
            done = attempt.outcome
            if done is None or done.actual_success or not self.deps.triage_failures:
                return done
            context = build_failure_context(
                attempt.trajectory,
                original_task=task.spec.description,
                raw_error=None if attempt.trajectory else "the attempt ended before its first step",
                attempt_history=history,
            )
            decision = triage(context, repeat_limit=self.deps.triage_repeat_limit)
            trace.get_current_span().add_event(
                "triage",
                {
                    "agora.failure_type": decision.failure_type.value,
                    "agora.recovery": decision.action.kind.value,
                    "agora.attempt": decision.attempt_number,
                },
            )
            history = [*history, decision.history_entry]
            if decision.escalated:
                await self._park_failed(task, transcript, done, decision, history)
                return None
            note = f"Attempt {decision.attempt_number + 1} failed ({decision.failure_type.value})."
            transcript = [
                *transcript,
                ChatMessage(role="user", content=f"{note} {decision.action.hint or 'Try again.'}"),
            ]
            steps, limit = done.actual_steps, done.actual_steps + self._step_budget(task)

    async def _park_failed(
        self,
        task: TaskAwarded,
        transcript: list[ChatMessage],
        done: TaskOutcome,
        decision: TriageDecision,
        history: list[tuple[FailureType, str]],
    ) -> None:
        """Hand a task automated recovery could not fix to a person (waiting party: the task)."""
        escalation_id = f"{task.task_id}.attempt-{decision.attempt_number + 1}"
        request = ParkRequest(
            waiting_party=WaitingParty(kind=WaitingPartyKind.TASK, id=task.task_id),
            context=EscalationContext(
                job_id=task.task_id,
                sheet_num=decision.attempt_number + 1,
                validation_results=[],
                confidence=0.0,
                retry_count=decision.attempt_number,
                error_history=[f"{kind.value} -> {action}" for kind, action in history],
                prompt_used=task.spec.description,
                output_summary=done.summary or f"failed after {done.actual_steps} steps",
            ),
            who=f"worker:{task.agent_id}",
            why=decision.action.reason or f"{decision.failure_type.value}: automated recovery exhausted",
        )
        await EscalationActors(ActorClient(self.deps.sidecar)).park(escalation_id, request)
        self.state.parked[task.task_id] = ParkedTask(
            award=task,
            transcript=transcript,
            steps=done.actual_steps,
            escalation_id=escalation_id,
            attempt_history=history,
        )
        await self.commit()

    async def _run(self, task: TaskAwarded, transcript: list[ChatMessage], steps: int, limit: int) -> Attempt:
        """Run steps until finish, the step limit, or a pause (no outcome: parked for a person)."""
        model = self.deps.model
        assert model is not None
        succeeded, summary = False, ""
        trajectory: list[TriageStep] = []
        with tracer("agora.worker").start_as_current_span(
            "worker.execute",
            attributes={"task_id": task.task_id, "agent_id": task.agent_id, "agora.max_steps": limit},
        ) as span:
            while steps < limit:
                steps += 1
                step, _ = await complete_json(model, transcript, ReactStep)
                transcript.append(ChatMessage(role="assistant", content=step.model_dump_json()))
                transcript.append(ChatMessage(role="user", content=f"Step {steps} recorded. Continue."))
                summary = step.observation
                trajectory.append(
                    TriageStep(
                        index=len(trajectory),
                        action=f"{step.action}: {step.thought}",
                        llm_output=step.observation,
                        metadata={"confidence": step.confidence},
                    )
                )
                escalation_id = await self._check(task, steps, step)
                if escalation_id is not None:
                    span.set_attribute("agora.parked_for", escalation_id)
                    self.state.parked[task.task_id] = ParkedTask(
                        award=task,
                        transcript=transcript,
                        steps=steps,
                        escalation_id=escalation_id,
                        step_limit=limit,
                    )
                    await self.commit()
                    return Attempt(outcome=None, trajectory=trajectory)
                if step.action == "finish":
                    succeeded = step.succeeded
                    break
            span.set_attribute("agora.steps", steps)
            span.set_attribute("agora.succeeded", succeeded)
        outcome = self._outcome(task, steps, succeeded=succeeded, partial=False, summary=summary)
        return Attempt(outcome=outcome, trajectory=trajectory)

    async def _check(self, task: TaskAwarded, steps: int, step: ReactStep) -> str | None:
        """Report the step to the uncertainty monitor; the escalation id when it paused us."""
        if self.deps.uncertainty_app_id is None:
            return None
        report = StepReport(
            step_id=str(steps),
            text=f"{step.thought} {step.observation} Confidence: {step.confidence:.0%}",
            prompt=task.spec.description,
        )
        monitor = UncertaintyClient(self.deps.sidecar, self.deps.uncertainty_app_id)
        return (await monitor.llm_response(task.task_id, report)).parked

    def _outcome(
        self, task: TaskAwarded, steps: int, *, succeeded: bool, partial: bool, summary: str
    ) -> TaskOutcome:
        profile = self.deps.profiles[task.agent_id]
        return TaskOutcome(
            task_id=task.task_id,
            agent_id=task.agent_id,
            actual_success=succeeded,
            actual_cost_usd=round(steps * profile.cost_per_step_usd, 6),
            actual_steps=steps,
            partial=partial,
            summary=summary[:200],
            award_token=task.award_token,
        )

    async def _finish(self, task: TaskAwarded, done: TaskOutcome) -> None:
        if task.task_id not in self.state.executed:
            self.state.executed = dict(
                list({**self.state.executed, task.task_id: done}.items())[-EXECUTED_KEPT:]
            )
            await self.commit()
        await self.deps.publisher.publish(Topic.TASK_OUTCOME, done, message_id=f"outcome:{task.task_id}")


ACTOR_TYPE = WorkerAgent.__name__  # the Dapr actor type is the class name


class WorkerAgents:
    """`WorkerAgent` actors, one per agent this worker hosts."""

    def __init__(self, actors: ActorClient) -> None:
        self._actors = actors

    async def execute(self, agent_id: str, award: TaskAwarded) -> TaskOutcome | None:
        return _outcome(await self._actors.call(ACTOR_TYPE, agent_id, "execute", award))

    async def resume(self, agent_id: str, resolved: EscalationResolved) -> TaskOutcome | None:
        return _outcome(await self._actors.call(ACTOR_TYPE, agent_id, "resume", resolved))


def _outcome(answer: object) -> TaskOutcome | None:
    return None if answer is None else TaskOutcome.model_validate(answer)
