"""Property tests for uncertainty quantification: every confidence stays in [0, 1], more doubt is
never classified as less, and a session's belief state survives a JSON round trip."""

from __future__ import annotations

import asyncio
from typing import get_args

from hypothesis import given
from hypothesis import strategies as st

from agora.core.similarity import jaccard
from agora.core.uncertainty.belief import SessionBelief
from agora.core.uncertainty.estimator import UncertaintyEstimator
from agora.core.uncertainty.policy import UncertaintyAction, UncertaintyLevel, UncertaintyPolicy
from agora.core.uncertainty.propagation import StepType, UncertaintyPropagator
from agora.core.uncertainty.sampling import response_words, semantic_confidence
from agora.core.uncertainty.signals import parse_p_true, parse_verbalized_confidence

unit = st.floats(min_value=0.0, max_value=1.0)
step_types = st.sampled_from(get_args(StepType))
SEVERITY = list(UncertaintyLevel)  # LOW, MEDIUM, HIGH, CRITICAL: increasing doubt
CAUTION = list(UncertaintyAction)  # PROCEED ... ABORT: increasing caution
confident_texts = st.one_of(
    st.text(max_size=80),
    st.builds(
        lambda prefix, number, suffix: f"{prefix}{number}{suffix}",
        st.sampled_from(["Confidence: ", "confidence=", "I'm ", '{"confidence": ', "p_true: "]),
        st.one_of(st.integers(min_value=0, max_value=2000).map(str), unit.map(lambda x: f"{x:.3f}")),
        st.sampled_from(["", "%", " percent sure", "/10", " sure", " confident", "}"]),
    ),
)


@given(confident_texts)
def test_parsed_confidences_are_probabilities(text: str) -> None:
    for value in (parse_verbalized_confidence(text), parse_p_true(text)):
        assert value is None or 0.0 <= value <= 1.0


@given(unit, unit, unit, unit)
def test_fusion_is_bounded_and_monotone(v1: float, v2: float, p1: float, p2: float) -> None:
    est = UncertaintyEstimator()
    lo_v, hi_v = sorted((v1, v2))
    lo_p, hi_p = sorted((p1, p2))
    assert 0.0 <= est.fuse(lo_v, lo_p) <= est.fuse(hi_v, lo_p) <= est.fuse(hi_v, hi_p) <= 1.0
    assert est.fuse(lo_v) <= est.fuse(hi_v) <= 0.75


@given(unit, unit, step_types)
def test_propagation_lies_between_the_step_and_the_prior(
    fused: float, prior: float, step_type: StepType
) -> None:
    value = UncertaintyPropagator().propagate(fused, step_type, prior)
    assert min(fused, prior) - 1e-9 <= value <= max(fused, prior) + 1e-9


@given(unit, unit)
def test_less_confidence_is_never_a_lesser_level(a: float, b: float) -> None:
    policy = UncertaintyPolicy(irreversible_tool_names=["deploy"])
    lower, higher = sorted((a, b))
    assert SEVERITY.index(policy.classify(lower)) >= SEVERITY.index(policy.classify(higher))
    for confidence in (a, b):
        level = policy.classify(confidence)
        # An irreversible tool never makes the action less cautious.
        assert CAUTION.index(policy.decide(level, tool_name="deploy")) >= CAUTION.index(policy.decide(level))


@given(st.lists(st.text(alphabet="abc ", max_size=12), min_size=1, max_size=6), st.text(max_size=12))
def test_similarity_and_semantic_confidence_are_bounded(responses: list[str], other: str) -> None:
    assert 0.0 <= semantic_confidence(responses) <= 1.0
    first, then = response_words(responses[0]), response_words(other)
    assert jaccard(first, then) == jaccard(then, first)
    assert 0.0 <= jaccard(first, then) <= 1.0


steps = st.lists(
    st.one_of(
        st.tuples(st.just("step"), unit, step_types),
        st.tuples(st.just("tool"), st.sampled_from(["search", "deploy_prod"]), st.just("tool_call")),
    ),
    max_size=12,
)


@given(steps)
def test_belief_state_round_trips_and_stays_consistent(observations: list[tuple[str, object, str]]) -> None:
    est = UncertaintyEstimator(UncertaintyPolicy(irreversible_tool_names=["deploy"]))

    async def run() -> None:
        for i, (kind, value, step_type) in enumerate(observations):
            if kind == "tool":
                await est.observe_tool_call(str(value), f"t{i}")
            else:
                assert isinstance(value, float)
                said = f"Confidence: {round(value * 100)}%"
                await est.observe_llm_response(said, f"s{i}", step_type=step_type)  # type: ignore[arg-type]

    asyncio.run(run())
    belief = est.get_belief_state()
    assert SessionBelief.model_validate_json(belief.model_dump_json()) == belief
    assert belief.total_steps == len(observations) == len(belief.step_uncertainties)
    assert 0.0 <= belief.cumulative_confidence <= 1.0
    expected_high = sum(
        s.level in (UncertaintyLevel.HIGH, UncertaintyLevel.CRITICAL) for s in belief.step_uncertainties
    )
    assert belief.high_uncertainty_steps == expected_high
