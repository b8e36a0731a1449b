"""The market's outcome count `N` and the UCB bonus a reputation record reports over it: each
`Reputation` actor notes its agent's total; `N` is the sum over every agent; a record's
`ucb_confidence` is the reference's `sqrt(2 ln max(2, N) / max(1, n_i))`."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from agora.core.contracts import OutcomeReport, OutcomeReports
from agora.core.market import ReputationRecord, TaskOutcome
from agora.core.reputation import ReputationTracker, ucb_bonus, with_ucb_confidence
from agora.reputation.actors import Reputation, ReputationDeps
from agora.reputation.outcome_counts import AgentTotals, MarketOutcomes
from agora.runtime.sidecar import DaprError
from agora.sdk.testing import MemoryRepository
from tests.unit.helpers import answer_of, hosted


def counts(shards: int = 4) -> tuple[MarketOutcomes, MemoryRepository[AgentTotals]]:
    repository = MemoryRepository(AgentTotals)
    return MarketOutcomes(repository.typed(), shards=shards), repository


def report(agent_id: str, task_id: str, success: bool = True) -> OutcomeReport:
    outcome = TaskOutcome(
        task_id=task_id, agent_id=agent_id, actual_success=success, actual_cost_usd=0.01, actual_steps=1
    )
    return OutcomeReport(outcome=outcome, counts_as_success=success)


# --- the record's UCB bonus --------------------------------------------------------------------


def test_a_record_reports_the_ucb_bonus_of_the_reference_formula_over_the_market_count() -> None:
    record = ReputationRecord(agent_id="a", total_tasks=4, successful_tasks=3, success_rate=0.75)
    assert with_ucb_confidence(record, 100).ucb_confidence == pytest.approx(math.sqrt(2 * math.log(100) / 4))
    fresh = ReputationRecord(agent_id="new")
    assert with_ucb_confidence(fresh, 0).ucb_confidence == pytest.approx(math.sqrt(2 * math.log(2)))
    assert with_ucb_confidence(fresh, 50).ucb_confidence == pytest.approx(math.sqrt(2 * math.log(50)))
    # A count behind the agent's own outcomes counts at least those.
    assert with_ucb_confidence(record, 1).ucb_confidence == pytest.approx(ucb_bonus(4, 4))
    assert record.ucb_confidence == 1.0, "the record itself is left as it was"
    with pytest.raises(ValueError, match="market_total"):
        with_ucb_confidence(record, -1)


async def test_the_tracker_s_records_report_the_same_bonus_as_its_scoring() -> None:
    tracker = ReputationTracker()
    for i in range(3):
        await tracker.update(TaskOutcome(task_id=f"t{i}", agent_id="a", actual_success=True,
                                         actual_cost_usd=0.0, actual_steps=1))  # fmt: skip
    await tracker.update(TaskOutcome(task_id="t9", agent_id="b", actual_success=False,
                                     actual_cost_usd=0.0, actual_steps=1))  # fmt: skip
    record = await tracker.get("a")
    expected = math.sqrt(2 * math.log(4) / 3)  # N = 4 outcomes in all, n_a = 3
    assert record.ucb_confidence == await tracker.ucb_bonus("a") == pytest.approx(expected)


# --- the market's count ------------------------------------------------------------------------


async def test_the_market_count_sums_every_agent_s_latest_total() -> None:
    market, _ = counts()
    assert await market.total() == 0
    await market.note("a", 3)
    await market.note("b", 2)
    await market.note("c", 1)
    assert await market.total() == 6
    await market.note("a", 5)
    assert await market.total() == 8


async def test_a_repeated_or_late_note_changes_nothing() -> None:
    market, repository = counts()
    await market.note("a", 5)
    await market.note("a", 5)  # a retried call
    await market.note("a", 2)  # overtaken by a newer note
    assert await market.total() == 5
    stored = {k: v for k, (v, _) in repository.values.items()}
    assert sum(sum(shard["totals"].values()) for shard in stored.values()) == 5


async def test_notes_that_come_together_are_written_together() -> None:
    market, repository = counts(shards=1)
    await market.note("warm", 1)  # the shard exists
    before = repository.calls
    await asyncio.gather(*(market.note(f"agent-{i}", i + 1) for i in range(50)))
    assert await market.total() == 1 + sum(range(1, 51))
    # The first note's write, then one write for the 49 queued behind it: a read and a
    # transaction each, not a hundred calls.
    assert repository.calls - before <= 5


async def test_a_write_that_loses_a_race_is_redone_from_a_fresh_read() -> None:
    market, repository = counts(shards=1)
    await market.note("a", 1)
    other = MarketOutcomes(repository.typed(), shards=1)
    transact = repository.transact_json
    raced = False

    async def racing(values: dict[str, Any], **kwargs: Any) -> None:
        nonlocal raced
        if not raced:  # another replica writes the shard between this read and this write
            raced = True
            await other.note("b", 4)
        await transact(values, **kwargs)

    repository.transact_json = racing  # type: ignore[method-assign]
    await market.note("a", 3)
    assert raced and await market.total() == 7, "both notes kept: a at 3, b at 4"


async def test_a_note_that_keeps_failing_raises() -> None:
    market, repository = counts(shards=1)
    await market.note("a", 1)

    async def refused(values: dict[str, Any], **kwargs: Any) -> None:
        raise DaprError(409, "ERR_STATE_TRANSACTION", "etag mismatch")

    repository.transact_json = refused  # type: ignore[method-assign]
    with pytest.raises(Exception, match="gave up"):
        await market.note("a", 2)


# --- the actor notes its agent's total -----------------------------------------------------------


async def test_a_reputation_notes_its_agent_s_total_in_the_market_count_on_every_call() -> None:
    market, _ = counts()
    a, b = hosted(Reputation, "a", ReputationDeps(market)), hosted(Reputation, "b", ReputationDeps(market))
    for actor in (a, b):
        await actor._on_activate()
    await a.apply_outcomes(OutcomeReports(reports=[report("a", f"t{i}") for i in range(3)]))
    await b.apply_outcome(report("b", "u1", success=False))
    assert await market.total() == 4

    # The same outcome again applies nothing but notes the total again (a retry after a note
    # that failed): the count is unchanged.
    again = answer_of(await a.apply_outcome(report("a", "t0"))).result
    assert isinstance(again, ReputationRecord) and again.total_tasks == 3
    assert await market.total() == 4


async def test_a_note_lost_to_a_failure_is_made_good_by_the_agent_s_next_call() -> None:
    market, repository = counts()
    actor = hosted(Reputation, "a", ReputationDeps(market))
    await actor._on_activate()
    get_many = repository.get_many

    async def away(item_ids: Any) -> Any:
        raise DaprError(500, "ERR_STATE_GET", "the store is away")

    repository.get_many = away  # type: ignore[method-assign]
    with pytest.raises(DaprError):  # the caller sees the failure and retries
        await actor.apply_outcome(report("a", "t1"))
    assert actor.state.record.total_tasks == 1, "the outcome itself was applied"
    repository.get_many = get_many  # type: ignore[method-assign]
    assert await market.total() == 0
    await actor.apply_outcome(report("a", "t1"))  # the retry: applied already, noted now
    assert await market.total() == 1
