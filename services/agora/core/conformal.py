"""A calibrated act-vs-escalate gate for debates: split conformal prediction over the
debaters' stated probabilities.

The threshold rule acts whenever enough debaters agree, so a unanimous but wrong answer goes
through. The conformal gate asks instead whether the answer is the only one it cannot rule
out at a chosen error rate alpha:

* each candidate answer (a cluster of the final round, and `OTHER`: any answer no debater
  gave) gets a probability from the debaters' verbalized confidences
  (`candidate_probabilities`): a debater of weight w who gives answer a with confidence c puts
  c on a and spreads 1 - c evenly over the other candidates; the weighted mean over debaters
  is the candidate's probability;
* on recorded debates whose right answer became known (a person's decision, a verified
  result), the nonconformity score is 1 - p(right answer), `OTHER`'s when no debater gave it
  (`nonconformity`);
* with n such scores, q is their ceil((n + 1)(1 - alpha))-th smallest (`conformal_quantile`; above n:
  every answer is possible);
* the prediction set is every candidate whose score 1 - p is at most q; the gate acts when
  the set holds exactly one answer a debater gave, and escalates otherwise
  (`conformal_decision`).

Under exchangeability of the calibration debates and a new one, the right answer is in the
set with probability at least 1 - alpha; a set of one is therefore wrong at most alpha of the time
(over the debates it acts on and those it escalates together).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from agora.core.debate.gate import CandidateAnswer, ConformalDecision
from agora.core.debate.rounds import SIMILARITY_THRESHOLD, DebateRound, cluster_positions, words
from agora.core.similarity import jaccard

MIN_CALIBRATION = 20
"""Fewer recorded debates than this and the gate cannot be trusted: it escalates."""


OTHER = "(an answer no debater gave)"
"""The candidate that stands for every answer the debaters did not give: the right answer may
be none of theirs (a unanimous but wrong debate), and the gate must be able to say so."""


def candidate_probabilities(debate: DebateRound, weights: Mapping[str, float]) -> list[CandidateAnswer]:
    """Each candidate answer of the round (a cluster, named by its most confident member's
    answer), then `OTHER`, with probabilities from the debaters' stated confidences: a debater
    puts its confidence on its own answer and spreads the rest evenly over the other candidates
    (`OTHER` included); weighted means over the debaters, summing to 1."""
    positions = debate.positions
    clusters = cluster_positions(positions)
    k = len(clusters) + 1  # the given answers and OTHER
    total = sum(weights.get(p.debater_id, 1.0) for p in positions) or 1.0
    cluster_of = {i: n for n, cluster in enumerate(clusters) for i in cluster}
    mass = [0.0] * k
    for index, position in enumerate(positions):
        weight = weights.get(position.debater_id, 1.0)
        own = cluster_of[index]
        for n in range(k):
            share = position.confidence if n == own else (1.0 - position.confidence) / (k - 1)
            mass[n] += weight * share
    named = [positions[max(c, key=lambda i: (positions[i].confidence, -i))].answer for c in clusters]
    return [
        CandidateAnswer(answer=answer, probability=min(1.0, mass[n] / total))
        for n, answer in enumerate([*named, OTHER])
    ]


def same_answer(a: str, b: str) -> bool:
    """Whether two answers are the same position (the clustering's own test)."""
    return jaccard(words(a), words(b)) >= SIMILARITY_THRESHOLD


def nonconformity(candidates: Sequence[CandidateAnswer], right_answer: str) -> float:
    """1 - the probability the debate gave the right answer (`OTHER`'s when no debater gave it)."""
    given = [c for c in candidates if c.answer != OTHER]
    found = [c.probability for c in given if same_answer(c.answer, right_answer)]
    other = next((c.probability for c in candidates if c.answer == OTHER), 0.0)
    return 1.0 - (max(found) if found else other)


def conformal_quantile(scores: Sequence[float], alpha: float) -> float:
    """The ceil((n + 1)(1 - alpha))-th smallest score (infinity when that rank is above n)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha is between 0 and 1")
    n = len(scores)
    rank = math.ceil((n + 1) * (1.0 - alpha))
    if n == 0 or rank > n:
        return math.inf
    return sorted(scores)[rank - 1]


def conformal_decision(
    candidates: Sequence[CandidateAnswer], scores: Sequence[float], alpha: float
) -> ConformalDecision:
    """Act when exactly one candidate's score is within the calibrated quantile."""
    if len(scores) < MIN_CALIBRATION:
        return ConformalDecision(
            act=False,
            prediction_set=[c.answer for c in candidates],
            quantile=None,
            calibration_size=len(scores),
            reason=f"{len(scores)} recorded debates; the gate needs at least {MIN_CALIBRATION}",
        )
    q = conformal_quantile(scores, alpha)
    kept = [c.answer for c in candidates if 1.0 - c.probability <= q]
    act = len(kept) == 1 and kept[0] != OTHER
    return ConformalDecision(
        act=act,
        answer=kept[0] if act else None,
        prediction_set=kept,
        quantile=None if math.isinf(q) else q,
        calibration_size=len(scores),
        reason=(
            "one answer in the prediction set"
            if act
            else f"{len(kept)} answers in the prediction set at alpha {alpha}"
        ),
    )
