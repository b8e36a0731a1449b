"""A debate's run as a Dapr workflow (`debate_run`, instance id = debate id).

Adaptive routing first (the routing model's confident answer ends it: "single_agent"); then
rounds: a round is one activity (`debate.round`) that asks every debater side by side and keeps
each answer as it comes (`debate:answer:<debate>|<earlier>|<round>|<debater>`), so a debater
whose answer was kept is never asked again when a cut-short round runs again; it also saves the
record as it stood before the round, so a round costs one step. A round
that converges ends the debate early; a spent budget stops further rounds. The final round is
aggregated (the judge model is asked for JUDGE). A debate below `escalate_threshold` waits for
a person (an `Escalation`, its decision an external event): the person's answer, the debate's
answer as it is, another debate with the person's guidance, or abort. The end is announced on
`agora.debate.completed`. A run whose steps break down for a reason the code did not foresee
ends through `debate_failed`: FAILED with the error as the reason, announced.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import datetime
from typing import Any

from dapr.ext.workflow import DaprWorkflowContext, when_all
from pydantic import BaseModel, Field

from agora.core.debate.aggregation import Aggregate, aggregate
from agora.core.debate.config import AggregationStrategy, DebateConfig, DebaterConfig
from agora.core.debate.gate import ConformalDecision
from agora.core.debate.record import (
    DebateDecision,
    DebateRecord,
    DebateState,
    answered,
    apply_debate_decision,
    budget_spent,
    new_debate_record,
    waiting,
)
from agora.core.debate.request import DebateRequest
from agora.core.debate.result import debate_result, gated, single_agent_result
from agora.core.debate.rounds import DebateRound, Position, converged, debate_round
from agora.core.planning import TokenUsage
from agora.runtime.tracing import span_traceparent, stable_span_id
from agora.runtime.workflows import ACTIVITY_RETRY, FinishedSpan, RunFailure, result_of, workflow_now

DEBATE_WORKFLOW = "debate_run"
ROUNDS_IN_ONE_STEP = "debate.rounds-in-one-step"
"""A round is one step (`debate.round`: every debater asked side by side, each answer kept as it
comes, so a round cut short asks only the debaters with none), which also saves the record as it
stood before the round; the end is saved once. A run begun before keeps the steps its history
recorded (Dapr Workflow's `is_patched`): an activity per answer, a save after each round."""


class Activity:
    """The activity names (recorded in each run's history)."""

    SAVE = "debate.save"
    ROUND = "debate.round"
    ROUTE = "debate.route"
    ANSWER = "debate.answer"
    JUDGE = "debate.judge"
    GATE = "debate.gate"
    CALIBRATE = "debate.calibrate"
    STOP = "debate.stop"
    ANNOUNCE = "debate.announce"
    FAIL = "debate.fail"


class DebateStart(BaseModel):
    request: DebateRequest
    traceparent: str
    parent_traceparent: str | None = None


class SaveDebate(BaseModel):
    record: DebateRecord
    previous_state: DebateState | None = None
    finished: list[FinishedSpan] = Field(default_factory=list)


class Route(BaseModel):
    router: DebaterConfig
    question: str
    traceparent: str


class Answer(BaseModel):
    debater: DebaterConfig
    question: str
    round_number: int
    previous: DebateRound | None
    traceparent: str
    debate_id: str


class AskRound(BaseModel):
    """One round: the record as it stood before it saved, then every debater asked."""

    debate_id: str
    earlier: int = Field(
        ge=0, description="Debates a person sent back before this one: part of an answer's key."
    )
    round_number: int = Field(ge=1)
    question: str
    debaters: list[DebaterConfig]
    previous: DebateRound | None
    traceparent: str
    save: SaveDebate | None = None


class RoundAnswers(BaseModel):
    positions: list[Position]


class Judge(BaseModel):
    config: DebateConfig
    question: str
    final: DebateRound
    traceparent: str


class Judged(BaseModel):
    chosen: Aggregate
    usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float = 0.0


class GateCheck(BaseModel):
    config: DebateConfig
    final: DebateRound
    traceparent: str


class Calibrate(BaseModel):
    """A debate whose right answer is now known: its final round calibrates the gate."""

    debate_id: str
    config: DebateConfig
    final: DebateRound
    right_answer: str


class Stop(BaseModel):
    record: DebateRecord


class Stopped(BaseModel):
    escalation_id: str


class Announce(BaseModel):
    record: DebateRecord


class DebateFailed(BaseModel):
    """A debate whose run broke down: the run's input, why, and when (the workflow's clock)."""

    start: DebateStart
    failure: RunFailure
    failed_at: datetime


Steps = Generator[Any, Any, Any]


def _activity(ctx: DaprWorkflowContext, name: str, argument: BaseModel) -> Any:
    return ctx.call_activity(name, input=argument, retry_policy=ACTIVITY_RETRY)


def debate_run(ctx: DaprWorkflowContext, raw: Any) -> Steps:
    start = result_of(DebateStart, raw)
    request, trace = start.request, start.traceparent
    config = request.config
    record = new_debate_record(request, workflow_now(ctx)).model_copy(update={"traceparent": trace})
    saved: DebateState | None = None
    one_step_rounds = ctx.is_patched(ROUNDS_IN_ONE_STEP)
    unsaved = False
    held: list[FinishedSpan] = []

    def saving(updated: DebateRecord, *finished: FinishedSpan) -> SaveDebate:
        """The save of `updated`, with the spans held back for it."""
        nonlocal record, saved, unsaved, held
        previous, saved = saved, updated.state
        record = updated.model_copy(update={"revision": updated.revision + 1})
        spans, held, unsaved = [*held, *finished], [], False
        return SaveDebate(record=record, previous_state=previous, finished=spans)

    def save(updated: DebateRecord, *finished: FinishedSpan) -> Any:
        """The save of `updated` as a step of its own, to yield."""
        return _activity(ctx, Activity.SAVE, saving(updated, *finished))

    def save_later(updated: DebateRecord, *finished: FinishedSpan) -> Steps:
        """Hold the save of `updated` for the next round or save (a run begun before
        `ROUNDS_IN_ONE_STEP`: save now)."""
        nonlocal record, unsaved
        if not one_step_rounds:
            yield save(updated, *finished)
            return
        record, unsaved = updated, True
        held.extend(finished)

    def flush() -> Steps:
        """The save held back, if any, as a step of its own (before a step that cannot carry it)."""
        if unsaved:
            yield save(record)

    yield from save_later(record)
    routed: Position | None = None
    if config.adaptive_routing:
        routing = Route(router=config.router, question=request.question, traceparent=trace)
        yield from flush()
        routed = result_of(Position, (yield _activity(ctx, Activity.ROUTE, routing)))
    if routed is not None and routed.confidence >= config.routing_confidence_threshold:
        elapsed = (workflow_now(ctx) - record.created_at).total_seconds()
        result = single_agent_result(routed, duration_seconds=elapsed)
        yield from save_later(answered(record, result, workflow_now(ctx)))
    while record.state is DebateState.RUNNING:
        started = workflow_now(ctx)
        rounds: list[DebateRound] = []
        budget_stop = False
        for number in range(1, config.max_rounds + 1):
            if budget_spent(record):
                budget_stop = True
                break
            round_started = workflow_now(ctx)
            key = (request.debate_id, "round", str(len(record.earlier)), str(number))
            round_trace = span_traceparent(trace, stable_span_id(*key))
            previous = rounds[-1] if rounds else None
            if one_step_rounds:
                asking = AskRound(
                    debate_id=request.debate_id,
                    earlier=len(record.earlier),
                    round_number=number,
                    question=record.question,
                    debaters=config.debaters,
                    previous=previous,
                    traceparent=round_trace,
                    save=saving(record) if unsaved else None,
                )
                answers = result_of(RoundAnswers, (yield _activity(ctx, Activity.ROUND, asking)))
                positions = answers.positions
            else:
                asks = [
                    _activity(
                        ctx,
                        Activity.ANSWER,
                        Answer(
                            debater=d,
                            question=record.question,
                            round_number=number,
                            previous=previous,
                            traceparent=round_trace,
                            debate_id=request.debate_id,
                        ),
                    )
                    for d in config.debaters
                ]
                positions = [result_of(Position, p) for p in (yield when_all(asks))]
            debate = debate_round(number, positions)
            rounds.append(debate)
            span = FinishedSpan(
                name="debate.round",
                traceparent=round_trace,
                parent=trace,
                start=round_started,
                end=workflow_now(ctx),
                attributes={
                    "agora.debate_id": request.debate_id,
                    "agora.round": number,
                    "agora.convergence": debate.convergence_score,
                },
            )
            yield from save_later(
                record.model_copy(update={"rounds": list(rounds), "updated_at": workflow_now(ctx)}), span
            )
            if converged(debate, config):
                break
        extra_usage: list[TokenUsage] = (
            [routed.token_usage] if routed is not None and not record.earlier else []
        )
        extra_cost = routed.cost_usd if routed is not None and not record.earlier else 0.0
        if not rounds:  # the budget was spent before any round: nothing to aggregate
            chosen = Aggregate(answer="", reasoning="the budget was spent before the debate", confidence=0.0)
        elif config.aggregation is AggregationStrategy.JUDGE and config.judge_config is not None:
            judging = Judge(config=config, question=record.question, final=rounds[-1], traceparent=trace)
            yield from flush()
            judged = result_of(Judged, (yield _activity(ctx, Activity.JUDGE, judging)))
            chosen = judged.chosen
            extra_usage.append(judged.usage)
            extra_cost += judged.cost_usd
        else:
            chosen = aggregate(rounds[-1], config)
        aggregated = FinishedSpan(
            name="debate.aggregate",
            traceparent=span_traceparent(
                trace, stable_span_id(request.debate_id, "aggregate", str(len(record.earlier)))
            ),
            parent=trace,
            start=workflow_now(ctx),
            end=workflow_now(ctx),
            attributes={"agora.aggregation": str(config.aggregation), "agora.confidence": chosen.confidence},
        )
        elapsed = (workflow_now(ctx) - started).total_seconds()
        result = debate_result(rounds, chosen, config, duration_seconds=elapsed, budget_exhausted=budget_stop,
                               extra_usage=extra_usage, extra_cost_usd=extra_cost)  # fmt: skip
        if config.gate == "conformal" and rounds:
            check = GateCheck(config=config, final=rounds[-1], traceparent=trace)
            yield from flush()
            result = gated(result, result_of(ConformalDecision, (yield _activity(ctx, Activity.GATE, check))))
        if not result.escalate_to_human:
            yield from save_later(answered(record, result, workflow_now(ctx)), aggregated)
            break
        stopping = Stop(record=record.model_copy(update={"result": result}))
        yield from flush()
        stop = result_of(Stopped, (yield _activity(ctx, Activity.STOP, stopping)))
        yield save(waiting(record, result, stop.escalation_id, workflow_now(ctx)), aggregated)
        decided = yield ctx.wait_for_external_event(decision_event(stop.escalation_id))
        record = apply_debate_decision(record, result_of(DebateDecision, decided), workflow_now(ctx))
        if record.state is DebateState.COMPLETED and record.final_answer and rounds:
            label = Calibrate(debate_id=request.debate_id, config=config, final=rounds[-1],
                              right_answer=record.final_answer)  # fmt: skip
            yield _activity(ctx, Activity.CALIBRATE, label)
        if record.state is DebateState.RUNNING:
            yield from save_later(record)

    run_span = FinishedSpan(
        name="debate.run",
        traceparent=trace,
        parent=start.parent_traceparent,
        start=record.created_at,
        end=workflow_now(ctx),
        attributes={"agora.debate_id": request.debate_id, "agora.debate_state": str(record.state)},
    )
    yield save(record.model_copy(update={"updated_at": workflow_now(ctx)}), run_span)
    yield _activity(ctx, Activity.ANNOUNCE, Announce(record=record))
    return record.final_answer


def debate_failed(ctx: DaprWorkflowContext, raw: Any, failure: RunFailure) -> Steps:
    """`debate_run`'s end when its steps broke down: the record FAILED with the reason, announced."""
    failed = DebateFailed(start=result_of(DebateStart, raw), failure=failure, failed_at=workflow_now(ctx))
    yield _activity(ctx, Activity.FAIL, failed)


def decision_event(escalation_id: str) -> str:
    return f"decision.{escalation_id}"
