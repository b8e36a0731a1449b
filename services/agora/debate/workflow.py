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

Every activity is declared below once, with the model it takes and what it gives back
(`ActivityRef`); their names are part of the recorded history: renaming one breaks the debates
in flight.
"""

from __future__ import annotations

from datetime import datetime

from dapr.ext.workflow import DaprWorkflowContext
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
from agora.core.messages import EscalationResolved
from agora.core.planning import TokenUsage
from agora.runtime.patches import DEBATE_DECISION_ON_RECORD, ROUNDS_IN_ONE_STEP, SINGLE_AGENT_GATED
from agora.runtime.tracing import span_traceparent, stable_span_id
from agora.runtime.workflows import (
    ActivityRef,
    DecisionOnRecord,
    Decisions,
    DurableRun,
    FinishedSpan,
    RunFailure,
    Steps,
    WorkflowRef,
    all_of,
    escalation_answer,
    workflow_now,
)


class DebateStart(BaseModel):
    request: DebateRequest
    traceparent: str
    parent_traceparent: str | None = None


class SaveDebate(BaseModel):
    record: DebateRecord
    previous_state: DebateState | None = None
    finished: list[FinishedSpan] = Field(default_factory=list)

    @classmethod
    def of(
        cls, record: DebateRecord, previous: DebateRecord | None, finished: list[FinishedSpan]
    ) -> SaveDebate:
        """The save of `record`, its state moving from that of `previous` (the record saved before)."""
        return cls(
            record=record, previous_state=previous.state if previous is not None else None, finished=finished
        )


class Route(BaseModel):
    router: DebaterConfig
    question: str
    traceparent: str
    options: list[str] = Field(default_factory=list)
    """The debate's options: the answer must be one of them (none: any answer)."""


class Answer(BaseModel):
    debater: DebaterConfig
    question: str
    round_number: int
    previous: DebateRound | None
    traceparent: str
    debate_id: str
    options: list[str] = Field(default_factory=list)


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
    options: list[str] = Field(default_factory=list)


class RoundAnswers(BaseModel):
    positions: list[Position]


class Judge(BaseModel):
    config: DebateConfig
    question: str
    final: DebateRound
    traceparent: str
    options: list[str] = Field(default_factory=list)


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


# -- the activities and the workflow (their names are recorded in each run's history) -------------

SAVE = ActivityRef("debate.save", SaveDebate, None)
ROUND = ActivityRef("debate.round", AskRound, RoundAnswers)
ROUTE = ActivityRef("debate.route", Route, Position)
ANSWER = ActivityRef("debate.answer", Answer, Position)
JUDGE = ActivityRef("debate.judge", Judge, Judged)
GATE = ActivityRef("debate.gate", GateCheck, ConformalDecision)
CALIBRATE = ActivityRef("debate.calibrate", Calibrate, None)
STOP = ActivityRef("debate.stop", Stop, Stopped)
ANNOUNCE = ActivityRef("debate.announce", Announce, None)
FAIL = ActivityRef("debate.fail", DebateFailed, None)

DEBATE_RUN = WorkflowRef("debate_run", DebateStart, str | None)


def debate_decision(event: EscalationResolved) -> DebateDecision:
    """A person's decision on a split debate, as its run receives it."""
    answer = escalation_answer(event, "a debate")
    return DebateDecision(escalation_id=event.escalation_id, response=answer, decided_by=event.decided_by)


READ_DECISION = ActivityRef("debate.decision-on-record", DecisionOnRecord, DebateDecision | None)
"""A waiting run's reading of its escalation's record (`Decisions`)."""
DEBATE_DECISIONS = Decisions(
    DebateDecision, debate_decision, on_record=READ_DECISION, patch=DEBATE_DECISION_ON_RECORD
)


def debate_run(ctx: DaprWorkflowContext, start: DebateStart) -> Steps[str | None]:
    request, trace = start.request, start.traceparent
    config = request.config
    begun = new_debate_record(request, workflow_now(ctx)).model_copy(update={"traceparent": trace})
    one_step_rounds = ROUNDS_IN_ONE_STEP.applies(ctx)
    # A round carries the save held for it; a step that cannot waits for it (`flush`).
    run = DurableRun(ctx, begun, SAVE, SaveDebate.of, holds_saves=one_step_rounds)

    yield from run.save_later(run.record)
    routed: Position | None = None
    if config.adaptive_routing:
        routing = Route(
            router=config.router, question=run.record.question, traceparent=trace, options=request.options
        )
        yield from run.flush()
        routed = yield from ROUTE.run(ctx, routing)
    if routed is not None and routed.confidence >= config.routing_confidence_threshold:
        elapsed = (workflow_now(ctx) - run.record.created_at).total_seconds()
        if SINGLE_AGENT_GATED.applies(ctx):
            # One voice is not agreement: its calibrated answer passes the gate, or it is debated.
            result = single_agent_result(
                routed, duration_seconds=elapsed, escalate_threshold=config.escalate_threshold
            )
            if config.gate == "conformal":
                check = GateCheck(config=config, final=debate_round(1, [routed]), traceparent=trace)
                yield from run.flush()
                result = gated(result, (yield from GATE.run(ctx, check)))
            if not result.escalate_to_human:
                yield from run.save_later(answered(run.record, result, workflow_now(ctx)))
        else:
            result = single_agent_result(routed, duration_seconds=elapsed)
            yield from run.save_later(answered(run.record, result, workflow_now(ctx)))
    while run.record.state is DebateState.RUNNING:
        started = workflow_now(ctx)
        rounds: list[DebateRound] = []
        budget_stop = False
        for number in range(1, config.max_rounds + 1):
            if budget_spent(run.record):
                budget_stop = True
                break
            round_started = workflow_now(ctx)
            key = (request.debate_id, "round", str(len(run.record.earlier)), str(number))
            round_trace = span_traceparent(trace, stable_span_id(*key))
            previous = rounds[-1] if rounds else None
            if one_step_rounds:
                asking = AskRound(
                    debate_id=request.debate_id,
                    earlier=len(run.record.earlier),
                    round_number=number,
                    question=run.record.question,
                    debaters=config.debaters,
                    previous=previous,
                    traceparent=round_trace,
                    save=run.held_save(),
                    options=request.options,
                )
                answers = yield from ROUND.run(ctx, asking)
                positions = answers.positions
            else:
                asks = [
                    ANSWER.schedule(
                        ctx,
                        Answer(
                            debater=d,
                            question=run.record.question,
                            round_number=number,
                            previous=previous,
                            traceparent=round_trace,
                            debate_id=request.debate_id,
                            options=request.options,
                        ),
                    )
                    for d in config.debaters
                ]
                positions = yield from all_of(asks)
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
            with_round = run.record.model_copy(
                update={"rounds": list(rounds), "updated_at": workflow_now(ctx)}
            )
            yield from run.save_later(with_round, span)
            if converged(debate, config):
                break
        extra_usage: list[TokenUsage] = (
            [routed.token_usage] if routed is not None and not run.record.earlier else []
        )
        extra_cost = routed.cost_usd if routed is not None and not run.record.earlier else 0.0
        if not rounds:  # the budget was spent before any round: nothing to aggregate
            chosen = Aggregate(answer="", reasoning="the budget was spent before the debate", confidence=0.0)
        elif config.aggregation is AggregationStrategy.JUDGE and config.judge_config is not None:
            judging = Judge(config=config, question=run.record.question, final=rounds[-1], traceparent=trace,
                            options=request.options)  # fmt: skip
            yield from run.flush()
            judged = yield from JUDGE.run(ctx, judging)
            chosen = judged.chosen
            extra_usage.append(judged.usage)
            extra_cost += judged.cost_usd
        else:
            chosen = aggregate(rounds[-1], config)
        aggregated = FinishedSpan(
            name="debate.aggregate",
            traceparent=span_traceparent(
                trace, stable_span_id(request.debate_id, "aggregate", str(len(run.record.earlier)))
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
            yield from run.flush()
            result = gated(result, (yield from GATE.run(ctx, check)))
        if not result.escalate_to_human:
            yield from run.save_later(answered(run.record, result, workflow_now(ctx)), aggregated)
            break
        stopping = Stop(record=run.record.model_copy(update={"result": result}))
        yield from run.flush()
        stop = yield from STOP.run(ctx, stopping)
        yield from run.save(waiting(run.record, result, stop.escalation_id, workflow_now(ctx)), aggregated)
        decision = yield from DEBATE_DECISIONS.wait(ctx, stop.escalation_id)
        run.record = apply_debate_decision(run.record, decision, workflow_now(ctx))
        if run.record.state is DebateState.COMPLETED and run.record.final_answer and rounds:
            label = Calibrate(debate_id=request.debate_id, config=config, final=rounds[-1],
                              right_answer=run.record.final_answer)  # fmt: skip
            yield from CALIBRATE.run(ctx, label)
        if run.record.state is DebateState.RUNNING:
            yield from run.save_later(run.record)

    run_span = FinishedSpan(
        name="debate.run",
        traceparent=trace,
        parent=start.parent_traceparent,
        start=run.record.created_at,
        end=workflow_now(ctx),
        attributes={"agora.debate_id": request.debate_id, "agora.debate_state": str(run.record.state)},
    )
    yield from run.save(run.record.model_copy(update={"updated_at": workflow_now(ctx)}), run_span)
    yield from ANNOUNCE.run(ctx, Announce(record=run.record))
    return run.record.final_answer


def debate_failed(ctx: DaprWorkflowContext, start: DebateStart, failure: RunFailure) -> Steps[None]:
    """`debate_run`'s end when its steps broke down: the record FAILED with the reason, announced."""
    yield from FAIL.run(ctx, DebateFailed(start=start, failure=failure, failed_at=workflow_now(ctx)))
