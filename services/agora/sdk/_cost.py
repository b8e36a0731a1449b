"""Cost tracking per agent, session, step and model, with a hard budget.

`record` adds a call's tokens and cost, publishes a `CostEvent` on `agora.cost.events` (for a
call that cost something), and only then checks the budget, so the spending that passed the
budget is always announced before `BudgetExceeded` stops the run. `check_budget` is the
pre-flight check before a call.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from agora.core import topics
from agora.core.errors import BudgetExceeded
from agora.core.messages import CostEvent
from agora.core.topics import Channel
from agora.llm import Usage
from agora.sdk._router import ModelSpec

__all__ = ["CostSummary", "CostTracker", "EventPublisher", "StepCost"]

MAX_STEPS_KEPT = 1_000
"""Per-step entries a summary keeps (the oldest are dropped beyond it; totals stay whole)."""


class EventPublisher(Protocol):
    """What publishes the cost events: the app's `Publisher` (`agora.runtime.pubsub`)."""

    async def publish(self, channel: Channel[Any], payload: Any, *, message_id: str | None = None) -> str: ...


class StepCost(BaseModel):
    """One model call's tokens and cost."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step_name: str
    model_id: str
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cost_usd: float = Field(ge=0.0)


class CostSummary(BaseModel):
    """What a tracker has added up: totals, USD by model, the steps, and the budget left."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total_cost_usd: float = 0.0
    total_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    by_model: dict[str, float] = Field(default_factory=dict)
    by_step: list[StepCost] = Field(default_factory=list)
    budget_usd: float | None = None
    budget_remaining_usd: float | None = None


class CostTracker:
    """Adds up one agent session's model calls against an optional budget (None: unlimited)."""

    def __init__(
        self,
        agent_id: str,
        session_id: str,
        budget_usd: float | None = None,
        publisher: EventPublisher | None = None,
    ) -> None:
        if budget_usd is not None and budget_usd < 0:
            raise ValueError("a budget is zero or more")
        self.agent_id = agent_id
        self.session_id = session_id
        self.budget_usd = budget_usd
        self._publisher = publisher
        self._steps: list[StepCost] = []
        self._by_model: dict[str, float] = {}
        self._total = 0.0
        self._input = 0
        self._output = 0
        self._recorded = 0

    @property
    def total_cost_usd(self) -> float:
        return self._total

    async def record(self, usage: Usage, *, step_name: str, model_spec: ModelSpec) -> StepCost:
        """Add one call; publish its cost event; then raise `BudgetExceeded` if the
        session's spending passed the budget."""
        step = StepCost(
            step_name=step_name,
            model_id=model_spec.model_id,
            input_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
            cost_usd=model_spec.cost_usd(usage.prompt_tokens, usage.completion_tokens),
        )
        self._recorded += 1
        self._steps = [*self._steps, step][-MAX_STEPS_KEPT:]
        self._by_model[step.model_id] = self._by_model.get(step.model_id, 0.0) + step.cost_usd
        self._total += step.cost_usd
        self._input += step.input_tokens
        self._output += step.output_tokens
        if self._publisher is not None and step.cost_usd > 0:  # a call that cost nothing is not news
            event = CostEvent(
                agent_id=self.agent_id,
                session_id=self.session_id,
                step_name=step_name[:200],
                model_id=step.model_id[:200],
                input_tokens=step.input_tokens,
                output_tokens=step.output_tokens,
                cost_usd=step.cost_usd,
                session_cost_usd=self._total,
                budget_usd=self.budget_usd,
            )
            message_id = f"cost:{self.agent_id}:{self.session_id}:{self._recorded}"
            await self._publisher.publish(topics.COST_EVENTS, event, message_id=message_id)
        if self.budget_usd is not None and self._total > self.budget_usd:
            raise BudgetExceeded(
                f"{self.agent_id} spent ${self._total:.6f} of its ${self.budget_usd:.6f} budget "
                f"(session {self.session_id})",
                spent_usd=self._total,
                budget_usd=self.budget_usd,
            )
        return step

    def check_budget(self, estimated_cost_usd: float = 0.0) -> None:
        """Before a call: raise `BudgetExceeded` if what is spent plus the call's estimate
        passes the budget (a budget already spent in full refuses any further call)."""
        if self.budget_usd is None:
            return
        planned = self._total + max(0.0, estimated_cost_usd)
        if planned > self.budget_usd or (self._total >= self.budget_usd and self._recorded):
            raise BudgetExceeded(
                f"{self.agent_id}: the next call (about ${estimated_cost_usd:.6f}) would pass the "
                f"budget of ${self.budget_usd:.6f} (spent ${self._total:.6f})",
                spent_usd=self._total,
                budget_usd=self.budget_usd,
            )

    def summary(self) -> CostSummary:
        remaining = None if self.budget_usd is None else max(0.0, self.budget_usd - self._total)
        return CostSummary(
            total_cost_usd=self._total,
            total_tokens=self._input + self._output,
            input_tokens=self._input,
            output_tokens=self._output,
            by_model=dict(self._by_model),
            by_step=list(self._steps),
            budget_usd=self.budget_usd,
            budget_remaining_usd=remaining,
        )
