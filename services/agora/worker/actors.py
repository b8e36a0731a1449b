"""The `WorkerAgent` actor: one per registered agent, executing the tasks awarded to it.

Execution is a small ReAct loop through the model client, bounded by the agent's `max_steps`;
the actor remembers which tasks it executed, so a redelivered award is not run twice.
"""

from typing import Any, ClassVar, Literal

from dapr.actor import ActorInterface, actormethod
from pydantic import BaseModel, Field

from agora.core.market import TaskOutcome
from agora.core.messages import TaskAwarded, Topic
from agora.core.models import CapabilityProfile
from agora.llm import ChatMessage, ModelClient, complete_json
from agora.runtime.actor import PydanticActor, actor_endpoint
from agora.runtime.pubsub import Publisher
from agora.runtime.tracing import tracer

EXECUTED_KEPT = 500


class ReactStep(BaseModel):
    thought: str = Field(max_length=1000)
    action: Literal["work", "finish"]
    observation: str = Field(max_length=1000)
    succeeded: bool
    """Only read on `finish`: whether the agent judges the task done."""


class WorkerState(BaseModel):
    executed: dict[str, TaskOutcome] = Field(default_factory=dict)


class WorkerAgentInterface(ActorInterface):
    @actormethod(name="execute")
    async def execute(self, award: dict[str, Any]) -> dict[str, Any]: ...


class WorkerAgent(PydanticActor[WorkerState], WorkerAgentInterface):
    state_model = WorkerState
    profiles: ClassVar[dict[str, CapabilityProfile]] = {}
    model: ClassVar[ModelClient | None] = None
    publisher: ClassVar[Publisher | None] = None
    """Set by the worker module at start-up."""

    @actor_endpoint
    async def execute(self, award: dict[str, Any]) -> TaskOutcome:
        task = TaskAwarded.model_validate(award)
        done = self.state.executed.get(task.task_id)
        if done is None:
            done = await self._run(task)
            self.state.executed = dict(
                list({**self.state.executed, task.task_id: done}.items())[-EXECUTED_KEPT:]
            )
            await self.commit()
        assert WorkerAgent.publisher is not None
        await WorkerAgent.publisher.publish(Topic.TASK_OUTCOME, done, message_id=f"outcome:{task.task_id}")
        return done

    async def _run(self, task: TaskAwarded) -> TaskOutcome:
        profile = WorkerAgent.profiles[task.agent_id]
        model = WorkerAgent.model
        assert model is not None
        limit = min(profile.max_steps, max(1, task.bid.estimated_steps) * 2)
        transcript = [
            ChatMessage(
                role="system",
                content=(
                    f"You are {profile.agent_name}, skilled in {', '.join(profile.skill_tags)}. "
                    "Work on the task step by step. Each turn, think, then either keep working "
                    "(action 'work') or finish (action 'finish', saying whether you succeeded). "
                    "Report what you observed."
                ),
            ),
            ChatMessage(role="user", content=f"Task {task.task_id}: {task.spec.description}"),
        ]
        steps, succeeded, summary = 0, False, ""
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
                if step.action == "finish":
                    succeeded = step.succeeded
                    break
            span.set_attribute("agora.steps", steps)
            span.set_attribute("agora.succeeded", succeeded)
        return TaskOutcome(
            task_id=task.task_id,
            agent_id=task.agent_id,
            actual_success=succeeded,
            actual_cost_usd=round(steps * profile.cost_per_step_usd, 6),
            actual_steps=steps,
            summary=summary[:200],
        )


ACTOR_TYPE = WorkerAgent.__name__  # the Dapr actor type is the class name
