"""A debate's record, as people watch it (`DebateRecord`, state `debate:record:<debate id>`):
its state, the question as debated, the rounds so far, earlier debates a person sent back, the
result and who gave the final answer; what the service answers and announces of it
(`DebateAccepted`, `DebateList`, `DebateCompleted`); and its lifecycle: answered, waiting for a
person, decided by one (`DebateDecision`, `apply_debate_decision`), or broken down."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from agora.core.debate.config import MAX_ROUNDS
from agora.core.debate.request import DebateId, DebateRequest, DebateSubmission, submission_of
from agora.core.debate.result import DebateResult, RoutingDecision
from agora.core.debate.rounds import DebateRound
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.limits import (
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

__all__ = [
    "FINAL_DEBATE_STATES",
    "MAX_RETRIES_BY_PERSON",
    "AnswerSource",
    "DebateAccepted",
    "DebateCompleted",
    "DebateDecision",
    "DebateList",
    "DebateRecord",
    "DebateState",
    "answered",
    "apply_debate_decision",
    "broke_down",
    "budget_spent",
    "new_debate_record",
    "spent",
    "waiting",
]

MAX_RETRIES_BY_PERSON = 5
"""Debates a person may ask for again (retry) before the next retry is refused."""


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

    @classmethod
    def of(cls, record: DebateRecord) -> DebateCompleted:
        """The announcement of an ended debate's record."""
        return cls(debate_id=record.debate_id, state=record.state, final_answer=record.final_answer,
                   answer_source=record.answer_source, result=record.result, decided_by=record.decided_by,
                   reason=record.reason)  # fmt: skip


class DebateDecision(BaseModel):
    """The external event a debate waiting for a person receives: the decision, as its
    escalation recorded it."""

    escalation_id: str
    response: EscalationResponse
    decided_by: Name


def new_debate_record(request: DebateRequest, now: datetime) -> DebateRecord:
    return DebateRecord(
        debate_id=request.debate_id,
        request=submission_of(request),
        question=request.question_as_asked,
        created_at=now,
        updated_at=now,
    )


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
