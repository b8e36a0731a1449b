"""An award is run at once on its first delivery; one that may have been handled before (old
enough to be a redelivery, or from a board that does not date its awards) is checked with the
board first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agora.core.market import Bid, BidScore, TaskSpec
from agora.core.messages import TaskAwarded
from agora.sdk._app import FRESH_AWARD_SECONDS, first_delivery

NOW = datetime(2026, 11, 27, 7, 0, tzinfo=UTC)


def award(awarded_at: datetime | None) -> TaskAwarded:
    bid = Bid(
        task_id="t1", agent_id="a1", self_reported_success_prob=0.9, estimated_cost_usd=0.1, estimated_steps=2
    )
    score = BidScore(
        agent_id="a1", bid_id=bid.bid_id, raw_success_prob=0.9, calibrated_success_prob=0.9,
        reputation_score=0.5, cost_score=0.5, composite=0.5, ucb_bonus=0.0, final_score=0.5,
    )  # fmt: skip
    return TaskAwarded(
        task_id="t1",
        agent_id="a1",
        spec=TaskSpec(task_id="t1", description="d", required_skills=["s"]),
        bid=bid,
        score=score,
        award_token="t" * 32,
        attempt=2,
        awarded_at=awarded_at,
    )


def test_a_young_award_is_a_first_delivery_and_an_old_or_undated_one_is_checked() -> None:
    assert first_delivery(award(NOW - timedelta(seconds=1)), NOW)
    assert first_delivery(award(NOW + timedelta(seconds=1)), NOW)  # the board's clock a little ahead
    # The broker redelivers after 15 s: such an award, or one that waited in it, is checked.
    assert not first_delivery(award(NOW - timedelta(seconds=FRESH_AWARD_SECONDS + 0.1)), NOW)
    assert not first_delivery(award(NOW - timedelta(seconds=15)), NOW)
    assert not first_delivery(award(None), NOW)
    assert FRESH_AWARD_SECONDS * 3 <= 15
