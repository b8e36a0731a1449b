"""The agent loop: ReAct (reason, then act with a tool, then read the result) through the model
router, until the model gives its final answer or the iteration limit is reached.

Each iteration asks the model for one `ReactStep` (a JSON object: a thought, then either a tool
call or the final answer); a tool's result, or its error, goes back to the model as the next
message. A step monitor (the uncertainty monitor, in an agent app) may pause the run for a
person: the state is saved as WAITING_FOR_HUMAN and `resume` continues it with the person's
answer. People are asked before, not after, a risky step: before each step its checkpoint
triggers are evaluated (the runner's, the run's and the monitor's own), and before each tool
call the monitor's tool gate is asked; either may hold the step, which then waits for a
person's decision and goes as decided (proceed: it runs; skip: it does not, and the run goes
on; abort: the run ends; modify_prompt: the new prompt is used instead). A step the monitor
flags for reflection adds its reflection prompt to the next model call. Every call's cost is
recorded before the budget is checked (`CostTracker`). With `react_pattern` off the agent
answers in one call, without tools.

A run can be watched as it goes: given a sink of `RunEvent`s, the runner passes on the model's
text as it arrives (`TextPiece`), each step the model decided (`StepDecided`) or that was no
step (`StepRejected`), each tool's result (`ToolCalled`) and the turn's end (`RunEnded`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agora.core.contracts import AgentLearning, CheckpointRequest
from agora.core.errors import InvalidArgument, MaxIterationsExceeded, NoStateFound
from agora.core.escalation.checkpoints import (
    CheckpointContext,
    CheckpointGate,
    CheckpointTrigger,
    evaluate_checkpoint,
)
from agora.core.escalation.decisions import CheckpointResponse, EscalationResponse
from agora.core.escalation.ladder import EscalationLevel
from agora.core.escalation.record import AgentNotWaiting, ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.limits import MAX_ITEMS, MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.outcomes.prompts import format_patterns_for_prompt
from agora.core.triage.context import Step as TriageStep
from agora.core.triage.failures import FailureType
from agora.llm import (
    ChatMessage,
    ModelClient,
    ModelOutputInvalid,
    ToolChoice,
    ToolSpec,
    extract_json_object,
)
from agora.runtime.tracing import tracer
from agora.sdk._cost import CostSummary, CostTracker, EventPublisher
from agora.sdk._learning import InMemoryOutcomeHistory, Lessons, OutcomeHistory, learning_report, learnt
from agora.sdk._recovery import FAILURE_ANALYSIS_SCHEMA, RecoveryPolicy, analyse, handover, recovery_after
from agora.sdk._router import ModelRouter, ModelSpec, RoutedCompletion
from agora.sdk._tools import ToolCall, ToolExecutor, ToolResult

__all__ = [
    "AgentDefinition",
    "AgentRunner",
    "AgentState",
    "AgentStateStore",
    "DecisionSource",
    "Escalator",
    "ExecutionResult",
    "HeldStep",
    "InMemoryStateStore",
    "MemoryManager",
    "ReactStep",
    "RunEnded",
    "RunEvent",
    "RunEventSink",
    "RunStatus",
    "RunnerConfig",
    "StepCheck",
    "StepCheckpoints",
    "StepDecided",
    "StepMonitor",
    "StepRejected",
    "TextDiscarded",
    "TextPiece",
    "ToolCalled",
    "ToolGate",
]

log = logging.getLogger(__name__)

REACT_PROTOCOL = """Work step by step. Answer every turn with ONE JSON object and nothing else:
{"thought": "<your reasoning>", "action": "tool" or "final", "tool": "<tool name, for a tool call>",
 "arguments": {<the tool's arguments>}, "answer": "<your final answer, for action final>",
 "succeeded": <for action final: true if you did the task, false if you give up>,
 "confidence": <0.0 to 1.0, how sure you are of this step>}
Call a tool when it helps; its result comes back to you. Give the final answer when you have it."""
MAX_TOOL_CALL_ID_CHARS = 128


class RunnerConfig(BaseModel):
    """How an agent loop runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_iterations: int = Field(
        default=10, ge=1, le=1_000, description="Model calls before MAX_ITERATIONS_EXCEEDED."
    )
    memory_top_k: int = Field(default=5, ge=1, le=100, description="Memories recalled per run.")
    enable_memory: bool = Field(
        default=True, description="Recall and remember through the memory manager, if any."
    )
    react_pattern: bool = Field(default=True, description="The ReAct loop with tools; off: one model call.")
    native_tools: bool = Field(
        default=True,
        description="With a model that takes tools natively (`ModelClient.supports_tools`), offer the tools "
        "as `tools` and read its `tool_calls`; otherwise, or off, the JSON step protocol in text.",
    )
    tool_choice: Literal["auto", "required"] = Field(
        default="auto",
        description="With native tools: `required`, a step that does not follow a tool's result must call "
        "a tool (for models that answer without their tools otherwise); after a result the model may "
        "answer. `auto`: the model chooses every step.",
    )
    learn_from_outcomes: bool = Field(
        default=True,
        description="Add what the agent's recent runs show (patterns of their failures and successes) to "
        "its prompt, and keep each run's outcome to learn from.",
    )
    checkpoints: list[CheckpointTrigger] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Checkpoint triggers evaluated before every step of every run (with each run's own "
        "and the step monitor's): one that requires confirmation holds the step for a person.",
    )


class AgentDefinition(BaseModel):
    """An agent's blueprint: its name (the agent id), its instructions, and an optional budget
    for each run (a task's own `budget_usd` applies when smaller)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$")
    instructions: str = Field(default="", max_length=MAX_TEXT_CHARS)
    budget_usd: float | None = Field(default=None, ge=0.0)


class RunStatus(StrEnum):
    RUNNING = "RUNNING"
    WAITING_FOR_HUMAN = "WAITING_FOR_HUMAN"
    """Paused by the step monitor; `resume` continues with a person's answer."""
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class ReactStep(BaseModel):
    """One turn of the model in the loop."""

    model_config = ConfigDict(extra="ignore")

    thought: str = Field(default="", max_length=MAX_TEXT_CHARS)
    call_id: str = Field(default="", max_length=MAX_TOOL_CALL_ID_CHARS)
    """A native tool call's id, which its result names (empty in the JSON step protocol)."""
    action: Literal["tool", "final"]
    tool: str = Field(default="", max_length=64)
    arguments: dict[str, Any] = Field(default_factory=dict)
    answer: str = Field(default="", max_length=MAX_TEXT_CHARS)
    succeeded: bool = True
    """With a final answer: whether the agent did the task (false: it gives up on this attempt)."""
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)


class HeldStep(BaseModel):
    """A step a gate stopped before it ran, until a person decides what becomes of it."""

    step: int = Field(ge=1, description="The step's number (the model call it is, or belongs to).")
    tool_call: ReactStep | None = None
    """The tool call the tool gate held, as the model asked for it; None: the whole step, held by a
    checkpoint before its model call."""


class AgentState(BaseModel):
    """What a run keeps between turns (and across a pause): the conversation and the counts."""

    agent_id: str
    session_id: str
    status: RunStatus = RunStatus.RUNNING
    messages: list[ChatMessage] = Field(default_factory=list)
    iterations: int = 0
    tool_calls: int = 0
    tools_called: list[str] = Field(default_factory=list)
    """The tools the run called, in order (the first `MAX_TOOLS_KEPT`)."""
    budget_usd: float | None = None
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    escalation_id: str | None = None
    reason: str = Field(default="", max_length=MAX_NOTE_CHARS)
    output: str = ""
    max_iterations: int = Field(default=10, ge=1)
    """Model calls each attempt may make (the runner's limit, or less for this run)."""
    attempt_started_at: int = 0
    """The iteration the current attempt started after (its budget is `max_iterations` more)."""
    attempt_history: list[tuple[FailureType, str]] = Field(default_factory=list)
    """With a recovery policy: the failed attempts so far and what was tried after each."""
    aborted: bool = False
    """Ended by the escalation ladder's last rung."""
    handed_over: bool = False
    """Given up for another of the task's bidders, as a person decided: it reports no outcome."""
    patterns_applied: list[str] = Field(default_factory=list)
    """What the agent's earlier runs taught it, added to this run's prompt."""
    checkpoints: list[CheckpointTrigger] = Field(default_factory=list, max_length=MAX_ITEMS)
    """The run's own checkpoint triggers (its task's), evaluated before each step with the
    runner's."""
    held: HeldStep | None = None
    """While the run waits for a person: the step a gate held before it ran, which the decision
    applies to (None: the run paused after a step, and goes on from the person's answer)."""
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    updated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class ExecutionResult(BaseModel):
    """How a run ended (or paused): its output, the conversation, the tools it called, what it
    cost and how long it took."""

    agent_id: str
    session_id: str
    status: RunStatus
    output: str = ""
    messages: list[ChatMessage]
    iterations: int
    tool_results: list[ToolResult] = Field(default_factory=list)
    """The results of this turn's tool calls (since the run's start or its resume)."""
    tools_called: list[str] = Field(default_factory=list)
    """Every tool the run called, in order, across pauses (the first `MAX_TOOLS_KEPT`)."""
    cost: CostSummary
    """This turn's costs (since the run's start or its resume)."""
    total_cost_usd: float = 0.0
    """What the run's model calls cost in all, across pauses."""
    input_tokens: int
    output_tokens: int
    escalation_id: str | None = None
    reason: str = ""
    failed_attempts: int = 0
    """Attempts that failed and were recovered (with a recovery policy)."""
    started_at: datetime
    finished_at: datetime
    duration_s: float


class _RunEventBase(BaseModel):
    model_config = ConfigDict(frozen=True)

    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When the runner passed the event on."""


class TextPiece(_RunEventBase):
    """A piece of the model's answer in step `step`, as it arrived (in the JSON step protocol,
    a piece of the step's JSON)."""

    kind: Literal["text"] = "text"
    step: int = Field(ge=1)
    text: str
    model: str
    """The id of the model writing it (the router's `ModelSpec.model_id`)."""


class TextDiscarded(_RunEventBase):
    """The pieces of step `step` that `model` wrote are void: its stream broke, and the step
    went to the next model of the router's fallback chain."""

    kind: Literal["text_discarded"] = "text_discarded"
    step: int = Field(ge=1)
    model: str


class StepDecided(_RunEventBase):
    """The model decided step `step`: a tool call or the final answer."""

    kind: Literal["step"] = "step"
    step: int = Field(ge=1)
    decision: ReactStep


class StepRejected(_RunEventBase):
    """Step `step` was not one step (the model is told why, and asked again)."""

    kind: Literal["step_rejected"] = "step_rejected"
    step: int = Field(ge=1)
    reason: str


class ToolCalled(_RunEventBase):
    """A tool the model called in step `step` gave its result (or its error)."""

    kind: Literal["tool_result"] = "tool_result"
    step: int = Field(ge=1)
    result: ToolResult


class RunEnded(_RunEventBase):
    """The turn ended: completed, failed, or paused for a person (`WAITING_FOR_HUMAN`, which
    `resume` continues, with events of its own). `result` is what `run` or `resume` returns;
    None when they raise (`reason` names the error)."""

    kind: Literal["end"] = "end"
    status: RunStatus
    output: str = ""
    reason: str = ""
    result: ExecutionResult | None = None


RunEvent = Annotated[
    TextPiece | TextDiscarded | StepDecided | StepRejected | ToolCalled | RunEnded,
    Field(discriminator="kind"),
]
"""One of a run's events; `kind` tells which (JSON of one is read back with a
`pydantic.TypeAdapter(RunEvent)`)."""
RunEventSink = Callable[[RunEvent], Awaitable[None]]
"""Takes a run's events, in order. The runner awaits each before it goes on, so a slow sink
slows the run rather than events piling up (one at a time is in flight); an exception it raises
stops the run's events (it is logged), never the run."""


class StepCheck(BaseModel):
    """A step monitor's verdict on one step."""

    action: Literal["continue", "pause", "abort"] = "continue"
    escalation_id: str | None = Field(default=None, description="The escalation a pause waits on.")
    reason: str = ""
    reflection: str = Field(
        default="",
        max_length=MAX_TEXT_CHARS,
        description="A prompt the next model call must see (a system message added to the conversation "
        "now, before a pause): the monitor's System-2 reflection on a step it doubts.",
    )


class StepMonitor(Protocol):
    """Checks each step before the run goes on (e.g. the uncertainty monitor)."""

    async def check(self, state: AgentState, step: ReactStep) -> StepCheck: ...


@runtime_checkable
class StepCheckpoints(Protocol):
    """A step monitor that evaluates checkpoint triggers before each step runs (its own, and the
    request's): a pause holds the step before its model call."""

    async def before_step(self, state: AgentState, request: CheckpointRequest) -> StepCheck: ...


@runtime_checkable
class ToolGate(Protocol):
    """A step monitor asked before each tool call: a pause holds the call before the tool runs."""

    async def before_tool(self, state: AgentState, step: ReactStep) -> StepCheck: ...


@runtime_checkable
class DecisionSource(Protocol):
    """A step monitor that knows the decision a person took on an escalation it opened, so a
    held step goes as decided when `resume` is given only the person's answer as text."""

    async def decision_on(
        self, session_id: str, escalation_id: str
    ) -> CheckpointResponse | EscalationResponse | None: ...


class MemoryManager(Protocol):
    """What an agent remembers between runs."""

    async def recall(self, agent_id: str, query: str, top_k: int) -> list[str]: ...

    async def remember(self, agent_id: str, text: str) -> None: ...


class Escalator(Protocol):
    """Hands a run to a person: parks the escalation (the escalation service, in an agent app).
    Parking the same escalation again is a repeat, not a second escalation."""

    async def park(self, escalation_id: str, request: ParkRequest) -> None: ...


class AgentStateStore(Protocol):
    """Where a run's state is kept between turns (Dapr state in an agent app)."""

    async def load(self, agent_id: str, session_id: str) -> AgentState | None: ...

    async def save(self, state: AgentState) -> None: ...


class InMemoryStateStore:
    """A state store in this process only (tests, one-off scripts)."""

    def __init__(self) -> None:
        self._states: dict[tuple[str, str], AgentState] = {}

    async def load(self, agent_id: str, session_id: str) -> AgentState | None:
        found = self._states.get((agent_id, session_id))
        return found.model_copy(deep=True) if found is not None else None

    async def save(self, state: AgentState) -> None:
        self._states[(state.agent_id, state.session_id)] = state.model_copy(deep=True)


class AgentRunner:
    """Runs agents: `run` for a new turn, `resume` after a pause."""

    def __init__(
        self,
        model: ModelRouter | ModelClient,
        tool_executor: ToolExecutor | None = None,
        *,
        state_store: AgentStateStore | None = None,
        cost_publisher: EventPublisher | None = None,
        monitor: StepMonitor | None = None,
        memory: MemoryManager | None = None,
        config: RunnerConfig | None = None,
        recovery: RecoveryPolicy | None = None,
        escalator: Escalator | None = None,
        outcomes: OutcomeHistory | None = None,
    ) -> None:
        self.router = model if isinstance(model, ModelRouter) else ModelRouter.single(model)
        self.tools = tool_executor or ToolExecutor()
        self.state_store = state_store or InMemoryStateStore()
        self.config = config or RunnerConfig()
        self.recovery = recovery
        self.outcomes = outcomes or InMemoryOutcomeHistory()
        self._publisher = cost_publisher
        self._monitor = monitor
        self._memory = memory
        self._escalator = escalator
        self._lessons: dict[str, Lessons] = {}

    def attach(
        self,
        *,
        state_store: AgentStateStore | None = None,
        cost_publisher: EventPublisher | None = None,
        monitor: StepMonitor | None = None,
        escalator: Escalator | None = None,
        outcomes: OutcomeHistory | None = None,
    ) -> None:
        """What an agent app gives its runners: Dapr state for runs and for the outcomes they
        learn from, its publisher for cost events, the uncertainty monitor for steps, the
        escalation service for handing a run to a person. What the runner was built with stays."""
        if state_store is not None and isinstance(self.state_store, InMemoryStateStore):
            self.state_store = state_store
        if cost_publisher is not None and self._publisher is None:
            self._publisher = cost_publisher
        if monitor is not None and self._monitor is None:
            self._monitor = monitor
        if escalator is not None and self._escalator is None:
            self._escalator = escalator
        if outcomes is not None and isinstance(self.outcomes, InMemoryOutcomeHistory):
            self.outcomes = outcomes

    async def learning(self, agent_id: str) -> AgentLearning:
        """What the agent learnt from its recent runs: the patterns they show, and how runs
        fared with each pattern against without."""
        return learning_report(agent_id, await self.outcomes.outcomes(agent_id))

    async def run(
        self,
        agent: AgentDefinition,
        user_input: str,
        *,
        session_id: str,
        budget_usd: float | None = None,
        max_iterations: int | None = None,
        checkpoints: Sequence[CheckpointTrigger] = (),
        events: RunEventSink | None = None,
    ) -> ExecutionResult:
        """One turn of `agent` on `user_input`. Raises `MaxIterationsExceeded` when the loop
        ends without an answer and `BudgetExceeded` when the budget is spent (the state is
        saved FAILED with the reason first). `max_iterations` lowers the configured limit for
        this run's attempts; `checkpoints` are the run's own triggers (its task's), evaluated
        before each step with the runner's (`InvalidArgument` when together they are more than
        a checkpoint request holds). `events` takes the run's events as they happen, the last
        one `RunEnded` (see `RunEventSink`)."""
        if len(self.config.checkpoints) + len(checkpoints) > MAX_ITEMS:
            raise InvalidArgument(
                f"a run takes at most {MAX_ITEMS} checkpoint triggers with the runner's "
                f"({len(self.config.checkpoints)} configured, {len(checkpoints)} given)"
            )
        budgets = [b for b in (agent.budget_usd, budget_usd) if b is not None]
        patterns = await self._patterns_for(agent.name, user_input)
        state = AgentState(
            agent_id=agent.name,
            session_id=session_id,
            budget_usd=min(budgets) if budgets else None,
            messages=await self._opening(agent, user_input, patterns),
            patterns_applied=patterns,
            max_iterations=min(self.config.max_iterations, max_iterations or self.config.max_iterations),
            checkpoints=list(checkpoints),
        )
        return await self._drive(state, events=events)

    async def _patterns_for(self, agent_id: str, user_input: str) -> list[str]:
        if not self.config.learn_from_outcomes:
            return []
        lessons = self._lessons.setdefault(agent_id, Lessons())
        if lessons.stale:
            lessons.refresh(await self.outcomes.outcomes(agent_id))
        return lessons.for_task(user_input)

    async def resume(
        self,
        agent_id: str,
        session_id: str,
        human_response: str,
        *,
        decision: CheckpointResponse | EscalationResponse | None = None,
        events: RunEventSink | None = None,
    ) -> ExecutionResult:
        """Continue a paused run with a person's answer as the next user message. `NoStateFound`
        when the run has no saved state, `AgentNotWaiting` when it is not paused.

        A step a gate held goes as `decision` says (or, without one, as the step monitor
        knows it was decided): proceed (or retry) runs it, skip leaves it out and goes on, abort
        ends the run, modify_prompt (or retry with a prompt) puts the new prompt in its place. A
        held tool call whose decision is unknown does not run: only a person's go-ahead runs
        it; a held step whose decision is unknown runs with the person's answer. `events` takes
        this turn's events, as `run`'s does."""
        state = await self.state_store.load(agent_id, session_id)
        if state is None:
            raise NoStateFound(f"no saved run of agent {agent_id} in session {session_id}")
        if state.status is not RunStatus.WAITING_FOR_HUMAN:
            raise AgentNotWaiting(f"agent {agent_id} in session {session_id} is {state.status}, not waiting")
        held = state.held
        if held is not None and decision is None:
            decision = await self._decision_on(state)
        answered = [ChatMessage(role="user", content=f"A person answered: {human_response}")]
        new_prompt = decision.modified_prompt if decision is not None else None
        if new_prompt is not None and new_prompt not in human_response:
            answered.append(ChatMessage(role="user", content=f"Use this prompt instead:\n{new_prompt}"))
        state = state.model_copy(
            update={
                "status": RunStatus.RUNNING,
                "escalation_id": None,
                "reason": "",
                "held": None,
                "attempt_started_at": state.iterations,  # a person's answer: a fresh budget
                "messages": [*state.messages, *answered],
            }
        )
        return await self._drive(state, _Held(held, decision) if held is not None else None, events)

    async def _decision_on(self, state: AgentState) -> CheckpointResponse | EscalationResponse | None:
        if isinstance(self._monitor, DecisionSource) and state.escalation_id:
            return await self._monitor.decision_on(state.session_id, state.escalation_id)
        return None

    async def _opening(
        self, agent: AgentDefinition, user_input: str, patterns: list[str]
    ) -> list[ChatMessage]:
        system = [agent.instructions] if agent.instructions else []
        if self._native_tools(agent.name):
            system.append(NATIVE_TOOLS_PROTOCOL)
        elif self.config.react_pattern:
            system.append(react_protocol(self.tools))
        if patterns:
            system.append(format_patterns_for_prompt(patterns))
        if self._memory is not None and self.config.enable_memory:
            recalled = await self._memory.recall(agent.name, user_input, self.config.memory_top_k)
            if recalled:
                system.append("What you remember that may help:\n" + "\n".join(f"- {m}" for m in recalled))
        opening = [ChatMessage(role="system", content="\n\n".join(system))] if system else []
        return [*opening, ChatMessage(role="user", content=user_input)]

    async def _drive(
        self, state: AgentState, held: _Held | None = None, events: RunEventSink | None = None
    ) -> ExecutionResult:
        """The turn, its end passed on as `RunEnded`, whether it returns or raises."""
        watch = _Events(events, state.agent_id, state.session_id)
        try:
            result = await self._turn(state, held, watch)
        except Exception as exc:
            await watch.emit(RunEnded(status=RunStatus.FAILED, reason=_failure_reason(exc)))
            raise
        ended = RunEnded(status=result.status, output=result.output, reason=result.reason, result=result)
        await watch.emit(ended)
        return result

    async def _turn(self, state: AgentState, held: _Held | None, events: _Events) -> ExecutionResult:
        started = time.monotonic()
        tracker = _Tracker(
            CostTracker(state.agent_id, state.session_id, _budget_left(state), self._publisher)
        )
        tool_results: list[ToolResult] = []
        run = _Run(state, events)
        span_attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": state.agent_id,
                           "gen_ai.conversation.id": state.session_id}  # fmt: skip
        with tracer("agora.sdk").start_as_current_span(
            f"invoke_agent {state.agent_id}", attributes=span_attributes
        ) as span:
            try:
                await self._attempts(run, tracker, tool_results, held)
            except Exception as exc:
                reason = _failure_reason(exc)
                await self._save(
                    tracker.into(run.state).model_copy(update={"status": RunStatus.FAILED, "reason": reason})
                )
                span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
                raise
            finally:
                span.set_attribute("gen_ai.usage.input_tokens", tracker.cost.summary().input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", tracker.cost.summary().output_tokens)
                span.set_attribute("agora.cost_usd", tracker.cost.total_cost_usd)
            state = tracker.into(run.state)
            await self._save(state)
        if state.status is RunStatus.COMPLETED and self._memory is not None and self.config.enable_memory:
            await self._memory.remember(state.agent_id, state.output)
        if state.status in (RunStatus.COMPLETED, RunStatus.FAILED) and self.config.learn_from_outcomes:
            await self._learn(state)
        return ExecutionResult(
            agent_id=state.agent_id,
            session_id=state.session_id,
            status=state.status,
            output=state.output,
            messages=state.messages,
            iterations=state.iterations,
            tool_results=tool_results,
            tools_called=state.tools_called,
            cost=tracker.cost.summary(),
            total_cost_usd=state.cost_usd,
            input_tokens=state.input_tokens,
            output_tokens=state.output_tokens,
            escalation_id=state.escalation_id,
            reason=state.reason,
            failed_attempts=len(state.attempt_history),
            started_at=state.started_at,
            finished_at=state.updated_at,
            duration_s=time.monotonic() - started,
        )

    async def _learn(self, state: AgentState) -> None:
        outcome = learnt(
            state.session_id,
            succeeded=state.status is RunStatus.COMPLETED,
            partial=False,
            aborted=state.aborted,
            started_at=state.started_at.timestamp(),
            history=state.attempt_history,
            patterns_applied=state.patterns_applied,
            summary=state.output or state.reason,
        )
        try:
            await self.outcomes.record(state.agent_id, outcome)
        except Exception as exc:  # a lesson lost is not a run lost: the run's own state is saved
            log.warning(
                "the run's outcome was not kept for learning",
                extra={"agent_id": state.agent_id, "session_id": state.session_id, "reason": repr(exc)[:300]},
            )
            return
        self._lessons.setdefault(state.agent_id, Lessons()).ran()

    async def _attempts(
        self, run: _Run, tracker: _Tracker, tool_results: list[ToolResult], held: _Held | None = None
    ) -> None:
        """Attempts until one ends the run; with a recovery policy, a failed attempt (no final
        answer within its budget, or the agent gave up) is triaged and recovered as the
        escalation ladder says: tried again (after the agent's own analysis, or with a notice),
        handed to a person, or aborted. A step held for a person goes as decided first."""
        while True:
            trajectory: list[TriageStep] = []
            try:
                end = await self._carry_out(held, run, tool_results, trajectory) if held is not None else None
                held = None
                if end is None:
                    end = await self._loop(run, tracker, tool_results, trajectory)
            except MaxIterationsExceeded as exc:
                if self.recovery is None:
                    raise
                run.update(status=RunStatus.FAILED, reason=exc.message[:MAX_NOTE_CHARS])
                end = _AttemptEnd.FAILED
            if end is not _AttemptEnd.FAILED or self.recovery is None:
                return
            if not await self._recover(self.recovery, run, tracker, trajectory):
                return

    async def _recover(
        self, policy: RecoveryPolicy, run: _Run, tracker: _Tracker, trajectory: list[TriageStep]
    ) -> bool:
        """Whether the run goes on with a new attempt after the failed one."""
        state = run.state
        task = next((m.content for m in state.messages if m.role == "user"), "")
        recovery = recovery_after(
            trajectory,
            task=task,
            history=state.attempt_history,
            policy=policy,
            available_tools=[t.name for t in self.tools.tools],
        )
        decision, level = recovery.decision, recovery.level
        run.update(attempt_history=[*state.attempt_history, decision.history_entry])
        trace.get_current_span().add_event(
            "triage",
            {"agora.failure_type": decision.failure_type.value, "agora.recovery": decision.action.kind.value,
             "agora.attempt": recovery.failed_attempt, "agora.escalation_level": level.value},
        )  # fmt: skip
        if level is EscalationLevel.ABORT:
            reason = (
                f"aborted after {recovery.failed_attempt} failed attempts ({decision.failure_type.value})"
            )
            run.update(status=RunStatus.FAILED, aborted=True, reason=reason)
            return False
        if level is EscalationLevel.REQUIRE_DECISION:
            if self._escalator is None:
                run.update(
                    reason=f"{recovery.note} A person would decide next; this runner has no escalator."
                )
                return False
            escalation_id, request = handover(
                waiting_party=WaitingParty(kind=WaitingPartyKind.SESSION, id=state.session_id),
                recovery=recovery,
                history=run.state.attempt_history,
                prompt_used=task[:MAX_TEXT_CHARS],
                output_summary=(state.reason or f"failed after {state.iterations} iterations")[
                    :MAX_TEXT_CHARS
                ],
                who=f"agent:{state.agent_id}",
            )
            await self._escalator.park(escalation_id, request)
            run.update(status=RunStatus.WAITING_FOR_HUMAN, escalation_id=escalation_id,
                       reason=f"{recovery.note} Waiting for a person."[:MAX_NOTE_CHARS])  # fmt: skip
            return False
        guidance = decision.action.hint or "Try again."
        if level is EscalationLevel.AGENT_ANALYSIS:

            async def ask(messages: list[ChatMessage]) -> str:
                tracker.cost.check_budget()
                step_name = f"{state.agent_id}.analysis"
                routed = await self.router.complete(step_name, messages, json_schema=FAILURE_ANALYSIS_SCHEMA)
                await tracker.record(routed.completion, step_name, routed.model)
                return routed.completion.text

            guidance = await analyse(ask, run.state.messages, recovery.note) or guidance
        elif level is EscalationLevel.NOTIFY:
            log.warning(
                "a run keeps failing; continuing without waiting for a person",
                extra={"agent_id": state.agent_id, "session_id": state.session_id,
                       "attempt": recovery.failed_attempt, "failure_type": decision.failure_type.value},
            )  # fmt: skip
        run.say(ChatMessage(role="user", content=f"{recovery.note} {guidance}"))
        run.update(status=RunStatus.RUNNING, reason="", attempt_started_at=run.state.iterations)
        return True

    async def _loop(
        self, run: _Run, tracker: _Tracker, tool_results: list[ToolResult], trajectory: list[TriageStep]
    ) -> _AttemptEnd:
        step_name = f"{run.state.agent_id}.step"
        if not self.config.react_pattern:
            stopped = await self._checkpoint(run)
            if stopped is not None:
                return stopped
            tracker.cost.check_budget()
            routed = await self._ask(run, step_name)
            run.update(iterations=run.state.iterations + 1)
            await tracker.record(routed.completion, step_name, routed.model)
            answer = routed.completion.text
            run.say(ChatMessage(role="assistant", content=answer))
            await run.decided(ReactStep(action="final", answer=answer[:MAX_TEXT_CHARS]))
            run.update(status=RunStatus.COMPLETED, output=answer)
            return _AttemptEnd.ANSWERED
        limit = run.state.attempt_started_at + run.state.max_iterations
        native = self._native_tools(run.state.agent_id)
        while run.state.iterations < limit:
            stopped = await self._checkpoint(run)
            if stopped is not None:
                return stopped
            tracker.cost.check_budget()
            if native:
                step = await self._native_step(run, tracker, step_name, trajectory)
            else:
                step = await self._text_step(run, tracker, step_name, trajectory)
            if step is None:
                continue
            if self._monitor is not None:
                check = await self._monitor.check(run.state, step)
                if check.reflection:
                    # Before the pause it comes with: the model call after the person's answer reads it.
                    run.say(ChatMessage(role="system", content=check.reflection))
                stopped = _stopped_by(run, check)
                if stopped is not None:
                    return stopped
            if step.action == "final":
                trajectory.append(_triage_step(len(trajectory), step, step.answer, None))
                if not step.succeeded:
                    run.update(status=RunStatus.FAILED, output=step.answer,
                               reason=f"the agent gave up: {step.answer}"[:MAX_NOTE_CHARS])  # fmt: skip
                    return _AttemptEnd.FAILED
                run.update(status=RunStatus.COMPLETED, output=step.answer)
                return _AttemptEnd.ANSWERED
            if isinstance(self._monitor, ToolGate):
                # Asked before the tool runs: a tool that cannot be undone waits for a person here.
                gate = await self._monitor.before_tool(run.state, step)
                stopped = _stopped_by(run, gate, HeldStep(step=run.state.iterations, tool_call=step))
                if stopped is not None:
                    return stopped
            await self._call_tool(run, step, tool_results, trajectory)
        state = run.state
        raise MaxIterationsExceeded(
            f"agent {state.agent_id} gave no final answer within {state.max_iterations} iterations",
            iterations=state.iterations,
        )

    def _native_tools(self, agent_id: str) -> bool:
        """Whether this agent's steps offer its tools natively: the loop runs, it has tools, and
        every model its steps may go to takes them."""
        return (
            self.config.react_pattern
            and self.config.native_tools
            and bool(self.tools.tools)
            and self.router.supports_tools(f"{agent_id}.step")
        )

    async def _text_step(
        self, run: _Run, tracker: _Tracker, step_name: str, trajectory: list[TriageStep]
    ) -> ReactStep | None:
        """One step in the JSON step protocol; None (and the model told so) when the answer is
        not one step."""
        routed = await self._ask(run, step_name, json_schema=REACT_STEP_SCHEMA)
        run.update(iterations=run.state.iterations + 1)
        await tracker.record(routed.completion, step_name, routed.model)
        run.say(ChatMessage(role="assistant", content=routed.completion.text))
        completion = routed.completion
        try:
            step = ReactStep.model_validate(extract_json_object(completion.text))
        except (ValueError, ValidationError) as exc:
            invalid = ModelOutputInvalid("not a step", completion.text, exc, cut_off=completion.cut_off)
            trajectory.append(_triage_step(len(trajectory), None, completion.text, None))
            run.say(
                ChatMessage(
                    role="user",
                    content=f"That was not one JSON object of that form: {invalid.problem}\n{REACT_PROTOCOL}",
                )
            )
            await run.rejected(f"the answer was not one JSON object of the step's form: {invalid.problem}")
            return None
        if step.call_id:
            step = step.model_copy(update={"call_id": ""})
        await run.decided(step)
        return step

    async def _native_step(
        self, run: _Run, tracker: _Tracker, step_name: str, trajectory: list[TriageStep]
    ) -> ReactStep | None:
        """One step with the tools offered natively: the model's first tool call (the others are
        not kept, so every call in the conversation has its result), else its text as the final
        answer; None (and the model told why) when the call's arguments are no JSON object."""
        after_a_result = bool(run.state.messages) and run.state.messages[-1].role == "tool"
        choice: ToolChoice = (
            "required" if self.config.tool_choice == "required" and not after_a_result else "auto"
        )
        specs = [
            ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
            for t in self.tools.tools
        ]
        routed = await self._ask(run, step_name, tools=specs, tool_choice=choice)
        run.update(iterations=run.state.iterations + 1)
        await tracker.record(routed.completion, step_name, routed.model)
        completion = routed.completion
        if not completion.tool_calls:
            run.say(ChatMessage(role="assistant", content=completion.text))
            answer = completion.text.strip()
            if completion.cut_off or not answer:
                why = "was cut off at its output limit" if completion.cut_off else "was empty"
                trajectory.append(_triage_step(len(trajectory), None, completion.text, None))
                run.say(
                    ChatMessage(
                        role="user", content=f"Your answer {why}. Answer again, briefly, or call a tool."
                    )
                )
                await run.rejected(f"the answer {why}")
                return None
            final = ReactStep(action="final", answer=answer[:MAX_TEXT_CHARS])
            await run.decided(final)
            return final
        call = completion.tool_calls[0]
        run.say(ChatMessage(role="assistant", content=completion.text, tool_calls=[call]))
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            note = f"error: the arguments of {call.name} are not one JSON object: {call.arguments[:200]}"
            trajectory.append(_triage_step(len(trajectory), None, note, None))
            run.say(ChatMessage(role="tool", content=note, tool_call_id=call.id))
            await run.rejected(f"the arguments of {call.name[:64]} are not one JSON object")
            return None
        step = ReactStep(
            action="tool", tool=call.name[:64], arguments=arguments, call_id=call.id[:MAX_TOOL_CALL_ID_CHARS]
        )
        await run.decided(step)
        return step

    async def _ask(
        self,
        run: _Run,
        step_name: str,
        *,
        json_schema: dict[str, Any] | None = None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice = "auto",
    ) -> RoutedCompletion:
        """The model call of the run's next step; while the run is watched, its text is passed
        on as it arrives (`TextPiece`), and a model's pieces that a fallback made void are
        said to be (`TextDiscarded`)."""
        if not run.events.watched:
            return await self.router.complete(
                step_name, run.state.messages, json_schema=json_schema, tools=tools, tool_choice=tool_choice
            )
        number = run.state.iterations + 1
        writer: ModelSpec | None = None

        async def on_text(piece: str, model: ModelSpec) -> None:
            nonlocal writer
            if writer is not None and writer.model_id != model.model_id:
                await run.events.emit(TextDiscarded(step=number, model=writer.model_id))
            writer = model
            await run.events.emit(TextPiece(step=number, text=piece, model=model.model_id))

        routed = await self.router.complete(
            step_name,
            run.state.messages,
            json_schema=json_schema,
            tools=tools,
            tool_choice=tool_choice,
            on_text=on_text,
        )
        if writer is not None and writer.model_id != routed.model.model_id:
            await run.events.emit(TextDiscarded(step=number, model=writer.model_id))
        return routed

    async def _call_tool(
        self, run: _Run, step: ReactStep, tool_results: list[ToolResult], trajectory: list[TriageStep]
    ) -> None:
        result = await self.tools.execute(ToolCall(name=step.tool or "(none)", arguments=step.arguments))
        tool_results.append(result)
        trajectory.append(_triage_step(len(trajectory), step, result.output, result))
        if step.call_id:
            run.say(ChatMessage(role="tool", content=result.for_model(), tool_call_id=step.call_id))
        else:
            run.say(tool_result_message(result))
        run.update(
            tool_calls=run.state.tool_calls + 1,
            tools_called=[*run.state.tools_called, result.name][:MAX_TOOLS_KEPT],
        )
        await run.events.emit(ToolCalled(step=max(1, run.state.iterations), result=result))

    async def _checkpoint(self, run: _Run) -> _AttemptEnd | None:
        """The checkpoint before the next step's model call: the runner's, the run's and the
        monitor's triggers; None when the step may run (a warning is logged first)."""
        number = run.state.iterations + 1
        if run.cleared_step == number:  # a person let this step run
            run.cleared_step = None
            return None
        state = run.state
        triggers = [*self.config.checkpoints, *state.checkpoints]
        request = CheckpointRequest(
            step=number,
            prompt=_step_prompt(state)[:MAX_TEXT_CHARS],
            retry_count=len(state.attempt_history),
            triggers=triggers,
        )
        if isinstance(self._monitor, StepCheckpoints):
            check = await self._monitor.before_step(state, request)
        elif triggers:
            check = await self._checkpoint_here(state, request)
        else:
            return None
        if check.action == "continue" and check.reason:
            log.warning(
                "a checkpoint warns before a step",
                extra={"agent_id": state.agent_id, "session_id": state.session_id, "step": number,
                       "reason": check.reason[:MAX_NOTE_CHARS]},
            )  # fmt: skip
            trace.get_current_span().add_event(
                "checkpoint", {"agora.step": number, "agora.reason": check.reason[:MAX_NOTE_CHARS]}
            )
        return _stopped_by(run, check, HeldStep(step=number))

    async def _checkpoint_here(self, state: AgentState, request: CheckpointRequest) -> StepCheck:
        """The runner's own triggers, without a monitor that evaluates them: one that requires
        confirmation parks the step with the escalator (or, with none, ends the run: the step
        may not run unconfirmed)."""
        context = CheckpointContext(
            job_id=state.session_id,
            step=request.step,
            prompt=request.prompt,
            retry_count=request.retry_count,
        )
        verdict = evaluate_checkpoint(request.triggers, context)
        if verdict.gate is CheckpointGate.NONE:
            return StepCheck()
        if verdict.gate is CheckpointGate.WARN:
            return StepCheck(reason=verdict.message)
        if self._escalator is None:
            return StepCheck(
                action="abort",
                reason=f"{verdict.message}: a person must confirm the step, and this runner has no escalator",
            )
        escalation_id = f"{state.session_id}.checkpoint-{request.step}"
        parked = ParkRequest(
            waiting_party=WaitingParty(kind=WaitingPartyKind.SESSION, id=state.session_id),
            context=context.model_copy(update={"trigger": verdict.trigger}),
            who=f"agent:{state.agent_id}",
            why=verdict.message,
        )
        await self._escalator.park(escalation_id, parked)
        return StepCheck(action="pause", escalation_id=escalation_id, reason=verdict.message)

    async def _carry_out(
        self, held: _Held, run: _Run, tool_results: list[ToolResult], trajectory: list[TriageStep]
    ) -> _AttemptEnd | None:
        """The held step, as the person decided; None when the run goes on to its next step."""
        verdict = _verdict(held.decision)
        step, call = held.step.step, held.step.tool_call
        what = f"tool {call.tool or '(none)'}" if call is not None else f"step {step}"
        if verdict == "abort":
            run.update(status=RunStatus.FAILED, reason=f"aborted by a person before {what}")
            return _AttemptEnd.STOPPED
        if call is not None:
            if verdict == "run":
                await self._call_tool(run, call, tool_results, trajectory)
                return None
            why = {"skip": "a person skipped it", "modify": "a person gave a new prompt instead"}.get(
                verdict or "", "no person said it may run"
            )
            run.say(ChatMessage(role="user", content=f"The call of {what} did not run: {why}."))
            return None
        if verdict == "skip":
            run.update(iterations=run.state.iterations + 1)  # the step is used up without running
            run.say(ChatMessage(role="user", content=f"A person skipped {what}; go on with the next step."))
            return None
        run.cleared_step = step  # it runs (with the new prompt, if one was given), unchecked again
        return None

    async def _save(self, state: AgentState) -> None:
        await self.state_store.save(state.model_copy(update={"updated_at": datetime.now(UTC)}))


def _text_step_schema() -> dict[str, Any]:
    """The schema of a step in text: a native call's id is not the model's to write."""
    schema = ReactStep.model_json_schema()
    del schema["properties"]["call_id"]
    return schema


REACT_STEP_SCHEMA: dict[str, Any] = _text_step_schema()
NATIVE_TOOLS_PROTOCOL = """Call a tool when it helps; its result comes back to you.
When you have the answer, give it as plain text, without calling a tool."""
MAX_TOOLS_KEPT = MAX_ITEMS
"""Tool names a run's state keeps (an outcome carries at most as many)."""


def react_protocol(tools: ToolExecutor) -> str:
    """What the model is told of the step protocol and the tools it can call."""
    return f"Tools you can call:\n{tools.catalogue()}\n\n{REACT_PROTOCOL}"


def tool_result_message(result: ToolResult) -> ChatMessage:
    """A tool's result as the model reads it, the next user message."""
    return ChatMessage(role="user", content=f"Result of tool {result.name}: {result.for_model()}")


def parse_step(text: str) -> ReactStep | None:
    """The model's answer as one step of the protocol (None: it is not one)."""
    return _parse_step(text)


def _parse_step(text: str) -> ReactStep | None:
    try:
        return ReactStep.model_validate(extract_json_object(text))
    except (ValueError, ValidationError, ModelOutputInvalid):
        return None


class _AttemptEnd(StrEnum):
    ANSWERED = "answered"
    FAILED = "failed"
    """The agent gave up (or, raised as `MaxIterationsExceeded`, ran out of iterations)."""
    PAUSED = "paused"
    STOPPED = "stopped"
    """The step monitor ended the run."""


def _triage_step(index: int, step: ReactStep | None, output: str, result: ToolResult | None) -> TriageStep:
    """One step of an attempt as failure triage reads it."""
    if step is None:
        return TriageStep(index=index, action="unparsable answer", llm_output=output[:MAX_NOTE_CHARS],
                          error="the answer was not one step of the protocol")  # fmt: skip
    return TriageStep(
        index=index,
        action=f"{step.action}: {step.thought}"[:MAX_NOTE_CHARS],
        tool_called=step.tool or None if step.action == "tool" else None,
        tool_input=step.arguments or None,
        tool_output=output[:MAX_NOTE_CHARS] if result is not None else None,
        llm_output=step.answer[:MAX_NOTE_CHARS] if result is None else None,
        error=result.error if result is not None else None,
        metadata={"confidence": step.confidence},
    )


@dataclass(frozen=True)
class _Held:
    """A held step, and what a person decided of it (None: not known)."""

    step: HeldStep
    decision: CheckpointResponse | EscalationResponse | None


_Verdict = Literal["run", "skip", "abort", "modify"]


def _verdict(decision: CheckpointResponse | EscalationResponse | None) -> _Verdict | None:
    """What a decision does to a held step (None: unknown, or not the runner's to apply: a
    reassign is the agent app's)."""
    if decision is None:
        return None
    action = str(decision.action)
    if action in ("abort", "skip"):
        return "abort" if action == "abort" else "skip"
    if decision.modified_prompt is not None:  # modify_prompt, or retry with a prompt
        return "modify"
    return "run" if action in ("proceed", "retry") else None


def _stopped_by(run: _Run, check: StepCheck, held: HeldStep | None = None) -> _AttemptEnd | None:
    """The run paused (holding `held`, if the check came before it ran) or stopped by a
    check; None when it goes on."""
    if check.action == "pause":
        run.update(status=RunStatus.WAITING_FOR_HUMAN, escalation_id=check.escalation_id, held=held,
                   reason=check.reason[:MAX_NOTE_CHARS])  # fmt: skip
        return _AttemptEnd.PAUSED
    if check.action == "abort":
        run.update(
            status=RunStatus.FAILED, reason=(check.reason or "stopped by the step monitor")[:MAX_NOTE_CHARS]
        )
        return _AttemptEnd.STOPPED
    return None


def _step_prompt(state: AgentState) -> str:
    """What the next step is asked: the newest user message (the task, a tool's result, a
    person's answer)."""
    return next((m.content for m in reversed(state.messages) if m.role == "user"), "")


def _budget_left(state: AgentState) -> float | None:
    return None if state.budget_usd is None else max(0.0, state.budget_usd - state.cost_usd)


class _Events:
    """A run's events on their way to its sink, if it has one; a sink that fails is let go."""

    def __init__(self, sink: RunEventSink | None, agent_id: str, session_id: str) -> None:
        self._sink = sink
        self._agent_id = agent_id
        self._session_id = session_id

    @property
    def watched(self) -> bool:
        return self._sink is not None

    async def emit(self, event: RunEvent) -> None:
        if self._sink is None:
            return
        try:
            await self._sink(event)
        except Exception as exc:  # watching a run never changes it
            self._sink = None
            log.warning(
                "a run's events stopped: their sink failed",
                extra={"agent_id": self._agent_id, "session_id": self._session_id, "reason": repr(exc)[:300]},
            )


def _failure_reason(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:MAX_NOTE_CHARS]


class _Run:
    """The state of a run under way, updated step by step (what a failure saves), and where its
    events go."""

    def __init__(self, state: AgentState, events: _Events | None = None) -> None:
        self.state = state
        self.events = events or _Events(None, state.agent_id, state.session_id)
        self.cleared_step: int | None = None
        """The step a person let run after its checkpoint held it: not checked again."""

    async def decided(self, step: ReactStep) -> None:
        """The step the model just made (the latest iteration)."""
        await self.events.emit(StepDecided(step=self.state.iterations, decision=step))

    async def rejected(self, reason: str) -> None:
        """The latest iteration's answer was no step."""
        await self.events.emit(StepRejected(step=self.state.iterations, reason=reason))

    def update(self, **fields: Any) -> None:
        self.state = self.state.model_copy(update=fields)

    def say(self, message: ChatMessage) -> None:
        self.update(messages=[*self.state.messages, message])


class _Tracker:
    """A run's cost tracker, and the tokens and cost it adds to the state's earlier turns."""

    def __init__(self, cost: CostTracker) -> None:
        self.cost = cost

    async def record(self, completion: Any, step_name: str, model: Any) -> None:
        await self.cost.record(completion.usage, step_name=step_name, model_spec=model)

    def into(self, state: AgentState) -> AgentState:
        summary = self.cost.summary()
        return state.model_copy(
            update={
                "cost_usd": state.cost_usd + summary.total_cost_usd,
                "input_tokens": state.input_tokens + summary.input_tokens,
                "output_tokens": state.output_tokens + summary.output_tokens,
            }
        )


def transcript(messages: Sequence[ChatMessage]) -> str:
    return "\n".join(f"{m.role}: {m.content}" for m in messages)
