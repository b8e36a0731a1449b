"""The market's own estimates of the candidates that do not bid for themselves.

An agent without an app of its own (or whose app could not bid in time) is estimated by the
market's model. The reference design asks the model once per candidate, so a task with five
candidates costs five calls before any work starts; here the candidates of one task that need
an estimate at the same moment are rated together, in one call (`ESTIMATES_PER_CALL` at most
per call, so a prompt stays within a small model's context).

Real models answer out of schema, cut off, or in prose. An answer that is not a valid rating
is asked again once, with what was wrong (`ESTIMATE_ATTEMPTS`); then each candidate it does not
rate gets a `NoEstimate` with the reason, and the market gives it the profile-based fallback
bid, marked with that reason. Every call made for a task is counted in its `ModelBill`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, RootModel

from agora.core.limits import MAX_NOTE_CHARS
from agora.core.market import ModelBill, TaskSpec
from agora.core.models import CapabilityProfile
from agora.llm import ChatMessage, MeteredModel, ModelClient, ModelError, ModelOutputInvalid, complete_json
from agora.runtime.batching import MicroBatcher

ESTIMATES_PER_CALL = 8
"""Candidates rated in one call at most; a task with more is rated in several, side by side."""

RATING_TOKENS = 32
"""Output tokens allowed per candidate rated (and once more for the answer's frame): a rating
is about 20 tokens, so a model that rambles is cut off rather than waited for."""

ESTIMATE_ATTEMPTS = 2
"""Calls for one rating: the first, and one more that tells the model what was wrong."""


class Rating(BaseModel):
    """The model's estimate for one candidate: its chance in percent (a whole number, so a
    server that turns the schema into a grammar holds it to 0-100) and the steps it needs. The
    cost follows from the candidate's step price (an estimate quotes effort; the market knows
    prices). No rationale is asked for: it would cost more tokens than the numbers, and small
    models fill it with whatever its length allows."""

    success_percent: int = Field(ge=0, le=100)
    steps: int = Field(ge=1, le=100)


Ratings = RootModel[dict[str, Rating]]
"""What one rating call answers: a rating per candidate, by agent id."""


@dataclass(frozen=True)
class CandidateEstimate:
    agent_id: str
    success_prob: float
    estimated_steps: int
    rationale: str


@dataclass(frozen=True)
class NoEstimate:
    """Why a candidate has no estimate from the market's model."""

    reason: str


RATING_INSTRUCTION = (
    "You rate AI agents bidding for a task in a market. For every candidate, estimate "
    "honestly its chance of completing the task in percent and the steps it needs. "
    "Rate every candidate, by its agent id."
)


RATING_SCHEMA = Rating.model_json_schema()
"""Built once: building a schema costs more than a decision's other work on the offline model."""


def ratings_schema(profiles: Sequence[CapabilityProfile]) -> dict[str, Any]:
    """The schema of one call's answer: exactly these candidates, each rated."""
    return {
        "title": "Ratings",
        "type": "object",
        "properties": {p.agent_id: RATING_SCHEMA for p in profiles},
        "required": [p.agent_id for p in profiles],
        "additionalProperties": False,
    }


def _estimate(profile: CapabilityProfile, rating: Rating) -> CandidateEstimate:
    return CandidateEstimate(
        agent_id=profile.agent_id,
        success_prob=rating.success_percent / 100,
        estimated_steps=rating.steps,
        rationale="estimated by the market's model",
    )


def rating_prompt(spec: TaskSpec, profiles: Sequence[CapabilityProfile]) -> list[ChatMessage]:
    budget = f"${spec.budget_usd:.4f}" if spec.budget_usd is not None else "no fixed budget"
    candidates = "\n".join(
        f"- {p.agent_id}: {p.agent_name}; skills {', '.join(p.skill_tags)}; "
        f"${p.cost_per_step_usd:.4f} per step; at most {p.max_steps} steps"
        for p in profiles
    )
    return [
        ChatMessage(
            role="system",
            content=RATING_INSTRUCTION,
        ),
        ChatMessage(
            role="user",
            content=(
                f"Task: {spec.description}\n"
                f"Required skills: {', '.join(spec.required_skills)}\n"
                f"Preferred skills: {', '.join(spec.preferred_skills) or 'none'}\nBudget: {budget}\n"
                f"Candidates:\n{candidates}"
            ),
        ),
    ]


class MarketEstimates:
    """The estimates of one task's candidates: those asked for at the same moment share a call.
    `bill` counts every model call made for them."""

    def __init__(
        self,
        model: ModelClient,
        spec: TaskSpec,
        *,
        per_call: int = ESTIMATES_PER_CALL,
        tokens_per_candidate: int = RATING_TOKENS,
    ) -> None:
        if not 1 <= per_call <= ESTIMATES_PER_CALL:
            raise ValueError(f"per_call must be 1 to {ESTIMATES_PER_CALL}")
        self._model = model
        self._spec = spec
        self._per_call = per_call
        self._tokens = tokens_per_candidate
        self.bill = ModelBill()
        # The candidates' solicitations start together, each a few awaits behind the other.
        self._ratings: MicroBatcher[CapabilityProfile, CandidateEstimate | NoEstimate] = MicroBatcher(
            self._rate_all, "market estimates", wait_a_turn=True
        )

    async def estimate(self, profile: CapabilityProfile) -> CandidateEstimate | NoEstimate:
        return await self._ratings.submit(profile)

    async def _rate_all(self, profiles: list[CapabilityProfile]) -> list[CandidateEstimate | NoEstimate]:
        groups = [profiles[i : i + self._per_call] for i in range(0, len(profiles), self._per_call)]
        rated = await asyncio.gather(*(self._rate(group) for group in groups))
        return [answer for answers in rated for answer in answers]

    async def _rate(self, profiles: list[CapabilityProfile]) -> list[CandidateEstimate | NoEstimate]:
        metered = MeteredModel(self._model)
        try:
            rated, _ = await complete_json(
                metered,
                rating_prompt(self._spec, profiles),
                Ratings,
                json_schema=ratings_schema(profiles),
                max_tokens=self._tokens * (len(profiles) + 1),
                attempts=ESTIMATE_ATTEMPTS,
            )
        except ModelOutputInvalid as exc:
            reason = f"no estimate after {ESTIMATE_ATTEMPTS} attempt(s): {exc}: {exc.problem}"
        except ModelError as exc:  # unreachable: asking again would not help
            reason = f"no estimate: {exc}"
        else:
            left_out = NoEstimate(reason="the market's model did not rate this agent")
            return [_estimate(p, rated.root[p.agent_id]) if p.agent_id in rated.root else left_out
                    for p in profiles]  # fmt: skip
        finally:
            self._bill(metered)
        return [NoEstimate(reason=f"the market's model gave {reason}"[:MAX_NOTE_CHARS])] * len(profiles)

    def _bill(self, metered: MeteredModel) -> None:
        self.bill = ModelBill(
            model_calls=self.bill.model_calls + metered.calls,
            prompt_tokens=self.bill.prompt_tokens + metered.prompt_tokens,
            completion_tokens=self.bill.completion_tokens + metered.completion_tokens,
            model_seconds=round(self.bill.model_seconds + metered.seconds, 6),
        )
