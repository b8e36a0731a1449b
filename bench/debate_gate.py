"""The act-vs-escalate gates on a seeded, labeled synthetic set of debates: the threshold rule
(act when the final convergence is at least `escalate_threshold`) against the conformal gate
(`agora.core.conformal`, calibrated on recorded debates) at alpha 0.05 and 0.10: the share of
questions on which a wrong answer is acted on, and the share escalated to a person.

The synthetic debates: each question has 2-5 candidate answers, one right. Three to five
debaters of varied accuracy (0.55-0.9) answer; a quarter of the questions are traps: a shared
wrong answer attracts every debater (correlated errors), and debaters state high confidence
in it. After round 1 each debater moves to the majority answer with probability 0.3 (herding),
so traps often end unanimous and wrong. Confidence is stated higher for right answers on
ordinary questions, and about as high for the trap's answer. The gates see only the final
round: the answers and stated confidences, never the truth; the conformal gate is calibrated
on 500 debates with known answers and judged on 4,000 others.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from agora.core.conformal import candidate_probabilities, conformal_decision, nonconformity, same_answer
from agora.core.debate.aggregation import aggregate
from agora.core.debate.config import DebateConfig, DebaterConfig
from agora.core.debate.gate import escalate_to_human
from agora.core.debate.rounds import Position, debate_round

SEED = 20261122
CALIBRATION = 500
TEST = 4_000
TRAP_SHARE = 0.25
HERDING = 0.3
WORDS = ["alpha", "bravo", "charlie", "delta", "echo"]
RESULTS = Path(__file__).parent / "results" / "debate_gate.json"


@dataclass
class Debate:
    final: list[Position]
    right: str
    config: DebateConfig


def _confidence(rng: random.Random, mean: float, spread: float) -> float:
    return round(min(0.99, max(0.05, rng.gauss(mean, spread))), 3)


def synthetic_debate(rng: random.Random) -> Debate:
    options = WORDS[: rng.randint(2, 5)]
    right = options[0]
    wrong = options[1:]
    trap = rng.random() < TRAP_SHARE
    attractor = rng.choice(wrong)
    accuracies = [rng.uniform(0.55, 0.9) for _ in range(rng.randint(3, 5))]
    debaters = [DebaterConfig(debater_id=f"d{i}") for i in range(len(accuracies))]
    first: list[tuple[str, float]] = []
    for accuracy in accuracies:
        if trap and rng.random() < 0.7:
            first.append((attractor, _confidence(rng, 0.8, 0.1)))
        elif rng.random() < accuracy:
            first.append((right, _confidence(rng, 0.8, 0.1)))
        else:
            first.append((rng.choice(wrong), _confidence(rng, 0.6, 0.15)))
    majority = Counter(answer for answer, _ in first).most_common(1)[0][0]
    final = []
    for index, (answer, confidence) in enumerate(first):
        if answer != majority and rng.random() < HERDING:
            answer, confidence = majority, _confidence(rng, 0.75, 0.1)
        final.append(Position(debater_id=f"d{index}", answer=answer, confidence=confidence))
    return Debate(final=final, right=right, config=DebateConfig(debaters=debaters))


def main() -> None:
    rng = random.Random(SEED)
    calibration = [synthetic_debate(rng) for _ in range(CALIBRATION)]
    test = [synthetic_debate(rng) for _ in range(TEST)]

    def weights(debate: Debate) -> dict[str, float]:
        return {d.debater_id: d.weight for d in debate.config.debaters}

    scores = [
        nonconformity(candidate_probabilities(debate_round(1, d.final), weights(d)), d.right)
        for d in calibration
    ]
    rows = []
    acted_wrong = escalated = 0
    for debate in test:
        final = debate_round(1, debate.final)
        if escalate_to_human(final.convergence_score, debate.config):
            escalated += 1
        elif not same_answer(aggregate(final, debate.config).answer, debate.right):
            acted_wrong += 1
    rows.append(
        {
            "gate": "threshold rule (escalate below convergence 0.5)",
            "alpha": None,
            "wrong_answers_acted_on": acted_wrong / TEST,
            "escalated": escalated / TEST,
        }
    )
    for alpha in (0.05, 0.10):
        acted_wrong = escalated = 0
        for debate in test:
            candidates = candidate_probabilities(debate_round(1, debate.final), weights(debate))
            decision = conformal_decision(candidates, scores, alpha)
            if not decision.act:
                escalated += 1
            elif not same_answer(decision.answer or "", debate.right):
                acted_wrong += 1
        rows.append(
            {
                "gate": f"conformal, alpha {alpha:.2f}",
                "alpha": alpha,
                "wrong_answers_acted_on": acted_wrong / TEST,
                "escalated": escalated / TEST,
            }
        )
    unanimous_wrong = sum(
        1 for d in test if len({p.answer for p in d.final}) == 1 and d.final[0].answer != d.right
    )
    result = {
        "benchmark": "act-vs-escalate gates on seeded synthetic debates (pure core, no Dapr)",
        "seed": SEED,
        "calibration_debates": CALIBRATION,
        "test_debates": TEST,
        "unanimous_and_wrong": unanimous_wrong / TEST,
        "gates": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{TEST} test debates ({unanimous_wrong / TEST:.1%} unanimous and wrong), {CALIBRATION} calibration:"
    )
    print(f"  {'gate':<50} {'wrong answers acted on':>24} {'escalated':>10}")
    for row in rows:
        print(f"  {row['gate']:<50} {row['wrong_answers_acted_on']:>24.1%} {row['escalated']:>10.1%}")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
