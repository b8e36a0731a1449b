"""The conformal act-vs-escalate gate: candidate probabilities, the quantile, the decision,
and its coverage on exchangeable debates."""

from __future__ import annotations

import math
import random

import pytest

from agora.core.conformal import (
    MIN_CALIBRATION,
    OTHER,
    candidate_probabilities,
    conformal_decision,
    conformal_quantile,
    nonconformity,
)
from agora.core.debate.aggregation import aggregate
from agora.core.debate.config import DebateConfig, DebaterConfig
from agora.core.debate.gate import MAX_CALIBRATION, Calibration, ConformalDecision
from agora.core.debate.result import debate_result, gated
from agora.core.debate.rounds import Position, debate_round


def final(*answers: tuple[str, float]) -> list[Position]:
    return [Position(debater_id=f"d{i}", answer=a, confidence=c) for i, (a, c) in enumerate(answers)]


def test_candidates_carry_the_stated_confidence_and_the_rest_goes_to_other() -> None:
    candidates = candidate_probabilities(
        debate_round(1, final(("red", 0.8), ("red", 0.6), ("blue", 0.9))), {}
    )
    by_answer = {c.answer: c.probability for c in candidates}
    assert set(by_answer) == {"red", "blue", OTHER}
    assert sum(by_answer.values()) == pytest.approx(1.0)
    assert by_answer["red"] == pytest.approx((0.8 + 0.6 + 0.05) / 3)
    unanimous = candidate_probabilities(debate_round(1, final(("red", 0.9), ("red", 0.7))), {})
    assert [c.answer for c in unanimous] == ["red", OTHER]
    assert unanimous[1].probability == pytest.approx(0.2)
    assert nonconformity(unanimous, "red") == pytest.approx(0.2)
    assert nonconformity(unanimous, "green") == pytest.approx(0.8)  # nobody said green


def test_the_quantile_is_the_finite_sample_rank() -> None:
    scores = [i / 100 for i in range(100)]
    assert conformal_quantile(scores, 0.1) == scores[math.ceil(101 * 0.9) - 1]
    assert conformal_quantile([0.1, 0.2], 0.1) == math.inf  # too few for that alpha
    with pytest.raises(ValueError):
        conformal_quantile(scores, 0.0)


def test_the_gate_acts_on_one_answer_and_escalates_otherwise() -> None:
    candidates = candidate_probabilities(debate_round(1, final(("red", 0.9), ("red", 0.9), ("red", 0.9))), {})
    assert conformal_decision(candidates, [0.3] * 50, 0.1).act
    assert conformal_decision(candidates, [0.3] * 50, 0.1).answer == "red"
    unsure = conformal_decision(candidates, [0.95] * 50, 0.1)  # OTHER is in the set too
    assert not unsure.act and OTHER in unsure.prediction_set
    few = conformal_decision(candidates, [0.3] * (MIN_CALIBRATION - 1), 0.1)
    assert not few.act and few.quantile is None and "at least" in few.reason


def test_on_exchangeable_debates_the_gate_acts_wrongly_at_most_alpha_of_the_time() -> None:
    rng = random.Random(7)

    def debate() -> tuple[list[Position], str]:
        right = "alpha"
        answers = []
        for _ in range(3):
            correct = rng.random() < 0.6
            answers.append(
                (right if correct else rng.choice(["bravo", "charlie"]), round(rng.uniform(0.5, 0.95), 2))
            )
        return final(*answers), right

    def score(positions: list[Position], right: str) -> float:
        return nonconformity(candidate_probabilities(debate_round(1, positions), {}), right)

    calibration = [score(*debate()) for _ in range(400)]
    for alpha in (0.05, 0.1, 0.2):
        wrong = 0
        trials = 2000
        for _ in range(trials):
            positions, right = debate()
            decision = conformal_decision(
                candidate_probabilities(debate_round(1, positions), {}), calibration, alpha
            )
            wrong += decision.act and decision.answer != right
        assert wrong / trials <= alpha + 0.02, (alpha, wrong / trials)


def test_a_gated_result_acts_on_the_set_or_escalates() -> None:
    cfg = DebateConfig(debaters=[DebaterConfig(debater_id=f"d{i}") for i in range(3)], gate="conformal")
    split = debate_round(1, final(("red", 0.9), ("red", 0.9), ("blue", 0.4)))
    result = debate_result([split], aggregate(split, cfg), cfg, duration_seconds=1.0)
    acting = ConformalDecision(act=True, answer="red", prediction_set=["red"], quantile=0.3,
                               calibration_size=50, reason="one answer")  # fmt: skip
    assert not gated(result, acting).escalate_to_human and gated(result, acting).gate_decision == acting
    unsure = acting.model_copy(update={"act": False, "answer": None, "prediction_set": ["red", "blue"]})
    assert gated(result, unsure).escalate_to_human and gated(result, unsure).final_answer == "red"
    calibration = Calibration()
    for i in range(MAX_CALIBRATION + 5):
        calibration = calibration.with_score(f"q{i}", 0.1)
    calibration = calibration.with_score("q10", 0.9)  # a new label replaces the old one
    assert len(calibration.scores) == MAX_CALIBRATION and calibration.scores["q10"] == 0.9
    assert "q0" not in calibration.scores and list(calibration.scores)[-1] == "q10"
