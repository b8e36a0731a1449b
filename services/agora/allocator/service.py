"""MarketAllocator: runs the allocation pipeline for tasks from the intake topic.

A delivered task is first posted to the task board (durable, idempotent) and acknowledged;
the allocation itself runs in the background. Every step is recorded on the `Task` actor, so a
task is always in a terminal or resumable state: on start-up the allocator resumes tasks left
PENDING or BIDDING, and republishes decisions whose event did not go out. The `Task` actor's
lifecycle admits one decision per task, so a task is never allocated twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

from opentelemetry import trace
from pydantic import ValidationError

from agora.allocator.estimates import ESTIMATES_PER_CALL, RATING_TOKENS, MarketEstimates, NoEstimate
from agora.core.allocation import allocate, fallback_bid
from agora.core.contracts import (
    MAX_OUTCOMES_APPLIED_AT_ONCE,
    BidOffer,
    BidSolicitation,
    FilterAnswer,
    OutcomeReport,
    OutcomeReports,
)
from agora.core.errors import AgoraError, ConflictingTask, NotFound
from agora.core.market import AllocationResult, AllocationStatus, Bid, ReputationRecord, TaskOutcome, TaskSpec
from agora.core.messages import RegistryChange, RegistryChanged, TaskDecision
from agora.core.models import CapabilityProfile, CapabilityQuery
from agora.core.reputation import ReputationTracker
from agora.core.scoring import BidScorer
from agora.core.task_lifecycle import TaskRecord
from agora.llm import ModelClient
from agora.runtime.actor_client import ActorClient
from agora.runtime.batching import KeyedMicroBatcher, group_commits
from agora.runtime.clients import (
    RegistryClient,
    ReputationActors,
    TaskBoardClient,
    agent_runs_actors,
    reputation_actors,
    task_actors,
)
from agora.runtime.pubsub import RejectMessage
from agora.runtime.service import ServiceContext
from agora.runtime.shared_calls import SharedCalls
from agora.runtime.sidecar import DaprSidecar
from agora.runtime.tracing import TASK_ID_ATTRIBUTE, tracer

log = logging.getLogger(__name__)

RESUMABLE = (AllocationStatus.PENDING, AllocationStatus.BIDDING)
DECIDED = (AllocationStatus.ALLOCATED, AllocationStatus.REJECTED)
RETRY_INITIAL_S = 0.5
RETRY_MAX_S = 30.0


DEFAULT_AGENT_BID_MS = 300
"""How long an agent's own app has to answer a bid solicitation, unless the task says
(`TaskSpec.bid_deadline_ms`)."""


class AgentBids:
    """Bid solicitations to agents' own apps (`POST /v1/bids`, service invocation)."""

    def __init__(self, sidecar: DaprSidecar, default_deadline_ms: int = DEFAULT_AGENT_BID_MS) -> None:
        self._sidecar = sidecar
        self._default_ms = default_deadline_ms

    def deadline_ms(self, spec: TaskSpec) -> int:
        return spec.bid_deadline_ms or self._default_ms

    async def ask(self, app_id: str, profile: CapabilityProfile, spec: TaskSpec) -> Bid:
        """The agent's own bid, made from its app's offer for this task and agent (whatever the
        answer says they are); raises when the app fails, answers late or out of contract."""
        deadline_ms = self.deadline_ms(spec)
        solicitation = BidSolicitation(agent_id=profile.agent_id, task=spec, respond_within_ms=deadline_ms)
        asked = solicitation.model_dump(mode="json")
        async with asyncio.timeout(deadline_ms / 1000):
            answer = await self._sidecar.invoke(app_id, "v1/bids", json_body=asked)
        offer = BidOffer.model_validate(answer)
        return Bid(
            task_id=spec.task_id,
            agent_id=profile.agent_id,
            self_reported_success_prob=offer.self_reported_success_prob,
            estimated_cost_usd=offer.estimated_cost_usd,
            estimated_steps=offer.estimated_steps,
            rationale=offer.rationale,
        )


class _Ports:
    """The pipeline's view of the market: the candidates found, and their bids: an agent with
    an app of its own is asked there (by its deadline), the others are estimated by the
    market's model (`MarketEstimates`: together, one call for the lot); an app that does not
    answer in time gets the model's estimate, and a candidate the model does not rate gets the
    profile-based fallback bid, each marked as a fallback with the reason."""

    def __init__(
        self,
        profiles: list[CapabilityProfile],
        filtered_out: list[str],
        estimates: MarketEstimates,
        agent_bids: AgentBids,
    ) -> None:
        self._profiles = profiles
        self._filtered_out = filtered_out
        self._estimates = estimates
        self._agent_bids = agent_bids

    async def capable_agents(self, spec: TaskSpec) -> tuple[list[CapabilityProfile], list[str]]:
        return self._profiles, self._filtered_out

    async def solicit_bid(self, profile: CapabilityProfile, spec: TaskSpec) -> Bid:
        if profile.bid_app_id is None:
            return await self._estimated_bid(profile, spec)
        app = f"the agent's app {profile.bid_app_id}"
        try:
            return await self._agent_bids.ask(profile.bid_app_id, profile, spec)
        except TimeoutError:
            reason = f"{app} did not bid within {self._agent_bids.deadline_ms(spec)} ms"
        except (ValidationError, ValueError) as exc:
            reason = f"{app} answered out of contract: {str(exc)[:300]}"
        except Exception as exc:  # the app down, refused, unreachable: its agent still competes
            reason = f"{app} could not bid: {type(exc).__name__}: {str(exc)[:300]}"
        estimated = await self._estimated_bid(profile, spec, reason)
        if estimated.fallback:  # not rated either: the reason names both
            return estimated
        return estimated.model_copy(update={"fallback": True, "fallback_reason": reason[:2048]})

    async def _estimated_bid(self, profile: CapabilityProfile, spec: TaskSpec, why: str = "") -> Bid:
        estimate = await self._estimates.estimate(profile)
        if isinstance(estimate, NoEstimate):
            return fallback_bid(profile, spec, (f"{why}; " if why else "") + estimate.reason)
        steps = min(estimate.estimated_steps, profile.max_steps)
        return Bid(
            task_id=spec.task_id,
            agent_id=profile.agent_id,
            self_reported_success_prob=estimate.success_prob,
            estimated_cost_usd=round(steps * profile.cost_per_step_usd, 6),
            estimated_steps=steps,
            rationale=estimate.rationale,
        )


class ReputationReads:
    """Agents' reputation records for scoring, each read at most once per `max_age_s`: in a
    burst of tasks for the same agents, one read serves them all. Concurrent reads of one agent
    share one call, and an outcome applied here replaces the agent's entry at once, so only
    outcomes applied by other allocator replicas take up to `max_age_s` to count."""

    def __init__(self, reputations: ReputationActors, max_age_s: float) -> None:
        self._reputations = reputations
        self._max_age_s = max_age_s
        self._cached: dict[str, tuple[float, ReputationRecord]] = {}
        self._reads: SharedCalls[str, ReputationRecord] = SharedCalls()

    async def get(self, agent_id: str) -> ReputationRecord:
        now = time.monotonic()
        cached = self._cached.get(agent_id)
        if cached is not None and now - cached[0] < self._max_age_s:
            return cached[1]
        return await self._reads.call(agent_id, lambda: self._read(agent_id, now))

    async def _read(self, agent_id: str, started: float) -> ReputationRecord:
        record = await self._reputations(agent_id).get_record()
        self._cached[agent_id] = (started, record)
        return record

    def updated(self, record: ReputationRecord) -> None:
        self._cached[record.agent_id] = (time.monotonic(), record)


class ReputationWrites:
    """Outcomes applied to agents' reputations: those of one agent that come together (outcomes
    delivered side by side) are applied in one `apply_outcomes` call, a group commit per agent;
    each applied record replaces the agent's entry in `reads` at once."""

    def __init__(self, reputations: ReputationActors, reads: ReputationReads) -> None:
        self._reputations = reputations
        self._reads = reads
        self._writes: KeyedMicroBatcher[str, OutcomeReport, None] = group_commits(self._write, "reputation")

    async def apply(self, report: OutcomeReport) -> None:
        await self._writes.submit(report.outcome.agent_id, report)

    async def _write(self, agent_id: str, reports: list[OutcomeReport]) -> None:
        for start in range(0, len(reports), MAX_OUTCOMES_APPLIED_AT_ONCE):
            batch = OutcomeReports(reports=reports[start : start + MAX_OUTCOMES_APPLIED_AT_ONCE])
            self._reads.updated(await self._reputations(agent_id).apply_outcomes(batch))


class SharedFilter:
    """Registry filters for the allocator: concurrent identical queries (a burst of tasks that
    ask for the same skills) share one call. Nothing is kept once the call returns, so a
    registration is seen by the next query."""

    def __init__(self, registry: RegistryClient) -> None:
        self._registry = registry
        self._asking: SharedCalls[str, FilterAnswer] = SharedCalls()

    async def filter(self, query: CapabilityQuery) -> FilterAnswer:
        return await self._asking.call(query.model_dump_json(), lambda: self._registry.filter(query))


DEFAULT_MAX_IN_FLIGHT = 64
QUEUED_READ_AT_ONCE = 200
"""Waiting tasks read when a new agent joins, to offer it the oldest it can take."""


class MarketAllocator:
    def __init__(
        self,
        ctx: ServiceContext,
        model: ModelClient,
        *,
        registry_app_id: str,
        taskboard_app_id: str,
        bid_timeout_s: float,
        exploration_weight: float,
        reputation_max_age_s: float,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        agent_bid_ms: int = DEFAULT_AGENT_BID_MS,
        estimates_per_call: int = ESTIMATES_PER_CALL,
        estimate_tokens: int = RATING_TOKENS,
    ) -> None:
        self._ctx = ctx
        actors = ActorClient(ctx.sidecar)
        self._tasks = task_actors(actors)
        self._agent_runs = agent_runs_actors(actors)
        self._registry = RegistryClient(ctx.sidecar, registry_app_id)
        self._agents_seen: set[str] = set()
        self._reputations = reputation_actors(actors)
        self._reputation_reads = ReputationReads(self._reputations, reputation_max_age_s)
        self._reputation_writes = ReputationWrites(self._reputations, self._reputation_reads)
        self._registry_api = SharedFilter(RegistryClient(ctx.sidecar, registry_app_id))
        self._board_api = TaskBoardClient(ctx.sidecar, taskboard_app_id)
        self._model = model
        self._agent_bids = AgentBids(ctx.sidecar, agent_bid_ms)
        self._bid_timeout_s = bid_timeout_s
        self._estimates_per_call = estimates_per_call
        self._estimate_tokens = estimate_tokens
        self._exploration_weight = exploration_weight
        self._running: set[str] = set()
        self._slots = asyncio.Semaphore(max_in_flight)
        """Allocations under way at once. Intake waits for a free one before it acknowledges
        a task, so a flood stays in the broker (bounded, durable) instead of in this process."""
        self._tracer = tracer("agora.allocator")

    async def on_task(self, spec: TaskSpec) -> None:
        """Intake: allocate the task and record it with its decision in one call to the board,
        then acknowledge the delivery (until then the broker keeps the task). An allocation that
        fails part way posts the task to the board (durable) and goes on in the background with
        backoff, so a dependency that is away for long keeps nothing in the broker."""
        # The intake's span names the task: its trace is found by it (the console's timeline).
        trace.get_current_span().set_attribute(TASK_ID_ATTRIBUTE, spec.task_id)
        task_id = spec.task_id
        if not await self._claim(task_id):
            return  # this replica is deciding it already (a redelivery)
        try:
            result = await self._allocate(spec)
            await self._tasks(task_id).decide(TaskDecision(spec=spec, allocation=result))
        except ConflictingTask as exc:
            self._release(task_id)
            raise RejectMessage(f"{exc.code}: {exc.message}") from exc
        except Exception:
            log.warning("allocation interrupted; posting the task to retry it", exc_info=True,
                        extra={"task_id": task_id})  # fmt: skip
        except BaseException:
            self._release(task_id)
            raise
        else:
            self._release(task_id)
            return
        try:
            posted = await self._tasks(task_id).post_task(spec)
        except ConflictingTask as exc:
            self._release(task_id)
            raise RejectMessage(f"{exc.code}: {exc.message}") from exc
        except BaseException:
            self._release(task_id)
            raise
        self._ctx.spawn(self._run(task_id, posted), name=f"allocate {task_id}")

    async def _claim(self, task_id: str) -> bool:
        """Take one of the allocation slots for `task_id`; False when it is under way here."""
        if task_id in self._running:
            return False
        await self._slots.acquire()
        if task_id in self._running:  # started by someone else while this waited
            self._slots.release()
            return False
        self._running.add(task_id)
        return True

    def _release(self, task_id: str) -> None:
        self._running.discard(task_id)
        self._slots.release()

    async def _start(self, task_id: str, known: TaskRecord | None = None) -> None:
        if await self._claim(task_id):
            self._ctx.spawn(self._run(task_id, known), name=f"allocate {task_id}")

    async def _run(self, task_id: str, known: TaskRecord | None = None) -> None:
        """`run` until the task's decision is out. A failure part way (a sidecar call timing out,
        a dependency's circuit breaker open) is retried with backoff: the task is durable on the
        board, so every attempt continues from where the last one stopped."""
        delay = RETRY_INITIAL_S
        try:
            while True:
                try:
                    await self.run(task_id, known)
                    return
                except NotFound:
                    log.error("task vanished from the board", extra={"task_id": task_id})
                    return
                except Exception:
                    log.warning(
                        "allocation interrupted; retrying",
                        exc_info=True,
                        extra={"task_id": task_id, "delay_s": delay},
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX_S)
                    known = None  # where the board stands now
        finally:
            self._release(task_id)

    async def run(self, task_id: str, known: TaskRecord | None = None) -> AllocationResult | None:
        """Take a task from wherever it stands (`known`: as just posted) to a published
        decision: one call to the board records the decision with every bid and announces it."""
        record = known or await self._task(task_id)
        if record.status in RESUMABLE:
            result = await self._allocate(record.spec)
            record = await self._tasks(result.task_id).record_allocation(result)
        if record.status in DECIDED and not record.award_published:
            # The board announces its decisions; this one's publish failed part way.
            record = await self._tasks(task_id).announce()
        return record.allocation

    async def _allocate(self, spec: TaskSpec) -> AllocationResult:
        profiles, filtered_out = await self._capable(spec)
        records = await asyncio.gather(*(self._reputation_reads.get(p.agent_id) for p in profiles))
        tracker = ReputationTracker.from_records(records)
        estimates = MarketEstimates(
            self._model, spec, per_call=self._estimates_per_call, tokens_per_candidate=self._estimate_tokens
        )
        result = await allocate(
            spec,
            _Ports(profiles, filtered_out, estimates, self._agent_bids),
            BidScorer(tracker, exploration_weight=self._exploration_weight),
            bid_timeout_s=self._bid_timeout_s,
            ledger=tracker,
        )
        bidders = {b.agent_id for b in result.all_bids}
        limits = {p.agent_id: p.max_concurrent_runs for p in profiles if p.agent_id in bidders}
        return result.model_copy(update={"model_bill": estimates.bill, "run_limits": limits})

    async def _capable(self, spec: TaskSpec) -> tuple[list[CapabilityProfile], list[str]]:
        query = CapabilityQuery(required_skills=spec.required_skills, preferred_skills=spec.preferred_skills)
        answer = await self._registry_api.filter(query)
        return answer.agents, answer.filtered_out

    async def on_outcome(self, outcome: TaskOutcome) -> None:
        """An outcome an agent's runtime reports without recording it on the board itself (a
        runtime that only publishes, as the Go example): recorded there (or refused, with the
        board's reason). The board announces what it records (`on_outcome_recorded`)."""
        try:
            await self._tasks(outcome.task_id).mark_outcome(outcome)
        except AgoraError as exc:
            if not exc.permanent:
                raise  # the board or its store is away: the delivery is retried
            raise RejectMessage(f"{exc.code}: {exc.message}") from exc

    async def on_outcome_recorded(self, report: OutcomeReport) -> None:
        """The board recorded an outcome: the agent's reputation learns it (once per task). Only
        the board publishes this topic, and it does so from the record it just committed."""
        await self._reputation_writes.apply(report)

    async def on_registry_changed(self, change: RegistryChanged) -> None:
        """An agent this replica has not seen registered before may take tasks that wait for a
        run slot: they are offered to it (in the background)."""
        if change.change is not RegistryChange.REGISTERED or change.agent_id in self._agents_seen:
            return
        self._agents_seen.add(change.agent_id)
        self._ctx.spawn(
            self._offer_queued_quietly(change.agent_id), name=f"offer queued tasks to {change.agent_id}"
        )

    async def _offer_queued_quietly(self, agent_id: str) -> None:
        try:
            await self.offer_queued(agent_id)
        except Exception as exc:  # the tasks are tried again as slots free, and by their reminders
            log.warning(
                "offering waiting tasks to a new agent failed",
                extra={"agent_id": agent_id, "reason": repr(exc)[:500]},
            )

    async def offer_queued(self, agent_id: str, read_at_most: int = QUEUED_READ_AT_ONCE) -> list[str]:
        """Decide again, with new bids, the oldest tasks waiting for a run slot that the agent
        `agent_id` (new to the market) can take and did not bid for, as many as it has free
        slots: the tasks it was awarded."""
        waiting = (await self._board_api.listed(AllocationStatus.QUEUED)).task_ids[:read_at_most]
        if not waiting:
            return []
        profile = await self._registry.agent(agent_id)
        free = profile.max_concurrent_runs - len((await self._agent_runs(agent_id).view()).runs)
        if free <= 0:
            return []
        records = [
            r for r in await asyncio.gather(*(self._task_or_none(t) for t in waiting)) if r is not None
        ]
        skills = set(profile.skill_tags)
        fitting = sorted(
            (
                r
                for r in records
                if r.status is AllocationStatus.QUEUED
                and r.queued is not None
                and set(r.spec.required_skills) <= skills
                and all(b.agent_id != agent_id for b in (r.allocation.all_bids if r.allocation else []))
            ),
            key=lambda r: (r.queued.since if r.queued else r.history[0].at, r.task_id),
        )
        awarded: list[str] = []
        for record in fitting:
            if len(awarded) >= free:
                break
            result = await self._allocate(record.spec)
            decided = await self._tasks(record.task_id).rejudge_queued(result)
            award = decided.current_award
            if award is not None and award.agent_id == agent_id:
                awarded.append(record.task_id)
        if awarded:
            log.info("tasks that waited for a run slot went to a new agent",
                     extra={"agent_id": agent_id, "task_ids": awarded})  # fmt: skip
        return awarded

    async def _task_or_none(self, task_id: str) -> TaskRecord | None:
        try:
            return await self._task(task_id)
        except NotFound:
            return None

    async def sweep_forever(self, interval_s: float, stale_after_s: float) -> None:
        """Anti-entropy: take over undecided tasks nobody has moved for `stale_after_s` (their
        allocator replica died, or their run gave up). A task another replica is still working
        on is left alone, and if two replicas do race, the board admits one decision."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.resume_stale(stale_after_s)
            except Exception:
                log.warning("sweep for stale tasks failed", exc_info=True)

    async def resume_stale(self, stale_after_s: float) -> list[str]:
        now = datetime.now(UTC)
        resumed = []
        for status in RESUMABLE:
            for task_id in await self._listed(status):
                if task_id in self._running:
                    continue
                try:
                    record = await self._task(task_id)
                except NotFound:
                    continue  # listed, but its record is gone (past its retention)
                if (
                    record.status in RESUMABLE
                    and (now - record.history[-1].at).total_seconds() > stale_after_s
                ):
                    resumed.append(task_id)
                    await self._start(task_id)
        if resumed:
            log.info("resumed stale tasks", extra={"task_ids": resumed})
        return resumed

    async def _listed(self, status: AllocationStatus) -> list[str]:
        return (await self._board_api.listed(status)).task_ids

    async def resume(self) -> None:
        """Pick up tasks a previous run left undecided or unannounced. The board may not answer
        yet (in the embedded default it is this very app, still starting behind its sidecar's
        health check): a failure is retried with backoff until the listing is read."""
        delay = RETRY_INITIAL_S
        while True:
            try:
                await self._resume_listed()
                return
            except AgoraError as exc:
                if exc.permanent:
                    raise
                reason = repr(exc)
            except Exception as exc:  # the board or a sidecar not reachable yet
                reason = repr(exc)
            log.warning(
                "resuming undecided tasks failed; retrying", extra={"reason": reason[:300], "delay_s": delay}
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    async def _resume_listed(self) -> None:
        for status in (*RESUMABLE, *DECIDED):
            for task_id in await self._listed(status):
                if status in RESUMABLE:
                    await self._start(task_id)
                else:
                    record = await self._task(task_id)
                    if not record.award_published:
                        await self._start(task_id)

    async def _task(self, task_id: str) -> TaskRecord:
        return await self._tasks(task_id).get_task()
