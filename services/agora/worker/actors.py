"""The `WorkerAgent` actor: one per registered agent, executing the tasks awarded to it.

Execution is a small ReAct loop through the model client, bounded by the agent's `max_steps`;
the actor remembers which tasks it executed, so a redelivered award is not run twice.

With uncertainty checks on, every step is reported to the uncertainty monitor (session = task
id). When the monitor pauses the session, the task is parked here with its transcript and
stays ALLOCATED on the board; the person's decision (`agora.escalation.resolved`) resumes it:
retry runs the step again, modify_prompt continues with the new instruction, skip ends the
task as partial, abort ends it as failed.
"""

from typing import Any, ClassVar, Literal

from dapr.actor import ActorInterface, actormethod
from pydantic import BaseModel, Field

from agora.core.market import TaskOutcome
from agora.core.messages import EscalationResolved, TaskAwarded, Topic
from agora.core.models import CapabilityProfile
from agora.llm import ChatMessage, ModelClient, complete_json
from agora.runtime.actor import PydanticActor, actor_endpoint
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


class WorkerState(BaseModel):
    executed: dict[str, TaskOutcome] = Field(default_factory=dict)
    parked: dict[str, ParkedTask] = Field(default_factory=dict)


class WorkerAgentInterface(ActorInterface):
    @actormethod(name="execute")
    async def execute(self, award: dict[str, Any]) -> dict[str, Any]: ...

    @actormethod(name="resume")
    async def resume(self, resolved: dict[str, Any]) -> dict[str, Any]: ...


class WorkerAgent(PydanticActor[WorkerState], WorkerAgentInterface):
    state_model = WorkerState
    profiles: ClassVar[dict[str, CapabilityProfile]] = {}
    model: ClassVar[ModelClient | None] = None
    publisher: ClassVar[Publisher | None] = None
    sidecar: ClassVar[DaprSidecar | None] = None
    uncertainty_app_id: ClassVar[str | None] = None
    """Set by the worker module at start-up; no uncertainty app id = no per-step checks."""

    @actor_endpoint
    async def execute(self, award: dict[str, Any]) -> TaskOutcome | None:
        task = TaskAwarded.model_validate(award)
        if task.task_id in self.state.parked:
            return None  # waiting for a person
        done = self.state.executed.get(task.task_id)
        if done is None:
            done = await self._run(task, self._opening(task), 0)
        if done is not None:
            await self._finish(task, done)
        return done

    @actor_endpoint
    async def resume(self, resolved: dict[str, Any]) -> TaskOutcome | None:
        event = EscalationResolved.model_validate(resolved)
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
            done = await self._run(task, transcript, parked.steps)
        if done is not None:
            await self._finish(task, done)
        return done

    def _opening(self, task: TaskAwarded) -> list[ChatMessage]:
        profile = WorkerAgent.profiles[task.agent_id]
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

    async def _run(self, task: TaskAwarded, transcript: list[ChatMessage], steps: int) -> TaskOutcome | None:
        """Run steps until finish, the step limit, or a pause (None: parked for a person)."""
        model = WorkerAgent.model
        assert model is not None
        limit = min(WorkerAgent.profiles[task.agent_id].max_steps, max(1, task.bid.estimated_steps) * 2)
        succeeded, summary = False, ""
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
                escalation_id = await self._check(task, steps, step)
                if escalation_id is not None:
                    span.set_attribute("agora.parked_for", escalation_id)
                    self.state.parked[task.task_id] = ParkedTask(
                        award=task, transcript=transcript, steps=steps, escalation_id=escalation_id
                    )
                    await self.commit()
                    return None
                if step.action == "finish":
                    succeeded = step.succeeded
                    break
            span.set_attribute("agora.steps", steps)
            span.set_attribute("agora.succeeded", succeeded)
        return self._outcome(task, steps, succeeded=succeeded, partial=False, summary=summary)

    async def _check(self, task: TaskAwarded, steps: int, step: ReactStep) -> str | None:
        """Report the step to the uncertainty monitor; the escalation id when it paused us."""
        if WorkerAgent.uncertainty_app_id is None or WorkerAgent.sidecar is None:
            return None
        report = {
            "step_id": str(steps),
            "text": f"{step.thought} {step.observation} Confidence: {step.confidence:.0%}",
            "prompt": task.spec.description,
        }
        verdict = await WorkerAgent.sidecar.invoke(
            WorkerAgent.uncertainty_app_id, f"v1/sessions/{task.task_id}/llm-responses", json_body=report
        )
        return verdict.get("escalation_id") if verdict.get("status") == "WAITING_FOR_HUMAN" else None

    def _outcome(
        self, task: TaskAwarded, steps: int, *, succeeded: bool, partial: bool, summary: str
    ) -> TaskOutcome:
        profile = WorkerAgent.profiles[task.agent_id]
        return TaskOutcome(
            task_id=task.task_id,
            agent_id=task.agent_id,
            actual_success=succeeded,
            actual_cost_usd=round(steps * profile.cost_per_step_usd, 6),
            actual_steps=steps,
            partial=partial,
            summary=summary[:200],
        )

    async def _finish(self, task: TaskAwarded, done: TaskOutcome) -> None:
        if task.task_id not in self.state.executed:
            self.state.executed = dict(
                list({**self.state.executed, task.task_id: done}.items())[-EXECUTED_KEPT:]
            )
            await self.commit()
        assert WorkerAgent.publisher is not None
        await WorkerAgent.publisher.publish(Topic.TASK_OUTCOME, done, message_id=f"outcome:{task.task_id}")


ACTOR_TYPE = WorkerAgent.__name__  # the Dapr actor type is the class name
