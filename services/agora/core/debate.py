"""Multi-agent debate, the pure part: positions, clustering, convergence, the three
aggregations and the act-vs-escalate rule.

Several debaters answer a question; in later rounds each sees its peers' previous answers.
Answers are grouped by meaning with one clustering (`cluster_positions`: Jaccard similarity of
their word sets, `SIMILARITY_THRESHOLD`); the convergence score of a round is the share of
debaters in its largest cluster; a round at or above `convergence_threshold` ends the debate
early. The final round is aggregated (`aggregate`): MAJORITY_VOTE takes the largest cluster
and its most confident member, WEIGHTED_VOTE scores each cluster by the sum of weight *
confidence of its members, JUDGE leaves the synthesis to a judge model (the caller asks it).
A debate whose final convergence is below `escalate_threshold` is for a person to decide
(`escalate_to_human`).

Choices made as users would expect them:

* words are lower-cased runs of letters and digits; two answers are in one cluster when the
  Jaccard similarity of their word sets is at least 0.5 to the cluster's first answer
  (single pass, in debater order, so the clustering is deterministic); two empty answers are
  alike;
* ties: MAJORITY_VOTE prefers the larger cluster, then the higher summed confidence, then the
  cluster whose first member comes first; WEIGHTED_VOTE prefers the higher score, then the
  larger cluster, then the earlier one; the representative is the most confident member, the
  earlier on ties;
* the aggregated confidence is the winning cluster's share of the vote: MAJORITY_VOTE the mean
  confidence of its members times its share of the debaters; WEIGHTED_VOTE its score over the
  sum of every debater's weight;
* strategies and statuses are upper-case strings like every status in Agora; the routing
  decision is `"debate"` or `"single_agent"` (lower case: it names a route, not a status).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agora.core.errors import AgoraError
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.limits import (
    ID_PATTERN,
    MAX_NOTE_CHARS,
    MAX_PAGE_SIZE,
    MAX_TEXT_CHARS,
    IdRef,
    Name,
    NameRef,
    Note,
    Text,
    Traceparent,
)
from agora.core.planning import TokenUsage
from agora.core.similarity import greedy_clusters

SIMILARITY_THRESHOLD = 0.5
"""Jaccard similarity of word sets at or above which two answers count as the same position."""
MAX_DEBATERS = 8
MAX_ROUNDS = 10

DebaterId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


class AggregationStrategy(StrEnum):
    MAJORITY_VOTE = "MAJORITY_VOTE"
    """Largest cluster; its highest-confidence member is the answer."""
    WEIGHTED_VOTE = "WEIGHTED_VOTE"
    """Clusters scored by the sum of debater weight * confidence."""
    JUDGE = "JUDGE"
    """A separate judge model synthesizes all positions."""


RoutingDecision = Literal["debate", "single_agent"]


class DebaterConfig(BaseModel):
    """One debater: its model (backend, model id, temperature), persona and vote weight."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    debater_id: DebaterId
    backend: Literal["offline", "dapr", "openai"] = Field(
        default="offline", description="The model backend (as AGORA_MODEL_BACKEND)."
    )
    model_id: str = Field(default="", max_length=256, description="The model; empty: the backend's default.")
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    role_hint: Note = Field(default="", description="An optional persona, e.g. a skeptical devil's advocate.")
    weight: float = Field(default=1.0, gt=0.0, le=100.0, description="Vote weight for WEIGHTED_VOTE.")
    usd_per_1k_tokens: float = Field(
        default=0.0,
        ge=0.0,
        le=1000.0,
        description="The model's price in USD per 1,000 tokens, for the cost budget.",
    )


class DebateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    debaters: list[DebaterConfig] = Field(min_length=2, max_length=MAX_DEBATERS)
    max_rounds: int = Field(default=3, ge=1, le=MAX_ROUNDS)
    aggregation: AggregationStrategy = AggregationStrategy.WEIGHTED_VOTE
    convergence_threshold: float = Field(
        default=0.8, ge=0.0, le=1.0, description="Stop early when this share agrees."
    )
    adaptive_routing: bool = Field(
        default=True, description="Skip the debate when the routing model is confident."
    )
    routing_confidence_threshold: float = Field(default=0.85, ge=0.0, le=1.0)
    routing_debater: DebaterConfig | None = Field(
        default=None, description="The model asked first (adaptive routing); None: the first debater."
    )
    judge_config: DebaterConfig | None = Field(default=None, description="The judge model, for JUDGE.")
    cost_budget_usd: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    escalate_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    gate: Literal["threshold", "conformal"] = Field(
        default="threshold",
        description="How to choose between acting and escalating: the convergence threshold "
        "(`escalate_threshold`), or the conformal gate calibrated on recorded debate outcomes.",
    )
    conformal_alpha: float = Field(
        default=0.1, gt=0.0, lt=1.0, description="The conformal gate's error rate (alpha)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> DebateConfig:
        ids = [d.debater_id for d in self.debaters]
        if len(set(ids)) != len(ids):
            raise ValueError("debater_id must be unique among the debaters")
        if self.aggregation is AggregationStrategy.JUDGE and self.judge_config is None:
            raise ValueError("JUDGE aggregation needs a judge_config")
        return self

    @property
    def router(self) -> DebaterConfig:
        return self.routing_debater or self.debaters[0]


class Position(BaseModel):
    """One debater's answer in one round."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    debater_id: DebaterId
    answer: Text
    reasoning: Text = ""
    confidence: float = Field(ge=0.0, le=1.0)
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float = Field(default=0.0, ge=0.0)


class DebateRound(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    round_number: int = Field(ge=1)
    positions: list[Position] = Field(max_length=MAX_DEBATERS)
    clusters: list[Annotated[list[DebaterId], Field(max_length=MAX_DEBATERS)]] = Field(
        max_length=MAX_DEBATERS, description="The debaters whose answers agree, largest first."
    )
    convergence_score: float = Field(ge=0.0, le=1.0)


class CandidateAnswer(BaseModel):
    answer: str
    probability: float = Field(ge=0.0, le=1.0)


class ConformalDecision(BaseModel):
    """The conformal gate's verdict on a debate (`agora.core.conformal`)."""

    act: bool
    answer: Text | None = Field(default=None, description="The one answer in the set, when it acts.")
    prediction_set: list[Text] = Field(
        max_length=MAX_DEBATERS + 1,
        description="The candidate answers the gate could not rule out (at most one per group of agreeing "
        "debaters, and one for an answer no debater gave).",
    )
    quantile: float | None = Field(
        description="The calibrated score bound; None: unbounded (too few debates)."
    )
    calibration_size: int
    reason: Note


class DebateResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    final_answer: Text = Field(description="Aggregated winning answer.")
    final_reasoning: Text = Field(description="Reasoning from the winning position.")
    confidence: float = Field(ge=0.0, le=1.0, description="Aggregated confidence (0-1).")
    escalate_to_human: bool = Field(description="True when final_convergence_score < escalate_threshold.")
    rounds: list[DebateRound] = Field(max_length=MAX_ROUNDS, description="Full per-round transcript.")
    routing_decision: RoutingDecision = Field(description='"debate" or "single_agent".')
    total_rounds_run: int = Field(ge=0, description="Rounds actually completed.")
    converged: bool = Field(description="Whether early stopping triggered.")
    final_convergence_score: float = Field(
        ge=0.0, le=1.0, description="Convergence score in the final round."
    )
    total_token_usage: TokenUsage = Field(description="Cumulative tokens across all rounds.")
    total_cost_usd: float = Field(ge=0.0, description="Total spend.")
    duration_seconds: float = Field(ge=0.0, description="Wall-clock time.")
    budget_exhausted: bool = Field(default=False, description="Rounds stopped because the budget was spent.")
    gate_decision: ConformalDecision | None = Field(
        default=None, description="The conformal gate's verdict, when the debate used it."
    )


# -- clustering and convergence --------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def cluster_positions(
    positions: Sequence[Position], threshold: float = SIMILARITY_THRESHOLD
) -> list[list[int]]:
    """Indices of `positions` grouped by answer (`greedy_clusters` over their `words`): each
    joins the first cluster whose first answer is at least `threshold` similar to it, else
    starts one. Largest first (stable)."""
    clusters = greedy_clusters([words(p.answer) for p in positions], threshold)
    return sorted(clusters, key=len, reverse=True)


def debate_round(round_number: int, positions: list[Position]) -> DebateRound:
    clusters = cluster_positions(positions)
    share = len(clusters[0]) / len(positions) if positions else 0.0
    return DebateRound(
        round_number=round_number,
        positions=positions,
        clusters=[[positions[i].debater_id for i in cluster] for cluster in clusters],
        convergence_score=share,
    )


def converged(debate: DebateRound, config: DebateConfig) -> bool:
    return debate.convergence_score >= config.convergence_threshold


def escalate_to_human(final_convergence_score: float, config: DebateConfig) -> bool:
    """Act when the debaters agree enough; otherwise a person decides."""
    return final_convergence_score < config.escalate_threshold


# -- aggregation ---------------------------------------------------------------------------------


class Aggregate(BaseModel):
    answer: Text
    reasoning: Text
    confidence: float = Field(ge=0.0, le=1.0)
    debater_id: str | None = Field(default=None, description="Whose position won (None: the judge's own).")


def aggregate(debate: DebateRound, config: DebateConfig) -> Aggregate:
    """MAJORITY_VOTE or WEIGHTED_VOTE over the round's positions (JUDGE is a model call: see
    `judge_prompt`)."""
    if config.aggregation is AggregationStrategy.JUDGE:
        raise ValueError("JUDGE aggregation asks the judge model; use judge_prompt and the judge's answer")
    positions = debate.positions
    if not positions:
        raise ValueError("nothing to aggregate: the round has no positions")
    weights = {d.debater_id: d.weight for d in config.debaters}
    clusters = cluster_positions(positions)
    order = {id(c): n for n, c in enumerate(sorted(clusters, key=lambda c: c[0]))}

    def summed_confidence(cluster: list[int]) -> float:
        return sum(positions[i].confidence for i in cluster)

    def score(cluster: list[int]) -> float:
        return sum(weights.get(positions[i].debater_id, 1.0) * positions[i].confidence for i in cluster)

    if config.aggregation is AggregationStrategy.MAJORITY_VOTE:
        winner = min(clusters, key=lambda c: (-len(c), -summed_confidence(c), order[id(c)]))
        confidence = summed_confidence(winner) / len(positions)  # mean confidence * share
    else:
        winner = min(clusters, key=lambda c: (-score(c), -len(c), order[id(c)]))
        total_weight = sum(weights.get(p.debater_id, 1.0) for p in positions)
        confidence = score(winner) / total_weight if total_weight else 0.0
    best = min(winner, key=lambda i: (-positions[i].confidence, i))
    chosen = positions[best]
    return Aggregate(
        answer=chosen.answer,
        reasoning=chosen.reasoning,
        confidence=min(1.0, max(0.0, confidence)),
        debater_id=chosen.debater_id,
    )


def transcript(debate: DebateRound) -> str:
    """The round's positions as a peer (or the judge) reads them."""
    return "\n".join(
        f"- {p.debater_id} (confidence {p.confidence:.2f}): {p.answer}"
        + (f" Because: {p.reasoning[:MAX_NOTE_CHARS]}" if p.reasoning else "")
        for p in debate.positions
    )


def debate_result(
    rounds: list[DebateRound],
    chosen: Aggregate,
    config: DebateConfig,
    *,
    duration_seconds: float,
    budget_exhausted: bool = False,
    extra_usage: Sequence[TokenUsage] = (),
    extra_cost_usd: float = 0.0,
) -> DebateResult:
    """The result of a debate that ran `rounds` (routing and judge calls in `extra_*`)."""
    final = rounds[-1].convergence_score if rounds else 0.0
    usage = sum((p.token_usage for r in rounds for p in r.positions), TokenUsage())
    usage = sum(extra_usage, usage)
    cost = sum(p.cost_usd for r in rounds for p in r.positions) + extra_cost_usd
    return DebateResult(
        final_answer=chosen.answer,
        final_reasoning=chosen.reasoning,
        confidence=chosen.confidence,
        escalate_to_human=escalate_to_human(final, config),
        rounds=rounds,
        routing_decision="debate",
        total_rounds_run=len(rounds),
        converged=bool(rounds) and converged(rounds[-1], config),
        final_convergence_score=final,
        total_token_usage=usage,
        total_cost_usd=cost,
        duration_seconds=duration_seconds,
        budget_exhausted=budget_exhausted,
    )


def single_agent_result(routed: Position, *, duration_seconds: float) -> DebateResult:
    """The result when adaptive routing skipped the debate: the routing model's confident answer."""
    return DebateResult(
        final_answer=routed.answer,
        final_reasoning=routed.reasoning,
        confidence=routed.confidence,
        escalate_to_human=False,
        rounds=[],
        routing_decision="single_agent",
        total_rounds_run=0,
        converged=False,
        final_convergence_score=1.0,
        total_token_usage=routed.token_usage,
        total_cost_usd=routed.cost_usd,
        duration_seconds=duration_seconds,
    )


# -- the debate service's contracts -----------------------------------------------------------------

MAX_DEBATE_ID_CHARS = 200
MAX_RETRIES_BY_PERSON = 5
"""Debates a person may ask for again (retry) before the next retry is refused."""

DebateId = Annotated[str, Field(min_length=1, max_length=MAX_DEBATE_ID_CHARS, pattern=ID_PATTERN)]


class NotDecidable(AgoraError):
    """A debate cannot be labelled with its right answer: it has not ended with a final round."""

    code = "NOT_DECIDABLE"
    http_status = 409


class UnusableModel(AgoraError):
    """A debater's model cannot be used here (e.g. the openai backend without a model id)."""

    code = "UNUSABLE_MODEL"
    http_status = 422


class DebateState(StrEnum):
    RUNNING = "RUNNING"
    WAITING_FOR_HUMAN = "WAITING_FOR_HUMAN"
    """The debaters did not agree enough; a person decides (`escalation_id`)."""
    COMPLETED = "COMPLETED"
    ABORTED = "ABORTED"
    FAILED = "FAILED"
    """The run broke down for a reason the service did not foresee; `reason` says why."""


FINAL_DEBATE_STATES = frozenset({DebateState.COMPLETED, DebateState.ABORTED, DebateState.FAILED})


class AnswerSource(StrEnum):
    DEBATE = "debate"
    SINGLE_AGENT = "single_agent"
    PERSON = "person"


class DebateSubmission(BaseModel):
    """`PUT /v1/debates/{id}`: the question and how to debate it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: Text = Field(min_length=1)
    config: DebateConfig


class DebateRequest(DebateSubmission):
    """Topic `agora.debates`: a submission with its debate id (the workflow instance id)."""

    debate_id: DebateId


class DebateRecord(BaseModel):
    """A debate as it runs: the question as debated, the routing decision, every round's
    positions, earlier debates a person sent back, the result and who gave the final answer.

    Kept as state `debate:record:<debate id>` and answered by `GET /v1/debates/{id}`; written
    after every step."""

    debate_id: DebateId
    request: DebateSubmission
    state: DebateState = DebateState.RUNNING
    question: Text = Field(
        description="The question as debated now (with a person's guidance after a retry)."
    )
    routing_decision: RoutingDecision | None = None
    rounds: list[DebateRound] = Field(
        default_factory=list, max_length=MAX_ROUNDS, description="The current debate's rounds so far."
    )
    earlier: list[DebateResult] = Field(
        default_factory=list,
        max_length=MAX_RETRIES_BY_PERSON,
        description="Debates a person sent back (retry).",
    )
    result: DebateResult | None = None
    final_answer: Text | None = None
    answer_source: AnswerSource | None = None
    escalation_id: IdRef | None = None
    decided_by: NameRef | None = None
    decisions: list[Note] = Field(
        default_factory=list,
        # Every retry a person asks for is one decision, and the one after the last retry ends it.
        max_length=MAX_RETRIES_BY_PERSON + 1,
        description="Who decided what, in order.",
    )
    reason: Note = ""
    traceparent: Traceparent | None = None
    created_at: datetime
    updated_at: datetime
    revision: int = 0


class DebateAccepted(BaseModel):
    """`PUT /v1/debates/{id}`'s answer: the debate runs (or already ran) under this id."""

    debate_id: DebateId
    state: DebateState
    created: bool


class DebateList(BaseModel):
    """`GET /v1/debates?state=...`: one page of the debates in a state, by id; with no state, of
    every debate, the newest first (debates created before that listing existed are not in it)."""

    state: DebateState | None = Field(default=None, description="The state listed; None: every state.")
    total: int = Field(description="How many debates the listing has; `debates` is one page of them.")
    debates: list[DebateRecord] = Field(max_length=MAX_PAGE_SIZE)


class DebateCompleted(BaseModel):
    """Topic `agora.debate.completed`: a debate ended, with its answer and who gave it."""

    debate_id: DebateId
    state: DebateState
    final_answer: Text | None
    answer_source: AnswerSource | None
    result: DebateResult | None
    decided_by: NameRef | None = Field(default=None, description="The person who decided, if one did.")
    reason: Note = ""


class DebateDecision(BaseModel):
    """The external event a debate waiting for a person receives: the decision, as its
    escalation recorded it."""

    escalation_id: str
    response: EscalationResponse
    decided_by: Name


def submission_of(request: DebateRequest) -> DebateSubmission:
    """The request without its id: what a debate record keeps, and what a repeat must match."""
    return DebateSubmission(question=request.question, config=request.config)


def new_debate_record(request: DebateRequest, now: datetime) -> DebateRecord:
    return DebateRecord(
        debate_id=request.debate_id,
        request=submission_of(request),
        question=request.question,
        created_at=now,
        updated_at=now,
    )


def position_cost(debater: DebaterConfig, usage: TokenUsage) -> float:
    return usage.total_tokens / 1000 * debater.usd_per_1k_tokens


def spent(record: DebateRecord) -> float:
    """What the debate's model calls cost so far (every round, earlier debates included)."""
    now = sum(p.cost_usd for r in record.rounds for p in r.positions)
    return now + sum(e.total_cost_usd for e in record.earlier)


def budget_spent(record: DebateRecord) -> bool:
    budget = record.request.config.cost_budget_usd
    return budget is not None and spent(record) >= budget


def answered(record: DebateRecord, result: DebateResult, now: datetime) -> DebateRecord:
    """A debate that did not need a person: its answer stands."""
    source = AnswerSource.SINGLE_AGENT if result.routing_decision == "single_agent" else AnswerSource.DEBATE
    return record.model_copy(
        update={
            "result": result,
            "final_answer": result.final_answer,
            "answer_source": source,
            "routing_decision": result.routing_decision,
            "state": DebateState.COMPLETED,
            "updated_at": now,
        }
    )


def broke_down(record: DebateRecord, reason: str, now: datetime) -> DebateRecord:
    """A debate whose run broke down ends FAILED with the reason and no answer; its rounds
    so far are kept."""
    return record.model_copy(
        update={"state": DebateState.FAILED, "reason": reason[:MAX_NOTE_CHARS], "escalation_id": None,
                "final_answer": None, "answer_source": None, "updated_at": now}
    )  # fmt: skip


def waiting(record: DebateRecord, result: DebateResult, escalation_id: str, now: datetime) -> DebateRecord:
    return record.model_copy(
        update={
            "result": result,
            "routing_decision": result.routing_decision,
            "escalation_id": escalation_id,
            "state": DebateState.WAITING_FOR_HUMAN,
            "updated_at": now,
        }
    )


def apply_debate_decision(record: DebateRecord, decision: DebateDecision, now: datetime) -> DebateRecord:
    """The debate after a person decided: `modify_prompt` gives the answer (its text),
    `skip` accepts the debate's answer as it is, `retry` debates again with the person's
    guidance added to the question (RUNNING, rounds cleared; at most `MAX_RETRIES_BY_PERSON`
    times, then the debate is ABORTED), `abort` ends it without an answer."""
    result = record.result
    assert result is not None
    response, who = decision.response, decision.decided_by
    note = f"{who}: {response.action}" + (f" ({response.guidance})" if response.guidance else "")
    update: dict[str, object] = {
        "decided_by": who,
        "decisions": [*record.decisions, note[:MAX_NOTE_CHARS]],
        "escalation_id": None,
        "updated_at": now,
    }
    action = response.action
    if action is EscalationAction.MODIFY_PROMPT:
        update |= {"state": DebateState.COMPLETED, "final_answer": response.modified_prompt,
                   "answer_source": AnswerSource.PERSON}  # fmt: skip
    elif action is EscalationAction.SKIP:
        update |= {"state": DebateState.COMPLETED, "final_answer": result.final_answer,
                   "answer_source": AnswerSource.DEBATE}  # fmt: skip
    elif action is EscalationAction.RETRY and len(record.earlier) < MAX_RETRIES_BY_PERSON:
        guidance = response.modified_prompt or response.guidance or "debate it again"
        update |= {
            "state": DebateState.RUNNING,
            "question": f"{record.question}\nGuidance from {who}: {guidance}"[:MAX_TEXT_CHARS],
            "earlier": [*record.earlier, result],
            "rounds": [],
            "result": None,
        }
    else:
        why = (
            "aborted"
            if action is EscalationAction.ABORT
            else f"retried {MAX_RETRIES_BY_PERSON} times already"
        )
        update |= {"state": DebateState.ABORTED, "reason": f"{why} by {who}"[:MAX_NOTE_CHARS]}
    return record.model_copy(update=update)


MAX_CALIBRATION = 1000
"""Recorded debate outcomes the conformal gate keeps (the newest)."""


class Calibration(BaseModel):
    """Nonconformity scores of debates whose right answer became known, by debate id
    (state `debate:calibration:scores`); a debate is counted once, its latest label wins."""

    scores: dict[str, float] = Field(default_factory=dict)

    def with_score(self, debate_id: str, score: float) -> Calibration:
        scores = {k: v for k, v in self.scores.items() if k != debate_id}
        scores[debate_id] = score
        return Calibration(scores=dict(list(scores.items())[-MAX_CALIBRATION:]))


class DebateOutcome(BaseModel):
    """`POST /v1/debates/{id}/outcome`: the right answer, once it is known (a verified result);
    it calibrates the conformal gate."""

    model_config = ConfigDict(extra="forbid")

    right_answer: Text = Field(min_length=1)


def gated(result: DebateResult, decision: ConformalDecision) -> DebateResult:
    """The result as the conformal gate decides it: act on the one answer in the set, else
    escalate (the aggregated answer stays for the person to see)."""
    answer = decision.answer if decision.act and decision.answer is not None else result.final_answer
    return result.model_copy(
        update={"escalate_to_human": not decision.act, "gate_decision": decision, "final_answer": answer}
    )
