"""What a plan's workflow does to the world: model calls, the market, the state store, the
escalation service. Each activity is idempotent (an activity cut short by a crash runs again):
records are written whole, market tasks and announcements carry fixed ids, parking reuses
the escalation id."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass, field

from agora.core import topics
from agora.core.checks import ValidationResult
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.record import ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.limits import MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.market import TaskSpec
from agora.core.planning import (
    InvalidPlan,
    PlanningCall,
    PlanningConfig,
    PlanNotMade,
    SubGoalStatus,
    TokenUsage,
    VerificationResult,
)
from agora.core.plans.record import (
    FINAL_STATES,
    AttemptEnd,
    PlanCompleted,
    PlanRecord,
    PlanStop,
    StopReason,
    new_record,
)
from agora.core.plans.run import failed_with
from agora.core.plans.workflow import SubGoalJob
from agora.core.task_lifecycle import failure_code
from agora.core.task_waits import TaskEnded, TaskLink
from agora.llm import MeteredModel, ModelClient, ModelError
from agora.planner import steps
from agora.planner.steps import PlannerModels
from agora.planner.workflow import (
    ANNOUNCE,
    CHECK,
    DISPATCH,
    DRAFT,
    ESTIMATE,
    FAIL,
    LOOKAHEAD,
    REPLAN,
    SAVE,
    START_WAVE,
    STOP,
    SYNTHESIZE,
    VERIFY,
    Announce,
    Approach,
    Check,
    Dispatch,
    Draft,
    Drafted,
    Estimate,
    Estimated,
    LookAhead,
    PlanFailed,
    SaveRecord,
    StartWave,
    Stop,
    Synthesize,
    Synthesized,
    Verified,
    Verify,
    WaveStarted,
    attempt_dispatch,
    subgoal_task_id,
)
from agora.runtime.clients import EscalationActors, TaskActors
from agora.runtime.pubsub import Publisher
from agora.runtime.state import StateRepository, Versioned
from agora.runtime.task_ends import end_on_board
from agora.runtime.workflows import RunEnds, RunRecords, WorkflowHost, step_span

log = logging.getLogger(__name__)

PLAN_CONFIGS_KEPT = 4096
"""Plans whose `PlanningConfig` is kept in memory, so a subgoal's verification and look-ahead
find the plan's model tiers without reading its record (the least recently seen go first)."""
DEFAULT_CONFIG = PlanningConfig()


@dataclass
class PlannerActivities:
    model: ModelClient | PlannerModels
    """The planner's models: one client for every tier, or `PlannerModels` by tier."""
    publisher: Publisher
    records: RunRecords[PlanRecord]
    links: StateRepository[TaskLink]
    tasks: TaskActors
    escalations: EscalationActors
    models: PlannerModels = field(init=False)
    ends: RunEnds[PlanRecord, PlanCompleted] = field(init=False)
    _configs: OrderedDict[str, PlanningConfig] = field(init=False, default_factory=OrderedDict)

    def __post_init__(self) -> None:
        model = self.model
        self.models = model if isinstance(model, PlannerModels) else PlannerModels.single(model)
        self.ends = RunEnds(
            self.records,
            self.publisher,
            topics.PLAN_COMPLETED,
            PlanCompleted.of,
            run_id=lambda record: record.plan_id,
            has_ended=lambda record: record.state in FINAL_STATES,
            broke_down=failed_with,
            id_key="plan_id",
            run_span="planning.run",
            failed_span="planning.failed",
            completed_span="planning.completed",
            state_attribute="agora.plan_state",
        )

    def _seen(self, record: PlanRecord) -> None:
        self._configs[record.plan_id] = record.request.config
        self._configs.move_to_end(record.plan_id)
        while len(self._configs) > PLAN_CONFIGS_KEPT:
            self._configs.popitem(last=False)

    async def _config_of(self, plan_id: str) -> PlanningConfig:
        """The plan's config: as last seen here, else from its record (the defaults without one;
        and without a read when every tier goes to the same model)."""
        known = self._configs.get(plan_id)
        if known is not None or not self.models.by_tier:
            return known or DEFAULT_CONFIG
        record = await self.records.get(plan_id)
        if record is None:
            return DEFAULT_CONFIG
        self._seen(record)
        return record.request.config

    def _model(self, config: PlanningConfig, call: PlanningCall) -> MeteredModel:
        """A model for `call` at the tier `config` names, adding up the tokens it uses."""
        return MeteredModel(self.models.for_call(config, call))

    def register(self, host: WorkflowHost) -> None:
        host.activity(SAVE, self.save)
        host.activity(START_WAVE, self.start_wave)
        host.activity(ESTIMATE, self.estimate)
        host.activity(DRAFT, self.draft)
        host.activity(REPLAN, self.replan)
        host.activity(STOP, self.stop)
        host.activity(SYNTHESIZE, self.synthesize)
        host.activity(ANNOUNCE, self.announce)
        host.activity(FAIL, self.fail)
        host.activity(LOOKAHEAD, self.lookahead)
        host.activity(DISPATCH, self.dispatch)
        host.activity(CHECK, self.check)
        host.activity(VERIFY, self.verify)

    async def save(self, step: SaveRecord) -> None:
        self._seen(step.record)
        await self.records.save(step.record.plan_id, step.record, step.previous_state, step.finished)

    async def start_wave(self, step: StartWave) -> WaveStarted:
        """The wave's record saved (when a save was held for it), then its first attempts
        posted side by side (their tasks in one bulk publish)."""
        if step.save is not None:
            await self.save(step.save)
        # One read of the links a run of this step that failed part way may have noted already.
        noted = await self.links.get_many(subgoal_task_id(job, 1) for job in step.jobs)
        posts = (self._post_first(job, noted.get(subgoal_task_id(job, 1))) for job in step.jobs)
        return WaveStarted(approaches=list(await asyncio.gather(*posts)))

    async def _post_first(self, job: SubGoalJob, noted: Versioned[TaskLink] | None) -> Approach:
        """The job's first attempt posted, after its look-ahead: the way a run of this step
        that failed part way posted it, if it noted its link (a look-ahead asked again may
        choose another way, and a task is posted once)."""
        if noted is not None:
            chosen = Approach(approach=noted.value.approach)
        elif job.lookahead_paths:
            chosen = await self.lookahead(LookAhead(job=job, subgoal=job.subgoal))
        else:
            chosen = Approach()
        await self.dispatch(attempt_dispatch(job, job.subgoal, 1, chosen.approach))
        return chosen

    async def estimate(self, step: Estimate) -> Estimated:
        with step_span("planning.estimate", step.traceparent) as span:
            # The step names no plan: the estimate goes to the default planner tier.
            model = self._model(DEFAULT_CONFIG, PlanningCall.ESTIMATE)
            try:
                estimated = await steps.estimate_complexity(model, step.task)
            except ModelError as exc:
                span.set_attribute("agora.problem", str(exc)[:500])
                log.warning("no complexity estimate; the task is planned", extra={"reason": str(exc)[:500]})
                return Estimated(steps=None, usage=_usage(model))
            span.set_attribute("agora.estimated_steps", estimated)
            return Estimated(steps=estimated, usage=_usage(model))

    async def draft(self, step: Draft) -> Drafted:
        record = step.record
        self._seen(record)
        model = self._model(record.request.config, PlanningCall.PLAN)
        with step_span("planning.create_plan", record.traceparent, {"agora.plan_id": record.plan_id}) as span:
            try:
                plan = await steps.create_plan(
                    model,
                    step.task or record.request.task,
                    record.request.config,
                    skills=record.request.skills,
                )
            except PlanNotMade as exc:
                span.set_attribute("agora.problem", exc.message)
                return Drafted(usage=_usage(model), problem=exc.message)
            except ModelError as exc:
                span.set_attribute("agora.problem", str(exc)[:500])
                return Drafted(
                    usage=_usage(model),
                    problem=f"PLAN_NOT_MADE: the planner model could not answer: {exc}"[:2048],
                )
            span.set_attribute("agora.subgoals", len(plan.subgoals))
            return Drafted(usage=_usage(model), plan=plan)

    async def replan(self, step: Draft) -> Drafted:
        record, plan = step.record, step.record.plan
        self._seen(record)
        model = self._model(record.request.config, PlanningCall.REPLAN)
        assert plan is not None and step.failed_subgoal is not None
        attributes = {"agora.plan_id": record.plan_id, "agora.failed_subgoal": step.failed_subgoal}
        with step_span("planning.replan", record.traceparent, attributes) as span:
            try:
                replanned = await steps.replan(
                    model,
                    plan,
                    plan.subgoal(step.failed_subgoal),
                    record.request.config,
                    skills=record.request.skills,
                )
            except (PlanNotMade, InvalidPlan) as exc:
                span.set_attribute("agora.problem", exc.message)
                return Drafted(usage=_usage(model), problem=f"replan failed: {exc.message}"[:2048])
            except ModelError as exc:
                span.set_attribute("agora.problem", str(exc)[:500])
                return Drafted(
                    usage=_usage(model),
                    problem=f"replan failed: the planner model could not answer: {exc}"[:2048],
                )
            span.set_attribute("agora.plan_version", replanned.version)
            return Drafted(usage=_usage(model), plan=replanned)

    async def stop(self, step: Stop) -> PlanStop:
        """Park the plan for a person; the escalation id is fixed by the plan and its number
        of stops so far, so parking again after a crash finds the same escalation."""
        record, plan = step.record, step.record.plan
        escalation_id = f"plan.{record.plan_id}.stop{len(record.decisions) + 1}"
        if step.reason is StopReason.NOT_PLANNED or plan is None:
            detail = f"no plan was made: {step.problem}"[:MAX_NOTE_CHARS]
            errors, prompt, retries, step_number = [step.problem or detail], record.request.task, 0, 0
        elif step.reason is StopReason.SUBGOAL_FAILED and step.subgoal_id is not None:
            subgoal = plan.subgoal(step.subgoal_id)
            errors = [
                f"{a.task_id}: {a.ended} {a.verdict}: {a.reason}"
                for a in record.attempts
                if a.subgoal_id == subgoal.id
            ][-20:]
            detail = (
                f"subgoal {subgoal.id} failed after {subgoal.attempts} attempt(s) "
                f"and {record.replans} replan(s)"
            )
            prompt, retries = subgoal.description, max(0, subgoal.attempts - 1)
            step_number = [s.id for s in plan.subgoals].index(subgoal.id)
        else:
            budget = record.request.config.cost_budget_usd
            detail = f"the plan spent ${record.cost_usd:.4f} of its ${budget or 0:.4f} budget"
            errors, prompt, retries, step_number = [detail], record.request.task, 0, 0
        context = EscalationContext(
            job_id=record.plan_id,
            step=step_number,
            validation_results=[
                ValidationResult(
                    kind="subgoal",
                    subject=s.id,
                    passed=_subgoal_passed(s.status),
                    detail=str(s.status),
                    failure_reason=s.failure_reason or "",
                    figures={"attempts": s.attempts},
                )
                for s in (plan.subgoals if plan is not None else [])
            ],
            confidence=0.0,
            retry_count=retries,
            error_history=[e[:2048] for e in errors] or [detail],
            prompt_used=prompt,
            output_summary=_progress(record)[:16_000],
        )
        request = ParkRequest(
            waiting_party=WaitingParty(kind=WaitingPartyKind.PLAN_STEP, id=record.plan_id),
            context=context,
            who="planner",
            why=detail[:2048],
        )
        attributes = {"agora.plan_id": record.plan_id, "agora.escalation_id": escalation_id}
        with step_span("planning.escalate", record.traceparent, attributes):
            await self.escalations(escalation_id).park(request)
        return PlanStop(
            reason=step.reason, subgoal_id=step.subgoal_id, escalation_id=escalation_id, detail=detail
        )

    async def synthesize(self, step: Synthesize) -> Synthesized:
        record, plan = step.record, step.record.plan
        self._seen(record)
        model = self._model(record.request.config, PlanningCall.SYNTHESIZE)
        assert plan is not None
        with step_span("planning.synthesize", record.traceparent, {"agora.plan_id": record.plan_id}) as span:
            try:
                final_output = await steps.synthesize(model, plan)
                return Synthesized(usage=_usage(model), final_output=final_output)
            except ModelError as exc:
                span.set_attribute("agora.problem", str(exc)[:500])
                return Synthesized(
                    usage=_usage(model),
                    final_output="",
                    problem=f"no synthesis: the model could not answer: {exc}"[:2048],
                )

    async def lookahead(self, step: LookAhead) -> Approach:
        job = step.job
        model = self._model(await self._config_of(job.plan_id), PlanningCall.LOOKAHEAD)
        attributes = {
            "agora.plan_id": job.plan_id,
            "agora.subgoal": job.subgoal.id,
            "agora.paths": job.lookahead_paths,
        }
        with step_span("planning.lookahead", job.traceparent, attributes) as span:
            try:
                path = await steps.lookahead(
                    model, job.task, step.subgoal, job.lookahead_paths, step.previous_failure
                )
            except ModelError as exc:  # lookahead only helps: the subgoal goes out without it
                span.set_attribute("agora.problem", str(exc)[:500])
                return Approach(usage=_usage(model))
            if path is None:
                return Approach(usage=_usage(model))
            span.set_attribute("agora.confidence", path.confidence)
            return Approach(usage=_usage(model), approach=path.approach)

    async def announce(self, step: Announce) -> None:
        await self.ends.announce(step.record)

    async def fail(self, step: PlanFailed) -> None:
        """End a plan whose run broke down (FAILED with the reason) and announce it."""
        start, at = step.start, step.failed_at
        await self.ends.fail(
            start.request.plan_id,
            step.failure,
            failed_at=at,
            traceparent=start.traceparent,
            parent_traceparent=start.parent_traceparent,
            fresh=lambda: new_record(start.request, at).model_copy(update={"traceparent": start.traceparent}),
        )

    async def dispatch(self, step: Dispatch) -> None:
        """Post one attempt of a subgoal to the market (`agora.tasks`, the task id as message id,
        so a repeat is one task), after noting which workflow waits for it."""
        job = step.job
        link = TaskLink(
            task_id=step.task_id, instance_id=step.instance_id, event=step.event, approach=step.approach
        )
        await self.links.save(step.task_id, link)
        spec = TaskSpec(
            task_id=step.task_id,
            description=_task_description(step.description, job.subgoal.success_criterion, step.approach),
            required_skills=job.required_skills,
            budget_usd=job.budget_usd,
            min_success_threshold=job.min_success_threshold,
            allow_partial=True,
            reply_to=self.publisher.app_id,
        )
        attributes = {
            "agora.plan_id": job.plan_id,
            "agora.subgoal": job.subgoal.id,
            "agora.wave": job.wave,
            "agora.attempt": step.attempt,
            "task_id": step.task_id,
        }
        with step_span("planning.subgoal", job.traceparent, attributes):
            await self.publisher.publish(topics.TASKS, spec, message_id=step.task_id)

    async def check(self, step: Check) -> TaskEnded | None:
        """The task's end as the board recorded it, if it has one."""
        return await end_on_board(self.tasks, step.task_id)

    async def verify(self, step: Verify) -> Verified:
        job, ended = step.job, step.ended
        attributes = {"agora.plan_id": job.plan_id, "agora.subgoal": job.subgoal.id}
        with step_span("planning.verify", job.traceparent, attributes) as span:
            verified = await self._verified(step)
            span.set_attribute("agora.verdict", str(verified.verdict))
            span.set_attribute("agora.attempt_end", str(verified.ended))
            if ended is not None and ended.outcome is not None:
                span.set_attribute("task_id", ended.task_id)
            return verified

    async def _verified(self, step: Verify) -> Verified:
        ended = step.ended
        fail = VerificationResult.FAIL
        if ended is None:
            reason = f"no outcome within {step.job.attempt_timeout_seconds} s"
            return Verified(ended=AttemptEnd.TIMED_OUT, verdict=fail, reason=reason)
        outcome = ended.outcome
        if outcome is None:
            reason = f"the market could not run it: {ended.rejected_reason or 'rejected'}"
            return Verified(ended=AttemptEnd.REJECTED, verdict=fail, reason=reason)
        model = self._model(await self._config_of(step.job.plan_id), PlanningCall.VERIFY)
        if failure_code(outcome) is not None:
            # The run was ended by an error its runtime names (its deadline, its budget...): that
            # is the attempt's reason, which replanning and a person's stop read; there is no
            # result to verify.
            return Verified(
                usage=_usage(model),
                ended=AttemptEnd.FAILED,
                verdict=fail,
                reason=outcome.summary,
                agent_id=outcome.agent_id,
                cost_usd=outcome.actual_cost_usd,
            )
        if ended.check_failed:
            # The task's own check failed the result: that is the attempt's end and reason,
            # whatever the agent claimed; no model is asked to second-guess it.
            assert ended.verdict is not None
            return Verified(
                usage=_usage(model),
                ended=AttemptEnd.FAILED,
                verdict=fail,
                reason=f"its check failed: {ended.verdict.reason}"[:2048],
                agent_id=outcome.agent_id,
                cost_usd=outcome.actual_cost_usd,
            )
        how = (
            AttemptEnd.SUCCEEDED
            if ended.succeeded
            else AttemptEnd.PARTIAL
            if outcome.partial
            else AttemptEnd.FAILED
        )
        try:
            answer = await steps.verify(model, step.subgoal, str(how), outcome.summary)
        except ModelError as exc:
            reason = f"the verifier could not answer: {exc}"[:2048]
            return Verified(
                usage=_usage(model),
                ended=how,
                verdict=fail,
                reason=reason,
                agent_id=outcome.agent_id,
                cost_usd=outcome.actual_cost_usd,
                output=outcome.summary,
            )
        return Verified(
            usage=_usage(model),
            ended=how,
            verdict=answer.result,
            reason=answer.reason,
            output=outcome.summary,
            agent_id=outcome.agent_id,
            cost_usd=outcome.actual_cost_usd,
        )


def _usage(model: MeteredModel) -> TokenUsage:
    return TokenUsage(prompt_tokens=model.prompt_tokens, completion_tokens=model.completion_tokens)


def _task_description(description: str, criterion: str, approach: str) -> str:
    """What the agent is asked: the subgoal, how it is judged, and the path the lookahead chose."""
    parts = [description, f"Success criterion: {criterion}"]
    if approach:
        parts.append(f"Approach: {approach}")
    return "\n".join(parts)[:MAX_TEXT_CHARS]


def _progress(record: PlanRecord) -> str:
    plan = record.plan
    if plan is None:
        return f"Plan {record.plan_id}: no plan yet for: {record.request.task}"
    lines = [f"Plan {record.plan_id} (version {plan.version}) for: {plan.task}"]
    for subgoal in plan.subgoals:
        line = f"- {subgoal.id} [{subgoal.status}]"
        if subgoal.status is SubGoalStatus.COMPLETED and subgoal.output_summary:
            line += f": {subgoal.output_summary}"
        elif subgoal.failure_reason:
            line += f": {subgoal.failure_reason}"
        lines.append(line)
    return "\n".join(lines)


def _subgoal_passed(status: SubGoalStatus) -> bool | None:
    """A subgoal as a check: completed passed, failed or skipped did not, the rest is open."""
    if status is SubGoalStatus.COMPLETED:
        return True
    if status in (SubGoalStatus.FAILED, SubGoalStatus.SKIPPED):
        return False
    return None
