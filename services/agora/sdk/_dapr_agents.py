"""An agent built with dapr-agents, on Agora's market as one agent of an agent app.

A team moving to Agora one agent at a time keeps its `DurableAgent` as it is (its prompt, its
tools, its model client, its own state) and declares it in an agent app's file through
`market_agent`. The agent's workflow and activities are registered on the agent app's workflow
runtime (one runtime per app: a sidecar hands each work item to one of the workers connected to
it), its profile comes from its registry metadata (dapr-agents' `AgentMetadataSchema`) plus the
skills it offers, and each task it wins runs as one instance of its own workflow, named after
the task: the award's step, run again after a crash, waits for that same instance instead of
starting a second one, and the instance itself is as durable as any other workflow.

What the outcome reports: success when the workflow completed, the final answer as its summary,
the model turns the run took as steps, and those steps at the agent's price. The turns are read
from the run's own state when the agent has a state store (`state=`); without one dapr-agents
keeps a single in-memory state for all the agent's runs, which cannot tell them apart, so
the adapter counts the assistant messages the agent's `call_llm` activity gives each run's
workflow instance instead (`market_agent` wraps that activity before it is registered).
dapr-agents keeps no token count per run, so tokens are reported as zero.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from dapr.ext.workflow import WorkflowStatus
from dapr.ext.workflow.aio import DaprWorkflowClient

from agora.core.limits import MAX_ID_CHARS, MAX_TEXT_CHARS
from agora.core.messages import TaskAwarded
from agora.core.models import CapabilityProfile, ModelTier
from agora.sdk._agent import Agent, Estimator, HandlerResult

if TYPE_CHECKING:
    from dapr_agents import AgentMetadataSchema, DurableAgent

log = logging.getLogger(__name__)

DEFAULT_RUN_TIMEOUT_S = 600.0
DEFAULT_MAX_STEPS = 10
"""A profile's step allowance when the agent states no `max_iterations` of its own."""
INSTANCE_PREFIX = "dapr-agents."
MAX_RUNS_KEPT = 1_000
"""Runs whose turns an agent without a state store keeps counted (the latest)."""
_NOT_IN_ID = re.compile(r"[^a-z0-9_-]+")


def instance_of(task_id: str) -> str:
    """The workflow instance of the agent's run of a task: one per task, so a step run again
    finds the run it started."""
    return f"{INSTANCE_PREFIX}{task_id}"


def agent_id_of(name: str) -> str:
    """An agent id from a dapr-agents agent's name: lower case, runs of other characters as
    one `-` ("Fast Scout" is `fast-scout`)."""
    slug = _NOT_IN_ID.sub("-", name.lower()).strip("-")[:MAX_ID_CHARS]
    if not slug:
        raise ValueError(f"no agent id can be made of the name {name!r}: give agent_id")
    return slug


def profile_of(
    metadata: AgentMetadataSchema,
    *,
    skills: Sequence[str] | None = None,
    agent_id: str | None = None,
    cost_per_step_usd: float = 0.0,
    model_tier: ModelTier = ModelTier.BALANCED,
    max_steps: int | None = None,
) -> CapabilityProfile:
    """The capability profile of the agent its registry metadata describes. Its skills are
    `skills`, or the names of its tools when none are given; its step allowance is its
    `max_iterations` unless `max_steps` says otherwise."""
    offered = list(skills) if skills is not None else [tool.name for tool in metadata.tools or []]
    if not offered:
        raise ValueError(f"agent {metadata.name}: give the skills it offers (it has no tools to name them)")
    return CapabilityProfile(
        agent_id=agent_id or agent_id_of(metadata.name),
        agent_name=metadata.name,
        skill_tags=offered,
        model_tier=model_tier,
        cost_per_step_usd=cost_per_step_usd,
        max_steps=max_steps or metadata.agent.max_iterations or DEFAULT_MAX_STEPS,
    )


def market_agent(
    agent: DurableAgent,
    *,
    skills: Sequence[str] | None = None,
    agent_id: str | None = None,
    cost_per_step_usd: float = 0.0,
    model_tier: ModelTier = ModelTier.BALANCED,
    max_steps: int | None = None,
    estimate: Estimator | None = None,
    max_concurrent_runs: int = 4,
    run_timeout_s: float = DEFAULT_RUN_TIMEOUT_S,
) -> Agent:
    """`agent` as an Agora agent: list it in an agent app's `agents` and it registers, bids (by
    `estimate`, or its price, load and step allowance), and runs each task it wins as one run
    of its own workflow, the task's description as the run's task."""
    from dapr_agents import AgentMetadataSchema  # installed: `agent` is one of its agents

    metadata = agent.agent_metadata
    if metadata is None:
        raise ValueError(f"agent {agent.name}: its registry metadata did not validate (see dapr-agents' log)")
    profile = profile_of(
        AgentMetadataSchema.model_validate(metadata),
        skills=skills,
        agent_id=agent_id,
        cost_per_step_usd=cost_per_step_usd,
        model_tier=model_tier,
        max_steps=max_steps,
    )
    turns = None if agent.state_store else count_turns(agent)
    runs = _DurableRuns(agent, profile, run_timeout_s, turns)
    return Agent.from_profile(
        profile,
        handler=runs.run,
        estimate=estimate,
        max_concurrent_runs=max_concurrent_runs,
        workflows=agent.register,
    )


class TurnsByRun:
    """The model turns of each run (workflow instance), as the agent's `call_llm` activity gave
    them: one per distinct assistant message, so an activity run again, which gives back the
    message it recorded the first time, is not counted twice. The latest `MAX_RUNS_KEPT` runs
    are kept, so an award's step run again reads the same count."""

    def __init__(self) -> None:
        self._messages: dict[str, set[str]] = {}
        self._lock = threading.Lock()  # sync activities run on the runtime's worker threads
        self._unnamed = itertools.count()

    def record(self, instance: str, message: Any) -> None:
        named = message.get("id") if isinstance(message, dict) else None
        with self._lock:
            key = str(named) if named else f"unnamed-{next(self._unnamed)}"
            self._messages.setdefault(instance, set()).add(key)
            while len(self._messages) > MAX_RUNS_KEPT:
                del self._messages[next(iter(self._messages))]

    def count(self, instance: str) -> int:
        with self._lock:
            return len(self._messages.get(instance, ()))


def count_turns(agent: Any) -> TurnsByRun:
    """Count the turns of each of `agent`'s runs: its `call_llm` activity, wrapped before the
    agent registers it, records the message it gives each workflow instance."""
    turns = TurnsByRun()
    call_llm: Callable[[Any, dict[str, Any]], Any] = agent.call_llm

    @functools.wraps(call_llm)  # registered under the same activity name
    def counted(ctx: Any, payload: dict[str, Any]) -> Any:
        message = call_llm(ctx, payload)
        turns.record(str(getattr(ctx, "workflow_id", None) or payload.get("instance_id")), message)
        return message

    agent.call_llm = counted
    return turns


class _DurableRuns:
    """Runs awards as instances of a `DurableAgent`'s workflow and reads how they went."""

    def __init__(
        self,
        agent: DurableAgent,
        profile: CapabilityProfile,
        timeout_s: float,
        turns: TurnsByRun | None = None,
    ) -> None:
        self._agent = agent
        self._profile = profile
        self._timeout_s = timeout_s
        self._turns = turns
        """The turns of each run, when the agent's own state cannot tell its runs apart."""
        self._client: DaprWorkflowClient | None = None

    def _workflows(self) -> DaprWorkflowClient:
        # Made on first use, on the app's loop, from the sidecar address in the app's environment.
        if self._client is None:
            self._client = DaprWorkflowClient()
        return self._client

    async def run(self, award: TaskAwarded) -> HandlerResult:
        client = self._workflows()
        instance = instance_of(award.task_id)
        if await client.get_workflow_state(instance, fetch_payloads=False) is None:
            await client.schedule_new_workflow(
                self._agent.agent_workflow_name, input={"task": award.spec.description}, instance_id=instance
            )
        try:
            ended = await client.wait_for_workflow_completion(
                instance, fetch_payloads=True, timeout_in_seconds=int(self._timeout_s)
            )
        except TimeoutError:
            await client.terminate_workflow(instance)
            return self._result(instance, False, f"no answer within {self._timeout_s:g} s")
        if ended is None:
            return self._result(instance, False, "the run is gone")
        if ended.runtime_status is not WorkflowStatus.COMPLETED:
            failure = ended.failure_details.message if ended.failure_details else ended.runtime_status.name
            return await self._read(instance, False, f"{ended.runtime_status.name}: {failure}")
        return await self._read(instance, True, _answer(ended.serialized_output))

    async def _read(self, instance: str, success: bool, summary: str) -> HandlerResult:
        if self._turns is not None:
            turns = self._turns.count(instance)
        else:
            entry = await asyncio.to_thread(self._agent.get_state, instance)
            messages = getattr(entry, "messages", None) or []
            turns = sum(1 for message in messages if getattr(message, "role", None) == "assistant")
        return self._result(instance, success, summary, steps=max(1, turns))

    def _result(self, instance: str, success: bool, summary: str, steps: int = 1) -> HandlerResult:
        log.info("dapr-agents run ended", extra={"instance_id": instance, "success": success, "steps": steps})
        return HandlerResult(
            success=success,
            summary=summary[:MAX_TEXT_CHARS],
            steps=steps,
            cost_usd=round(steps * self._profile.cost_per_step_usd, 6),
        )


def _answer(serialized: str | None) -> str:
    """The final message's text from the workflow's output (the assistant message as JSON)."""
    if not serialized:
        return ""
    try:
        output: Any = json.loads(serialized)
    except json.JSONDecodeError:
        return serialized
    if isinstance(output, dict):
        return str(output.get("content") or "")
    return str(output)
