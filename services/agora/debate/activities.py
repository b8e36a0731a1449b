"""What a debate's workflow does to the world: ask the models, park for a person, save and
announce. Each activity is idempotent (a cut-short activity runs again): records are written
whole, the escalation id is fixed by the debate and its count of retries, the announcement
carries a fixed event id."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from agora.core import topics
from agora.core.checks import ValidationResult
from agora.core.conformal import candidate_probabilities, conformal_decision, nonconformity
from agora.core.debate.aggregation import Aggregate, aggregate
from agora.core.debate.config import AggregationStrategy, DebateConfig, DebaterConfig, position_cost
from agora.core.debate.gate import Calibration, ConformalDecision
from agora.core.debate.record import (
    FINAL_DEBATE_STATES,
    DebateCompleted,
    DebateRecord,
    broke_down,
    new_debate_record,
)
from agora.core.debate.rounds import Position, transcript
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.record import ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.limits import MAX_TEXT_CHARS
from agora.core.planning import TokenUsage
from agora.debate import steps
from agora.debate.workflow import (
    ANNOUNCE,
    ANSWER,
    CALIBRATE,
    FAIL,
    GATE,
    JUDGE,
    ROUND,
    ROUTE,
    SAVE,
    STOP,
    Announce,
    Answer,
    AskRound,
    Calibrate,
    DebateFailed,
    GateCheck,
    Judge,
    Judged,
    RoundAnswers,
    Route,
    SaveDebate,
    Stop,
    Stopped,
)
from agora.llm import ModelClient, ModelError, ModelOutputInvalid, Usage
from agora.runtime.batched_writes import BatchedWrites
from agora.runtime.clients import EscalationActors
from agora.runtime.pubsub import Publisher
from agora.runtime.state import StateRepository
from agora.runtime.workflows import RunEnds, RunRecords, WorkflowHost, step_span

ModelFor = Callable[[DebaterConfig], ModelClient]
CALIBRATION_KEY = "scores"
ANSWER_RETENTION_SECONDS = 86_400
"""How long a debater's answer is kept for a round that runs again: a day, far beyond the
activity's retries (about six minutes) and an app's restart."""


def answer_key(step: AskRound, debater_id: str) -> str:
    """One debater's answer in one round of one debate (`earlier`: the debates a person sent back)."""
    return f"{step.debate_id}|{step.earlier}|{step.round_number}|{debater_id}"


def _weights(config: DebateConfig) -> dict[str, float]:
    return {d.debater_id: d.weight for d in config.debaters}


@dataclass
class DebateActivities:
    model_for: ModelFor
    """The model client of a debater's backend and model id (built once per pair)."""
    publisher: Publisher
    records: RunRecords[DebateRecord]
    escalations: EscalationActors
    calibration: StateRepository[Calibration]
    answers: StateRepository[Position]
    """Each debater's answer in a round, kept as it comes (`ANSWER_RETENTION_SECONDS`)."""
    answer_writes: BatchedWrites[Position]
    ends: RunEnds[DebateRecord, DebateCompleted] = field(init=False)

    def __post_init__(self) -> None:
        self.ends = RunEnds(
            self.records,
            self.publisher,
            topics.DEBATE_COMPLETED,
            DebateCompleted.of,
            run_id=lambda record: record.debate_id,
            has_ended=lambda record: record.state in FINAL_DEBATE_STATES,
            broke_down=broke_down,
            id_key="debate_id",
            run_span="debate.run",
            failed_span="debate.failed",
            completed_span="debate.completed",
            state_attribute="agora.debate_state",
        )

    def register(self, host: WorkflowHost) -> None:
        host.activity(SAVE, self.save)
        host.activity(ROUND, self.ask_round)
        host.activity(ROUTE, self.route)
        host.activity(ANSWER, self.answer)
        host.activity(JUDGE, self.judge)
        host.activity(GATE, self.gate)
        host.activity(CALIBRATE, self.calibrate)
        host.activity(STOP, self.stop)
        host.activity(ANNOUNCE, self.announce)
        host.activity(FAIL, self.fail)

    async def save(self, step: SaveDebate) -> None:
        await self.records.save(step.record.debate_id, step.record, step.previous_state, step.finished)

    async def route(self, step: Route) -> Position:
        with step_span("debate.route", step.traceparent, {"agora.debater": step.router.debater_id}) as span:
            try:
                routed = await steps.route(
                    self.model_for(step.router), step.router, step.question, step.options
                )
            except ModelError as exc:  # the router cannot answer: debate it
                span.set_attribute("agora.problem", str(exc)[:500])
                return Position(debater_id=step.router.debater_id, answer="", confidence=0.0)
            span.set_attribute("agora.confidence", routed.confidence)
            return routed.model_copy(update={"cost_usd": position_cost(step.router, routed.token_usage)})

    async def ask_round(self, step: AskRound) -> RoundAnswers:
        """Save the record as it stood before the round (if given), and ask every debater side by
        side; an answer kept by an earlier run of this round is taken as it is, a new one is kept
        as it comes."""
        keys = {d.debater_id: answer_key(step, d.debater_id) for d in step.debaters}
        kept = await self.answers.get_many(keys.values())

        async def ask(debater: DebaterConfig) -> Position:
            key = keys[debater.debater_id]
            if key in kept:
                return kept[key].value
            given = await self.answer(
                Answer(
                    debater=debater,
                    question=step.question,
                    round_number=step.round_number,
                    previous=step.previous,
                    traceparent=step.traceparent,
                    debate_id=step.debate_id,
                    options=step.options,
                )
            )
            await self.answer_writes.save(key, given, ttl_seconds=ANSWER_RETENTION_SECONDS)
            return given

        asking = asyncio.gather(*(ask(d) for d in step.debaters))
        if step.save is not None:
            await asyncio.gather(self.save(step.save), asking)
        return RoundAnswers(positions=list(await asking))

    async def answer(self, step: Answer) -> Position:
        debater = step.debater
        attributes = {"agora.debate_id": step.debate_id, "agora.debater": debater.debater_id,
                      "agora.round": step.round_number}  # fmt: skip
        with step_span("debate.answer", step.traceparent, attributes) as span:
            try:
                given = await steps.answer(
                    self.model_for(debater), debater, step.question, step.previous, step.options
                )
            except ModelError as exc:  # an unreachable debater abstains this round
                span.set_attribute("agora.problem", str(exc)[:500])
                why = f"no answer: {exc}"[:2048]
                return Position(debater_id=debater.debater_id, answer="", reasoning=why, confidence=0.0)
            span.set_attribute("agora.confidence", given.confidence)
            return given.model_copy(update={"cost_usd": position_cost(debater, given.token_usage)})

    async def judge(self, step: Judge) -> Judged:
        judge = step.config.judge_config
        assert judge is not None
        with step_span("debate.judge", step.traceparent, {"agora.aggregation": "JUDGE"}) as span:
            try:
                verdict, usage = await steps.judge(
                    self.model_for(judge), step.question, step.final, step.options
                )
            except ModelError as exc:  # no judge: the weighted vote decides
                span.set_attribute("agora.problem", str(exc)[:500])
                weighted = step.config.model_copy(update={"aggregation": AggregationStrategy.WEIGHTED_VOTE})
                # Answers that were not a verdict were paid for all the same.
                paid = exc.usage if isinstance(exc, ModelOutputInvalid) else Usage()
                usage = TokenUsage(prompt_tokens=paid.prompt_tokens, completion_tokens=paid.completion_tokens)
                return Judged(
                    chosen=aggregate(step.final, weighted), usage=usage, cost_usd=position_cost(judge, usage)
                )
            chosen = Aggregate(
                answer=verdict.answer, reasoning=verdict.reasoning, confidence=verdict.confidence
            )
            return Judged(chosen=chosen, usage=usage, cost_usd=position_cost(judge, usage))

    async def gate(self, step: GateCheck) -> ConformalDecision:
        """The conformal gate's verdict on the final round, on the outcomes recorded so far."""
        with step_span("debate.gate", step.traceparent, {"agora.alpha": step.config.conformal_alpha}) as span:
            found = await self.calibration.get(CALIBRATION_KEY)
            scores = list(found.value.scores.values()) if found else []
            candidates = candidate_probabilities(step.final, _weights(step.config))
            decision = conformal_decision(candidates, scores, step.config.conformal_alpha)
            span.set_attribute("agora.act", decision.act)
            span.set_attribute("agora.calibration_size", decision.calibration_size)
            return decision

    async def calibrate(self, step: Calibrate) -> None:
        """Record the debate's nonconformity score now that its right answer is known."""
        candidates = candidate_probabilities(step.final, _weights(step.config))
        score = nonconformity(candidates, step.right_answer)
        await self.calibration.update(
            CALIBRATION_KEY, lambda found: (found or Calibration()).with_score(step.debate_id, score)
        )

    async def stop(self, step: Stop) -> Stopped:
        """Park the debate for a person with the positions as context."""
        record, result = step.record, step.record.result
        assert result is not None
        escalation_id = f"debate.{record.debate_id}.{len(record.earlier) + 1}"
        final = result.rounds[-1] if result.rounds else None
        context = EscalationContext(
            job_id=record.debate_id,
            step=result.total_rounds_run,
            validation_results=[
                ValidationResult(
                    kind="round",
                    subject=str(r.round_number),
                    passed=r.convergence_score >= record.request.config.convergence_threshold,
                    figures={"convergence": r.convergence_score, "clusters": len(r.clusters)},
                )
                for r in result.rounds
            ],
            confidence=result.confidence,
            retry_count=len(record.earlier),
            error_history=[
                f"the debaters did not agree: convergence {result.final_convergence_score:.2f} below "
                f"{record.request.config.escalate_threshold:.2f} after {result.total_rounds_run} round(s)"
            ],
            prompt_used=record.question,
            output_summary=(
                f"Positions in round {final.round_number}:\n{transcript(final)}\n"
                f"The debate's own answer: {result.final_answer}"
                if final
                else "no positions"
            )[:MAX_TEXT_CHARS],
        )
        request = ParkRequest(
            waiting_party=WaitingParty(kind=WaitingPartyKind.DEBATE, id=record.debate_id),
            context=context,
            who="debate",
            why="the debaters did not agree",
        )
        with step_span("debate.escalate", record.traceparent, {"agora.escalation_id": escalation_id}):
            await self.escalations(escalation_id).park(request)
        return Stopped(escalation_id=escalation_id)

    async def announce(self, step: Announce) -> None:
        await self.ends.announce(step.record)

    async def fail(self, step: DebateFailed) -> None:
        """End a debate whose run broke down (FAILED with the reason) and announce it."""
        start, at = step.start, step.failed_at
        await self.ends.fail(
            start.request.debate_id,
            step.failure,
            failed_at=at,
            traceparent=start.traceparent,
            parent_traceparent=start.parent_traceparent,
            fresh=lambda: new_debate_record(start.request, at).model_copy(
                update={"traceparent": start.traceparent}
            ),
        )
