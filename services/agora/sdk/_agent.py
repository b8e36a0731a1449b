"""An agent: its model, instructions, tools, skills and price in one object, runnable directly
(`run`, `run_sync`, or `stream` to watch the run as it goes) and servable on the market (an
agents file's `agents = [...]`, served by `agora-agent run` or `make run AGENTS=...`, where it
bids for tasks that need its skills)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from dapr.ext.workflow import WorkflowRuntime
from pydantic import BaseModel, Field, ValidationError

from agora.core.contracts import BidOffer
from agora.core.errors import BidNotMade
from agora.core.limits import MAX_NOTE_CHARS, MAX_TEXT_CHARS, Identifier
from agora.core.market import TaskSpec
from agora.core.messages import EscalationResolved, TaskAwarded
from agora.core.models import CapabilityProfile, ModelTier
from agora.llm import ChatMessage, ModelClient, ModelOutputInvalid, extract_json_object
from agora.llm.settings import ModelSettings, model_client_from_settings
from agora.sdk._router import ModelRouter
from agora.sdk._runner import (
    AgentDefinition,
    AgentRunner,
    Escalator,
    ExecutionResult,
    RunEvent,
    RunnerConfig,
)
from agora.sdk._tools import Tool, ToolExecutor, ToolFunction, ToolSource

__all__ = [
    "Agent",
    "AgentLoad",
    "DecisionHandler",
    "Estimator",
    "Handler",
    "HandlerResult",
    "ProgressReporter",
]


class HandlerResult(BaseModel):
    """What an agent's own handler reports for a task it ran."""

    success: bool
    summary: str = Field(default="", max_length=MAX_TEXT_CHARS)
    cost_usd: float = Field(default=0.0, ge=0.0)
    steps: int = Field(default=1, ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    partial: bool = False
    waiting_on: Identifier | None = None
    """Set when the handler parked the run for a person: the escalation it waits on (`success`
    and the rest are then what the run came to so far). The person's decision goes to the
    agent's `decision_handler`."""
    handle: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    """What the agent needs to go on after the decision (kept in the run's workflow history)."""


@dataclass(frozen=True)
class AgentLoad:
    """How busy an agent is when it is asked to bid."""

    runs_in_flight: int
    max_concurrent_runs: int

    @property
    def fraction(self) -> float:
        return min(1.0, self.runs_in_flight / self.max_concurrent_runs)


class ProgressReporter(Protocol):
    """Where a run tells the task's history how it goes (the task board, in an agent app)."""

    async def note(self, award: TaskAwarded, text: str) -> None: ...


Handler = Callable[[TaskAwarded], Awaitable[HandlerResult]]
DecisionHandler = Callable[[TaskAwarded, EscalationResolved, str | None], Awaitable[HandlerResult]]
"""How a handler agent whose run waits for a person goes on: the award, the person's decision
and the handle its handler returned."""
Estimator = Callable[[TaskSpec, AgentLoad], Awaitable[BidOffer] | BidOffer]
MODEL_ESTIMATE = "model"
"""`Agent(estimate="model")`: the agent's own model estimates each task it is asked about."""
STREAM_BUFFER_EVENTS = 64
"""Events of a streamed run held for a reader that has not taken them yet; a run whose reader
falls this far behind waits for it (so a slow reader slows the run, never grows memory)."""


class Agent:
    """An agent: a model, instructions, tools, the skills it offers and its price per step.

        agent = Agent("counter", instructions="Count words with the tool.", tools=[count_words],
                      skills=["word_count"], price_per_step=0.001)
        result = agent.run_sync("Count the words of: the quick brown fox")

    `model` is a `ModelClient` or a `ModelRouter`; without one, the agent uses the model the
    environment configures (`AGORA_MODEL_*`; the deterministic offline model by default). The
    skills default to the tools' names. On the market, `estimate` makes its bids (a function of
    the task and its load; "model": its own model reads the task; None: its price, its load and
    half its step allowance), or `bids="market"` leaves them to the market's own model.

    An agent that works without Agora's runner gives a `handler` instead of a model (it runs on
    the market only); one whose runner needs more (a state store, a step monitor, a recovery
    policy) gives a built `runner`.
    """

    def __init__(
        self,
        name: str,
        model: ModelClient | ModelRouter | None = None,
        *,
        instructions: str = "",
        tools: Iterable[Tool | ToolFunction | ToolSource] = (),
        skills: Sequence[str] = (),
        price_per_step: float = 0.0,
        max_steps: int = 20,
        display_name: str | None = None,
        tier: ModelTier = ModelTier.BALANCED,
        budget_usd: float | None = None,
        estimate: Estimator | Literal["model"] | None = None,
        bids: Literal["self", "market"] = "self",
        max_concurrent_runs: int = 4,
        runner: AgentRunner | None = None,
        handler: Handler | None = None,
        workflows: Callable[[WorkflowRuntime], None] | None = None,
        check_before_report: bool = True,
    ) -> None:
        given_tools = [t if isinstance(t, Tool | ToolSource) else Tool(t) for t in tools]
        if handler is not None and (model is not None or runner is not None or given_tools):
            raise ValueError(f"agent {name}: a handler does its own work (no model, runner or tools with it)")
        if runner is not None and (model is not None or given_tools):
            raise ValueError(f"agent {name}: give a runner or a model and tools (the runner has its own)")
        offered = list(skills) or [t.name for t in given_tools if isinstance(t, Tool)]
        if not offered:
            raise ValueError(f"agent {name}: name the skills it offers (it has no tools to name them)")
        profile = CapabilityProfile(
            agent_id=name,
            agent_name=display_name or name,
            skill_tags=offered,
            model_tier=tier,
            cost_per_step_usd=price_per_step,
            max_steps=max_steps,
        )
        self._init(
            profile,
            instructions=instructions,
            budget_usd=budget_usd,
            estimate=estimate,
            bids=bids,
            max_concurrent_runs=max_concurrent_runs,
            handler=handler,
            workflows=workflows,
            check_before_report=check_before_report,
        )
        if handler is None and runner is None:
            chosen = model if model is not None else _configured_model()
            config = RunnerConfig(max_iterations=max_steps)
            runner = AgentRunner(chosen, ToolExecutor(given_tools), config=config)
        self.runner: AgentRunner | None = runner

    @classmethod
    def from_profile(
        cls,
        profile: CapabilityProfile,
        *,
        runner: AgentRunner | None = None,
        handler: Handler | None = None,
        instructions: str = "",
        budget_usd: float | None = None,
        estimate: Estimator | Literal["model"] | None = None,
        bids: Literal["self", "market"] = "self",
        max_concurrent_runs: int | None = None,
        workflows: Callable[[WorkflowRuntime], None] | None = None,
        check_before_report: bool = True,
    ) -> Agent:
        """An agent of a capability profile a registry or another framework describes, with a
        runner or a handler (one of them); it takes `max_concurrent_runs` at once (default: as
        many as the profile says)."""
        if (runner is None) == (handler is None):
            raise ValueError(f"agent {profile.agent_id}: give a runner or a handler (one of them)")
        agent = cls.__new__(cls)
        agent._init(
            profile,
            instructions=instructions,
            budget_usd=budget_usd,
            estimate=estimate,
            bids=bids,
            max_concurrent_runs=max_concurrent_runs or profile.max_concurrent_runs,
            handler=handler,
            workflows=workflows,
            check_before_report=check_before_report,
        )
        agent.runner = runner
        return agent

    def _init(
        self,
        profile: CapabilityProfile,
        *,
        instructions: str,
        budget_usd: float | None,
        estimate: Estimator | Literal["model"] | None,
        bids: Literal["self", "market"],
        max_concurrent_runs: int,
        handler: Handler | None,
        workflows: Callable[[WorkflowRuntime], None] | None,
        check_before_report: bool = True,
    ) -> None:
        if max_concurrent_runs < 1:
            raise ValueError("max_concurrent_runs is at least 1")
        if estimate is not None and bids == "market":
            raise ValueError(f"agent {profile.agent_id}: an estimate function is for bids='self'")
        if estimate == MODEL_ESTIMATE and handler is not None:
            raise ValueError(
                f"agent {profile.agent_id}: estimate='model' needs a runner (a model of its own)"
            )
        # The market never awards it more runs at once than it takes (the profile says).
        self.profile = profile.model_copy(update={"max_concurrent_runs": max_concurrent_runs})
        self.definition = AgentDefinition(
            name=profile.agent_id, instructions=instructions, budget_usd=budget_usd
        )
        self.estimate = estimate
        self.bids = bids
        self.max_concurrent_runs = max_concurrent_runs
        self.handler = handler
        self.check_before_report = check_before_report
        """Whether a run's output meets its task's own check (an expected answer, a JSON Schema)
        before the agent claims success: one that does not is reported as the failure it is
        (`agora.sdk._app_steps.claimed`). The market checks all the same."""
        self.workflows = workflows
        """Registers workflows and activities of the agent's own on its app's workflow runtime
        (an agent that runs on a workflow engine of its own, like a dapr-agents `DurableAgent`)."""
        self.runs_in_flight = 0
        self.decision_handler: DecisionHandler | None = None
        self.escalator: Escalator | None = None
        """Where a handler agent parks its run for a person (its agent app attaches it)."""
        self.progress: ProgressReporter | None = None
        """Where a handler agent notes its run's progress in the task's history (its agent app
        attaches it)."""
        self.runs_inline = True
        """Whether a run may start in its award's delivery before its workflow takes it over
        (stopped there and started again by the workflow when it lasts): not for an agent whose
        work is done elsewhere and cannot be started twice."""

    @property
    def agent_id(self) -> str:
        return self.profile.agent_id

    async def connect(self, dapr_http_endpoint: str) -> None:
        """What the agent needs of its app's sidecar before it runs: its MCP servers' tools,
        listed through the sidecar (once)."""
        if self.runner is not None and self.runner.tools.sources:
            await self.runner.tools.connect(dapr_http_endpoint)

    async def stopped(self, award: TaskAwarded, handle: str | None) -> None:
        """The run, paused for a person, was ended at its task's deadline: what the agent does to
        stop its side of it (`handle`: what the paused step handed on). Nothing, by default."""

    async def offer(self, dapr_http_endpoint: str) -> CapabilityProfile | None:
        """The profile its app registers (and renews) on the market now, once the agent is
        connected (an agent bids only once its tools are there); None: it cannot be offered
        now, and its lease is left to lapse."""
        await self.connect(dapr_http_endpoint)
        return self.profile

    @property
    def instructions(self) -> str:
        return self.definition.instructions

    def __repr__(self) -> str:
        works = "handler" if self.handler is not None else "runner"
        return f"Agent({self.agent_id!r}, skills={self.profile.skill_tags!r}, {works})"

    async def run(
        self, task: str, *, session_id: str | None = None, budget_usd: float | None = None
    ) -> ExecutionResult:
        """One run of the agent on `task`, here and now (no market, no sidecar needed): its
        answer, status, steps, tokens and cost. The same run as the one a task it wins gets."""
        if self.runner is None:
            raise ValueError(f"agent {self.agent_id} works through its handler, on the market only")
        session = session_id or uuid.uuid4().hex
        return await self.runner.run(self.definition, task, session_id=session, budget_usd=budget_usd)

    async def stream(
        self, task: str, *, session_id: str | None = None, budget_usd: float | None = None
    ) -> AsyncGenerator[RunEvent, None]:
        """`run`, watched as it goes: its events (`agora.sdk.runner`: the model's text as it
        arrives, each step, each tool's result) in order, the last one `RunEnded`, whose
        `result` is what `run` returns. A run that raises ends its events with `RunEnded`
        (FAILED), then raises here as `run` would (a request refused before the run starts
        raises with no events). At most `STREAM_BUFFER_EVENTS` events wait for the reader; the
        run waits for one that falls further behind. Leaving the loop early cancels the run.

            async for event in agent.stream("What is 2 + 3?"):
                if event.kind == "text":
                    print(event.text, end="", flush=True)
        """
        if self.runner is None:
            raise ValueError(f"agent {self.agent_id} works through its handler, on the market only")
        events: asyncio.Queue[RunEvent] = asyncio.Queue(maxsize=STREAM_BUFFER_EVENTS)
        session = session_id or uuid.uuid4().hex
        run = asyncio.create_task(
            self.runner.run(
                self.definition, task, session_id=session, budget_usd=budget_usd, events=events.put
            )
        )
        next_event: asyncio.Future[RunEvent] | None = None
        try:
            while not (run.done() and events.empty()):
                next_event = asyncio.ensure_future(events.get())
                await asyncio.wait({next_event, run}, return_when=asyncio.FIRST_COMPLETED)
                if next_event.done():
                    yield next_event.result()
                else:
                    next_event.cancel()
            await run  # the run's error, if it raised
        finally:
            if next_event is not None and not next_event.done():
                next_event.cancel()
            if not run.done():
                run.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await run

    def run_sync(
        self, task: str, *, session_id: str | None = None, budget_usd: float | None = None
    ) -> ExecutionResult:
        """`run`, from code that has no event loop of its own (a script, a notebook cell)."""
        return asyncio.run(self.run(task, session_id=session_id, budget_usd=budget_usd))

    async def bid(self, spec: TaskSpec) -> BidOffer:
        load = AgentLoad(self.runs_in_flight, self.max_concurrent_runs)
        if self.estimate is None:
            return default_estimate(self.profile, spec, load)
        if self.estimate == MODEL_ESTIMATE:
            assert self.runner is not None
            return await model_estimate(self.runner, self.profile, spec, load)
        assert not isinstance(self.estimate, str)
        offer = self.estimate(spec, load)
        return await offer if inspect.isawaitable(offer) else offer


def _configured_model() -> ModelClient:
    """The model the environment names (`AGORA_MODEL_*`). The Dapr Conversation backend needs
    the app's sidecar, which an agent built outside an app does not have: it gets a clear error."""
    settings = ModelSettings()
    if settings.backend == "dapr":
        from agora.runtime.settings import ServiceSettings
        from agora.runtime.sidecar import DaprSidecar

        return model_client_from_settings(settings, DaprSidecar(ServiceSettings()))
    return model_client_from_settings(settings, None)


def default_estimate(profile: CapabilityProfile, spec: TaskSpec, load: AgentLoad) -> BidOffer:
    """Half its step allowance at its step price; 0.8 sure when idle, down to 0.4 when every
    run slot is taken (a busy agent is slower and more likely to miss)."""
    steps = max(1, profile.max_steps // 2)
    return BidOffer(
        self_reported_success_prob=round(0.8 - 0.4 * load.fraction, 3),
        estimated_cost_usd=round(steps * profile.cost_per_step_usd, 6),
        estimated_steps=steps,
        rationale=f"{profile.agent_name}: about {steps} steps, {load.runs_in_flight} of "
        f"{load.max_concurrent_runs} runs under way",
    )


class TaskEstimate(BaseModel):
    """What an agent's model is asked for when it bids: steps and its chance, for this task."""

    estimated_steps: int = Field(ge=1, le=10_000)
    self_reported_success_prob: float = Field(ge=0.0, le=1.0)
    rationale: str = Field(default="", max_length=500)


TASK_ESTIMATE_SCHEMA: dict[str, Any] = TaskEstimate.model_json_schema()


ESTIMATE_ATTEMPTS = 2
"""Calls for an agent's own estimate: the first, and one more that tells the model what was wrong."""


async def _estimated(runner: AgentRunner, step_name: str, messages: list[ChatMessage]) -> TaskEstimate:
    invalid: ModelOutputInvalid | None = None
    for _ in range(ESTIMATE_ATTEMPTS):
        completion = (
            await runner.router.complete(step_name, messages, json_schema=TASK_ESTIMATE_SCHEMA)
        ).completion
        try:
            return TaskEstimate.model_validate(extract_json_object(completion.text))
        except (ValueError, ValidationError) as exc:
            invalid = ModelOutputInvalid(
                "not a valid estimate",
                completion.text,
                exc,
                usage=completion.usage,
                cut_off=completion.cut_off,
            )
            messages = [*messages, *invalid.asked_again()]
    assert invalid is not None
    raise BidNotMade(
        f"no valid estimate after {ESTIMATE_ATTEMPTS} attempt(s): {invalid.problem}"[:MAX_NOTE_CHARS]
    )


async def model_estimate(
    runner: AgentRunner, profile: CapabilityProfile, spec: TaskSpec, load: AgentLoad
) -> BidOffer:
    """The agent's own model reads the task, with the agent's skills, price, step allowance and
    load, and estimates its steps and its chance; the cost is those steps at its real price. An
    answer out of form is asked again once, with what was wrong; then `BidNotMade` with the
    reason (the app answers it as an error, and the market uses its own estimate, marked with
    it)."""
    ask = [
        ChatMessage(
            role="system",
            content=f"You are {profile.agent_name}, skilled in {', '.join(profile.skill_tags)}. You are "
            f"asked to bid for a task. Each step you take costs ${profile.cost_per_step_usd}; you take at "
            f"most {profile.max_steps} steps; {load.runs_in_flight} of your {load.max_concurrent_runs} "
            "runs are under way. Estimate the steps the task needs and how likely you are to do it.",
        ),
        ChatMessage(role="user", content=f"Task: {spec.description}"[:MAX_TEXT_CHARS]),
    ]
    estimate = await _estimated(runner, f"{profile.agent_id}.bid", ask)
    steps = min(profile.max_steps, estimate.estimated_steps)
    return BidOffer(
        self_reported_success_prob=estimate.self_reported_success_prob,
        estimated_cost_usd=round(steps * profile.cost_per_step_usd, 6),
        estimated_steps=steps,
        rationale=f"{profile.agent_name}: {estimate.rationale or f'about {steps} steps'}"[:MAX_NOTE_CHARS],
    )
