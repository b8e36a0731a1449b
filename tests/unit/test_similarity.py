"""Set similarity and greedy clustering (`agora.core.similarity`), and what each of their
callers makes of empty input: two texts without words are alike (a debate's empty answers are
one position, an unsure model's empty samples agree), and outcome similarity never compares
two empty sets (a component takes part only when the query gives it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agora.core.conformal import same_answer
from agora.core.debate.rounds import Position, cluster_positions, debate_round
from agora.core.outcomes.record import OutcomeStatus, StepOutcome
from agora.core.outcomes.similar import rank_similar, similarity
from agora.core.similarity import greedy_clusters, jaccard
from agora.core.uncertainty.estimator import UncertaintyEstimator
from agora.core.uncertainty.model import ModelMessage
from agora.core.uncertainty.sampling import cluster_responses, semantic_confidence

# -- what callers do with empty input ------------------------------------------------------------


def position(debater: str, answer: str) -> Position:
    return Position(debater_id=debater, answer=answer, confidence=0.8)


def test_a_debate_counts_answers_without_words_as_one_position() -> None:
    positions = [position("d0", "..."), position("d1", "Paris"), position("d2", "!"), position("d3", "?")]
    assert cluster_positions(positions) == [[0, 2, 3], [1]]
    assert debate_round(1, positions).convergence_score == 0.75
    assert same_answer("", "!!")
    assert not same_answer("", "Paris")


def test_an_unsure_models_empty_samples_agree() -> None:
    assert cluster_responses(["", "...", "a"]) == [["", "..."], ["a"]]
    assert semantic_confidence(["", ""]) == 1.0


@dataclass
class Answers:
    """A model whose every sample is `answer`; counts the samples drawn."""

    answer: str
    calls: list[float] = field(default_factory=list)

    async def __call__(self, messages: list[ModelMessage], *, temperature: float) -> str:
        self.calls.append(temperature)
        return self.answer


async def test_two_empty_samples_stop_sampling_early() -> None:
    prompt = [ModelMessage(role="user", content="?")]
    confidence, drawn = await UncertaintyEstimator().semantic_entropy(prompt, Answers(""))
    assert (confidence, drawn) == (1.0, 2)


def bare_outcome(**fields: object) -> StepOutcome:
    given: dict[str, object] = {
        "step_id": "1",
        "job_id": "j",
        "retry_count": 0,
        "final_status": OutcomeStatus.FAILED,
        "success_without_retry": False,
        **fields,
    }
    return StepOutcome.model_validate(given)


def test_outcome_similarity_never_compares_two_empty_sets() -> None:
    bare = bare_outcome()  # no text, no error codes, no categories, no failed validations
    # A query of stopwords only gives no text, and a blank code is still a code: nothing
    # the outcome lacks makes it similar.
    assert similarity(bare, {"text": "the of a"}) == 0.0
    assert similarity(bare, {"error_codes": [" "]}) == 0.0
    assert similarity(bare, {"failure_categories": [""], "validation_types": [""]}) == 0.0
    assert similarity(bare, {"job_id": "j", "error_codes": ["E1"]}) == pytest.approx(0.05 / 0.25)
    # An empty query ranks every outcome, at 0.
    assert [s.score for s in rank_similar([bare], {})] == [0.0]
    assert rank_similar([bare], {"error_codes": ["E1"]}) == []


# -- the one Jaccard and the one clusterer ---------------------------------------------------------


def test_jaccard_is_intersection_over_union() -> None:
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(["a", "a", "b"], ("b", "a")) == 1.0  # as sets: repeats do not count
    assert jaccard(frozenset({"a"}), set()) == 0.0


def test_two_empty_sets_are_alike() -> None:
    assert jaccard([], []) == 1.0
    assert jaccard(frozenset(), set()) == 1.0


@given(st.sets(st.sampled_from("abcdef")), st.sets(st.sampled_from("abcdef")))
def test_jaccard_is_symmetric_bounded_and_one_only_for_equal_sets(a: set[str], b: set[str]) -> None:
    assert jaccard(a, b) == jaccard(b, a)
    assert 0.0 <= jaccard(a, b) <= 1.0
    assert (jaccard(a, b) == 1.0) == (a == b)


def test_an_item_joins_the_first_cluster_whose_first_member_is_alike() -> None:
    sets = [{"a", "b"}, {"x"}, {"a", "b", "c"}, {"a", "c"}, set(), set()]
    # {"a", "c"} is alike to {"a", "b", "c"} (2/3) but not to the first member {"a", "b"} (1/3).
    assert greedy_clusters(sets, 0.5) == [[0, 2], [1], [3], [4, 5]]
    assert greedy_clusters(sets, 0.3) == [[0, 2, 3], [1], [4, 5]]
    assert greedy_clusters([], 0.5) == []


@given(st.lists(st.sets(st.sampled_from("abcd"), max_size=3), max_size=8), st.floats(0.0, 1.0))
def test_clusters_partition_the_items_in_order(sets: list[set[str]], threshold: float) -> None:
    clusters = greedy_clusters(sets, threshold)
    assert sorted(i for cluster in clusters for i in cluster) == list(range(len(sets)))
    assert [cluster[0] for cluster in clusters] == sorted(cluster[0] for cluster in clusters)
    for cluster in clusters:
        assert cluster == sorted(cluster)
        assert all(jaccard(sets[cluster[0]], sets[i]) >= threshold for i in cluster)
