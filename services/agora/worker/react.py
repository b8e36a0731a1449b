"""The ReAct loop: one attempt at a task, step by step through the model (think, then work on
or finish), until the agent finishes, the step budget runs out, or the step check pauses the
run for a person or ends it; and the prompt, budget and outcome of an attempt."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, Literal

from pydantic import BaseModel, Field

from agora.core.market import TaskOutcome
from agora.core.messages import TaskAwarded
from agora.core.models import CapabilityProfile
from agora.core.outcomes.prompts import format_patterns_for_prompt
from agora.core.triage.context import Step as TriageStep
from agora.llm import ChatMessage, ModelClient, complete_json
from agora.runtime.tracing import tracer

__all__ = [
    "SESSION_ABORTED",
    "Attempt",
    "ReactStep",
    "StepCheck",
    "attempt_outcome",
    "opening",
    "run_steps",
    "step_budget",
]

SESSION_ABORTED: Final = "\x00aborted"
"""What a step check answers when the task's session was ended (never an escalation id, which
cannot hold control characters)."""

StepCheck = Callable[[int, "ReactStep"], Awaitable[str | None]]
"""Checks step number n once it is taken: None (go on), the escalation the run is paused for,
or `SESSION_ABORTED`."""


class ReactStep(BaseModel):
    thought: str = Field(max_length=1000)
    action: Literal["work", "finish"]
    observation: str = Field(max_length=1000)
    succeeded: bool
    """Only read on `finish`: whether the agent judges the task done."""
    confidence: float = Field(ge=0.0, le=1.0)
    """How sure the agent is of this step (reported to the uncertainty monitor)."""


class Attempt(BaseModel):
    """How one run of the ReAct loop ended: an outcome, or None when parked for a person."""

    outcome: TaskOutcome | None
    trajectory: list[TriageStep]


def opening(profile: CapabilityProfile, task: TaskAwarded, patterns: list[str]) -> list[ChatMessage]:
    """The transcript a task's first attempt starts from: who the agent is and how to work,
    the lessons from its earlier runs (`patterns`), and the task."""
    lessons = format_patterns_for_prompt(patterns)
    return [
        ChatMessage(
            role="system",
            content=(
                f"You are {profile.agent_name}, skilled in {', '.join(profile.skill_tags)}. "
                "Work on the task step by step. Each turn, think, then either keep working "
                "(action 'work') or finish (action 'finish', saying whether you succeeded). "
                "Report what you observed and how confident you are." + (f"\n\n{lessons}" if lessons else "")
            ),
        ),
        ChatMessage(role="user", content=f"Task {task.task_id}: {task.spec.description}"),
    ]


def step_budget(profile: CapabilityProfile, task: TaskAwarded) -> int:
    """Steps one attempt may take: twice the bid's estimate, within the agent's maximum."""
    return min(profile.max_steps, max(1, task.bid.estimated_steps) * 2)


def attempt_outcome(
    profile: CapabilityProfile, task: TaskAwarded, steps: int, *, succeeded: bool, partial: bool, summary: str
) -> TaskOutcome:
    """The outcome of a run that took `steps` steps, at the agent's cost per step."""
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


async def run_steps(
    model: ModelClient,
    profile: CapabilityProfile,
    task: TaskAwarded,
    transcript: list[ChatMessage],
    steps: int,
    limit: int,
    *,
    check: StepCheck,
    park: Callable[[int, str], Awaitable[None]],
) -> Attempt:
    """Run steps until finish, the step limit, or a pause (no outcome: `park(steps, escalation
    id)` was called). `transcript` grows with every step; `steps` is where the attempt starts."""
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
            escalation_id = await check(steps, step)
            if escalation_id is SESSION_ABORTED:
                span.set_attribute("agora.aborted_by_monitor", True)
                summary = f"stopped by the uncertainty monitor at step {steps}: {summary}"
                break
            if escalation_id is not None:
                span.set_attribute("agora.parked_for", escalation_id)
                await park(steps, escalation_id)
                return Attempt(outcome=None, trajectory=trajectory)
            if step.action == "finish":
                succeeded = step.succeeded
                break
        span.set_attribute("agora.steps", steps)
        span.set_attribute("agora.succeeded", succeeded)
    outcome = attempt_outcome(profile, task, steps, succeeded=succeeded, partial=False, summary=summary)
    return Attempt(outcome=outcome, trajectory=trajectory)
