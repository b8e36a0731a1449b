"""Uncertainty quantification: reference defaults, thresholds at their edges, fusion and
propagation with worked numbers, the semantic slow path, and the session belief state."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from pydantic import ValidationError

from agora.core.errors import AgoraError
from agora.core.limits import MAX_NOTE_CHARS
from agora.core.similarity import jaccard
from agora.core.uncertainty.aborts import UncertaintyAbort
from agora.core.uncertainty.belief import MAX_KEPT_STEPS, NOT_RUN, SessionBelief, StepUncertainty
from agora.core.uncertainty.estimator import UncertaintyEstimator
from agora.core.uncertainty.fusion import calibrate
from agora.core.uncertainty.model import ModelMessage
from agora.core.uncertainty.policy import UncertaintyAction, UncertaintyLevel, UncertaintyPolicy
from agora.core.uncertainty.propagation import DEFAULT_STEP_WEIGHTS, StepType, UncertaintyPropagator
from agora.core.uncertainty.sampling import (
    SAMPLING_TEMPERATURE,
    cluster_responses,
    response_words,
    semantic_confidence,
)
from agora.core.uncertainty.signals import P_TRUE_PROMPT, parse_p_true, parse_verbalized_confidence

NO_P_TRUE = UncertaintyPolicy(enable_p_true=False)
SAMPLING = UncertaintyPolicy(enable_p_true=False, enable_semantic_sampling=True)
PROMPT = [ModelMessage(role="user", content="What is the capital of France?")]


@dataclass
class ScriptedModel:
    """A deterministic `ConfidenceModel`: answers in order (the last one repeats), records calls."""

    answers: list[str]
    calls: list[tuple[list[ModelMessage], float]] = field(default_factory=list)

    async def __call__(self, messages: list[ModelMessage], *, temperature: float) -> str:
        answer = self.answers[min(len(self.calls), len(self.answers) - 1)]
        self.calls.append((messages, temperature))
        return answer


@dataclass
class FailingModel:
    calls: int = 0

    async def __call__(self, messages: list[ModelMessage], *, temperature: float) -> str:
        self.calls += 1
        raise ConnectionError("backend down")


@dataclass
class PlainMessage:
    """Not a ModelMessage: anything with `role` and `content` is a valid prompt message."""

    role: str
    content: str


# --------------------------------------------------------------------------- defaults


def test_policy_defaults_match_the_reference() -> None:
    policy = UncertaintyPolicy()
    assert policy.low_threshold == 0.80
    assert policy.medium_threshold == 0.60
    assert policy.high_threshold == 0.40
    assert policy.enable_p_true is True
    assert policy.enable_semantic_sampling is False
    assert policy.irreversible_tool_names == []
    assert policy.inject_reflection_on_high is True


def test_estimator_defaults_match_the_reference() -> None:
    est = UncertaintyEstimator()
    assert est.verbalized_weight == 0.4
    assert est.p_true_weight == 0.6
    assert est.verbalized_calibration_bias == 0.25
    assert est.p_true_calibration_bias == 0.10
    assert est.min_samples == 2
    assert est.max_samples == 5
    assert est.early_stop_jaccard == 0.60
    assert est.semantic_trigger_low == 0.50
    assert est.semantic_trigger_high == 0.72
    assert est.policy == UncertaintyPolicy()
    assert est.get_belief_state() == SessionBelief()


def test_propagator_weights_by_step_type() -> None:
    assert UncertaintyPropagator().step_weights == {
        "decision": 0.70,
        "llm_call": 0.55,
        "tool_call": 0.45,
        "memory_read": 0.35,
    }
    # A partial override keeps the other defaults.
    custom = UncertaintyPropagator(step_weights={"decision": 0.9})
    assert custom.step_weights == {**DEFAULT_STEP_WEIGHTS, "decision": 0.9}


@pytest.mark.parametrize(
    "data",
    [
        {"low_threshold": 0.5, "medium_threshold": 0.6},
        {"medium_threshold": 0.3},
        {"low_threshold": 1.5},
        {"irreversible_tool_names": ["deploy", " "]},
        {"unknown": True},
    ],
)
def test_policy_rejects_bad_configuration(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        UncertaintyPolicy.model_validate(data)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"verbalized_weight": 0.0, "p_true_weight": 0.0},
        {"verbalized_calibration_bias": 1.5},
        {"min_samples": 1},
        {"min_samples": 3, "max_samples": 2},
        {"semantic_trigger_low": 0.8, "semantic_trigger_high": 0.7},
        {"early_stop_jaccard": -0.1},
        {"history_limit": 0},
        {"history_limit": MAX_KEPT_STEPS + 1},
    ],
)
def test_estimator_rejects_bad_tunables(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        UncertaintyEstimator(**kwargs)  # type: ignore[arg-type]


def test_propagator_rejects_weights_outside_unit_interval() -> None:
    with pytest.raises(ValidationError):
        UncertaintyPropagator(step_weights={"decision": 1.2})


# --------------------------------------------------------------------------- classification


@pytest.mark.parametrize(
    ("confidence", "level"),
    [
        (1.0, UncertaintyLevel.LOW),
        (0.80, UncertaintyLevel.LOW),  # a boundary belongs to the more confident tier
        (math.nextafter(0.80, 0.0), UncertaintyLevel.MEDIUM),
        (0.60, UncertaintyLevel.MEDIUM),
        (math.nextafter(0.60, 0.0), UncertaintyLevel.HIGH),
        (0.40, UncertaintyLevel.HIGH),
        (math.nextafter(0.40, 0.0), UncertaintyLevel.CRITICAL),
        (0.0, UncertaintyLevel.CRITICAL),
    ],
)
def test_classify_boundaries(confidence: float, level: UncertaintyLevel) -> None:
    assert UncertaintyPolicy().classify(confidence) is level


def test_equal_thresholds_leave_a_tier_empty() -> None:
    policy = UncertaintyPolicy(low_threshold=0.7, medium_threshold=0.7, high_threshold=0.4)
    assert policy.classify(0.7) is UncertaintyLevel.LOW
    assert policy.classify(0.69) is UncertaintyLevel.HIGH


@pytest.mark.parametrize(
    ("level", "action"),
    [
        (UncertaintyLevel.LOW, UncertaintyAction.PROCEED),
        (UncertaintyLevel.MEDIUM, UncertaintyAction.PROCEED_WITH_LOG),
        (UncertaintyLevel.HIGH, UncertaintyAction.PAUSE_FOR_HUMAN),
        (UncertaintyLevel.CRITICAL, UncertaintyAction.ABORT),
    ],
)
def test_decide_ladder(level: UncertaintyLevel, action: UncertaintyAction) -> None:
    assert UncertaintyPolicy().decide(level) is action


def test_irreversible_tool_matches_substrings_ignoring_case() -> None:
    policy = UncertaintyPolicy(irreversible_tool_names=["send_email", "Deploy"])
    assert policy.is_irreversible("send_email_to_client")
    assert policy.is_irreversible("DEPLOY_prod")
    assert not policy.is_irreversible("search_web")
    assert not policy.is_irreversible(None)
    medium = UncertaintyLevel.MEDIUM
    assert policy.decide(medium, tool_name="send_email_to_client") is UncertaintyAction.PAUSE_FOR_HUMAN
    assert policy.decide(medium, tool_name="search_web") is UncertaintyAction.PROCEED_WITH_LOG
    # LOW is safe even for an irreversible tool; HIGH and CRITICAL do not depend on the tool.
    assert policy.decide(UncertaintyLevel.LOW, tool_name="deploy") is UncertaintyAction.PROCEED
    assert policy.decide(UncertaintyLevel.HIGH, tool_name="search") is UncertaintyAction.PAUSE_FOR_HUMAN
    assert policy.decide(UncertaintyLevel.CRITICAL, tool_name="deploy") is UncertaintyAction.ABORT


# --------------------------------------------------------------------------- verbalized confidence


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Paris. Confidence: 85%", 0.85),
        ("I'm about 0.7 sure it is Paris.", 0.7),
        ("answer=Paris confidence=0.9", 0.9),
        ('{"answer": "Paris", "confidence": 0.9}', 0.9),
        ('Reasoning... {"confidence_score": 0.75} done', 0.75),
        ("Confidence level is 8/10", 0.8),
        ("Confidence (0-1): 0.8", 0.8),
        ("confidence: 85", 0.85),  # a bare number above 1 after the key is a percentage
        ("Confidence: .6.", 0.6),
        ("I am 90 percent certain.", 0.9),
        ("I'm 95% confident.", 0.95),
        ("Confidence: high", 0.85),
        ("confidence is very low", 0.1),
        ("Confidence: 60%\n... on reflection ...\nFinal confidence: 90%", 0.9),  # the last one wins
        ("I'm 60% sure. Confidence: 0.8", 0.8),  # the keyed form wins over "sure"
        ("I'm not 100% sure, maybe 60% confident", 0.6),  # a negated statement is skipped
    ],
)
def test_verbalized_confidence_extraction(text: str, expected: float) -> None:
    assert parse_verbalized_confidence(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 42.",
        "",
        "A 95% confidence interval.",
        "Two sure bets: 2 sure things.",
        "confidence: 150%",
        "confidence: 1234",
        "overconfidence 0.9",
    ],
)
def test_no_verbalized_confidence_found(text: str) -> None:
    assert parse_verbalized_confidence(text) is None


def test_extract_verbalized_falls_back_to_the_documented_default() -> None:
    assert UncertaintyEstimator().extract_verbalized("The answer is 42.") == 0.5
    assert UncertaintyEstimator(default_verbalized=0.3).extract_verbalized("The answer is 42.") == 0.3
    assert UncertaintyEstimator().extract_verbalized("Confidence: 85%") == 0.85


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"p_true": 0.82, "reason": "checked"}', 0.82),
        ('```json\n{"p_true": 0.4, "reason": "unsure"}\n```', 0.4),
        ("p_true = 0.3", 0.3),
        ("0.8", 0.8),
        ("80%", 0.8),
        ("True", None),
        ("no idea ###", None),
    ],
)
def test_parse_p_true(text: str, expected: float | None) -> None:
    assert parse_p_true(text) == (None if expected is None else pytest.approx(expected))


# --------------------------------------------------------------------------- calibration and fusion


def test_calibration_biases_worked_numbers() -> None:
    assert calibrate(0.9, 0.25) == 0.675
    assert calibrate(0.85, 0.10) == 0.765
    assert calibrate(1.0, 0.25) == 0.75
    assert calibrate(0.0, 0.10) == 0.0


def test_fusion_weights_worked_numbers() -> None:
    est = UncertaintyEstimator()
    # 0.4 * (0.9 * 0.75) + 0.6 * (0.8 * 0.90) = 0.4 * 0.675 + 0.6 * 0.72 = 0.27 + 0.432
    assert est.fuse(0.9, 0.8) == 0.702
    # The ceiling: 0.4 * 0.75 + 0.6 * 0.9
    assert est.fuse(1.0, 1.0) == 0.84
    # P(True) not run (None or -1.0): the calibrated verbalized signal alone.
    assert est.fuse(0.9) == 0.675
    assert est.fuse(0.9, NOT_RUN) == 0.675


def test_fusion_normalises_weights_that_do_not_sum_to_one() -> None:
    est = UncertaintyEstimator(verbalized_weight=1.0, p_true_weight=1.0)
    assert est.fuse(0.8, 0.5) == pytest.approx((0.8 * 0.75 + 0.5 * 0.9) / 2)


async def test_p_true_enabled_runs_one_follow_up_call() -> None:
    model = ScriptedModel(['{"p_true": 0.8, "reason": "checked"}'])
    est = UncertaintyEstimator(model=model)
    step, _ = await est.observe_llm_response("Paris. Confidence: 90%", "s1", prompt_messages=PROMPT)

    assert len(model.calls) == 1
    messages, temperature = model.calls[0]
    assert temperature == 0.0
    assert messages[0] == PROMPT[0]
    assert messages[1] == ModelMessage(role="assistant", content="Paris. Confidence: 90%")
    assert messages[-1] == ModelMessage(role="user", content=P_TRUE_PROMPT)
    assert step.verbalized_confidence == 0.9
    assert step.verbalized_found is True
    assert step.p_true_confidence == 0.8
    assert step.fused_confidence == 0.702
    assert step.signal_errors == []


async def test_p_true_disabled_makes_no_call() -> None:
    model = ScriptedModel(['{"p_true": 0.8}'])
    est = UncertaintyEstimator(NO_P_TRUE, model=model)
    step, _ = await est.observe_llm_response("Paris. Confidence: 90%", "s1", prompt_messages=PROMPT)
    assert model.calls == []
    assert step.p_true_confidence == NOT_RUN
    assert step.fused_confidence == 0.675


async def test_p_true_enabled_without_a_model_is_not_run() -> None:
    step, _ = await UncertaintyEstimator().observe_llm_response("Confidence: 90%", "s1")
    assert step.p_true_confidence == NOT_RUN
    assert step.signal_errors == []


async def test_a_per_call_model_overrides_the_default() -> None:
    default, override = ScriptedModel(['{"p_true": 0.1}']), ScriptedModel(['{"p_true": 0.8}'])
    est = UncertaintyEstimator(model=default)
    step, _ = await est.observe_llm_response("Confidence: 90%", "s1", model=override)
    assert default.calls == []
    assert step.p_true_confidence == 0.8


async def test_unparsable_or_failing_p_true_is_left_out() -> None:
    est = UncertaintyEstimator(model=ScriptedModel(["I believe it is right!"]))
    step, _ = await est.observe_llm_response("Confidence: 90%", "s1")
    assert step.p_true_confidence == NOT_RUN
    assert step.fused_confidence == 0.675
    assert step.signal_errors == ["p_true: the answer held no probability"]

    failing = FailingModel()
    step, _ = await UncertaintyEstimator(model=failing).observe_llm_response("Confidence: 90%", "s2")
    assert failing.calls == 1
    assert step.p_true_confidence == NOT_RUN
    assert step.signal_errors == ["p_true: ConnectionError: backend down"]


async def test_prompt_messages_may_be_any_role_content_object() -> None:
    model = ScriptedModel(['{"p_true": 0.5}'])
    est = UncertaintyEstimator(model=model)
    await est.observe_llm_response("Paris", "s1", prompt_messages=[PlainMessage("system", "Be brief.")])
    assert model.calls[0][0][0] == ModelMessage(role="system", content="Be brief.")


# --------------------------------------------------------------------------- propagation


def test_propagate_formula() -> None:
    prop = UncertaintyPropagator()
    # propagated = w * fused + (1 - w) * cumulative
    assert prop.propagate(0.9, "decision", 0.6) == pytest.approx(0.70 * 0.9 + 0.30 * 0.6)  # 0.81
    assert prop.propagate(0.4, "memory_read", 0.8) == pytest.approx(0.35 * 0.4 + 0.65 * 0.8)  # 0.66
    with pytest.raises(ValueError, match="unknown step type"):
        prop.propagate(0.5, "planning", 0.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("step_type", "expected"),
    [
        # First step: the prior cumulative confidence is 1.0; "Confidence: 80%" fuses to 0.8 * 0.75 = 0.6.
        ("decision", 0.72),  # 0.70 * 0.6 + 0.30 * 1.0
        ("llm_call", 0.78),  # 0.55 * 0.6 + 0.45 * 1.0
        ("tool_call", 0.82),  # 0.45 * 0.6 + 0.55 * 1.0
        ("memory_read", 0.86),  # 0.35 * 0.6 + 0.65 * 1.0
    ],
)
async def test_propagation_first_step_by_type(step_type: StepType, expected: float) -> None:
    est = UncertaintyEstimator(NO_P_TRUE)
    step, _ = await est.observe_llm_response("Confidence: 80%", "s1", step_type=step_type)
    assert step.fused_confidence == 0.6
    assert step.propagated_confidence == expected
    assert est.get_belief_state().cumulative_confidence == expected


async def test_propagation_through_prior_steps() -> None:
    est = UncertaintyEstimator(NO_P_TRUE)
    first, _ = await est.observe_llm_response("Confidence: 80%", "s1")  # fused 0.6
    assert first.propagated_confidence == 0.78
    second, _ = await est.observe_llm_response("Confidence: 40%", "s2")  # fused 0.3
    # 0.55 * 0.3 + 0.45 * 0.78 = 0.165 + 0.351
    assert second.propagated_confidence == 0.516
    assert second.level is UncertaintyLevel.HIGH
    third, _ = await est.observe_llm_response("Confidence: 100%", "s3", step_type="decision")  # fused 0.75
    # 0.70 * 0.75 + 0.30 * 0.516 = 0.525 + 0.1548: one confident step does not erase the doubt
    assert third.propagated_confidence == 0.6798
    assert third.level is UncertaintyLevel.MEDIUM
    fourth, _ = await est.observe_llm_response("Confidence: 100%", "s4", step_type="memory_read")
    # 0.35 * 0.75 + 0.65 * 0.6798 = 0.2625 + 0.44187
    assert fourth.propagated_confidence == 0.70437
    assert [s.step_id for s in est.get_belief_state().step_uncertainties] == ["s1", "s2", "s3", "s4"]


# --------------------------------------------------------------------------- actions, tools, reflection


async def test_irreversible_tool_at_medium_pauses_and_a_reversible_one_proceeds_with_log() -> None:
    est = UncertaintyEstimator(UncertaintyPolicy(enable_p_true=False, irreversible_tool_names=["send_email"]))
    llm, action = await est.observe_llm_response("Confidence: 80%", "s1")
    assert (llm.propagated_confidence, llm.level, action) == (
        0.78,
        UncertaintyLevel.MEDIUM,
        UncertaintyAction.PROCEED_WITH_LOG,
    )

    irreversible, action = await est.observe_tool_call("Send_Email_To_Client", "t1")
    assert action is UncertaintyAction.PAUSE_FOR_HUMAN
    assert irreversible.irreversible is True
    assert irreversible.tool_name == "Send_Email_To_Client"
    assert irreversible.step_type == "tool_call"
    assert irreversible.propagated_confidence == 0.78
    assert irreversible.p_true_confidence == NOT_RUN
    assert irreversible.reflection_injected is False

    reversible, action = await est.observe_tool_call("search_web", "t2")
    assert action is UncertaintyAction.PROCEED_WITH_LOG
    assert reversible.irreversible is False
    # A tool check makes no model call and leaves the cumulative confidence where it was.
    assert est.get_belief_state().cumulative_confidence == 0.78
    assert est.get_belief_state().total_steps == 3


async def test_irreversible_tool_at_low_proceeds() -> None:
    est = UncertaintyEstimator(UncertaintyPolicy(irreversible_tool_names=["deploy"]))
    # Nothing observed yet: cumulative confidence 1.0 (LOW).
    step, action = await est.observe_tool_call("deploy", "t1")
    assert (step.level, action) == (UncertaintyLevel.LOW, UncertaintyAction.PROCEED)


async def test_reflection_injected_on_high() -> None:
    est = UncertaintyEstimator(NO_P_TRUE)
    # fused 0.0 -> 0.55 * 0.0 + 0.45 * 1.0 = 0.45: HIGH
    step, action = await est.observe_llm_response("Confidence: 0%", "s1")
    assert step.propagated_confidence == 0.45
    assert step.level is UncertaintyLevel.HIGH
    assert action is UncertaintyAction.PAUSE_FOR_HUMAN
    assert step.reflection_injected is True
    # A tool check at HIGH pauses too, but there is no model response to reflect on.
    tool, action = await est.observe_tool_call("search", "t1")
    assert (tool.level, action, tool.reflection_injected) == (
        UncertaintyLevel.HIGH,
        UncertaintyAction.PAUSE_FOR_HUMAN,
        False,
    )


async def test_no_reflection_when_disabled_or_not_high() -> None:
    off = UncertaintyEstimator(UncertaintyPolicy(enable_p_true=False, inject_reflection_on_high=False))
    step, _ = await off.observe_llm_response("Confidence: 0%", "s1")
    assert (step.level, step.reflection_injected) == (UncertaintyLevel.HIGH, False)

    medium, _ = await UncertaintyEstimator(NO_P_TRUE).observe_llm_response("Confidence: 80%", "s1")
    assert (medium.level, medium.reflection_injected) == (UncertaintyLevel.MEDIUM, False)


async def test_critical_aborts_with_a_typed_error_carrying_the_step() -> None:
    est = UncertaintyEstimator(NO_P_TRUE)
    # A decision with fused 0.0: 0.70 * 0.0 + 0.30 * 1.0 = 0.30 < 0.40
    step, action = await est.observe_llm_response("Confidence: 0%", "d1", step_type="decision")
    assert (step.propagated_confidence, step.level, action) == (
        0.3,
        UncertaintyLevel.CRITICAL,
        UncertaintyAction.ABORT,
    )
    assert step.reflection_injected is False
    assert est.get_belief_state().last_step == step  # recorded before returning

    with pytest.raises(UncertaintyAbort) as info:
        raise UncertaintyAbort(step)
    assert info.value.step is step
    assert "d1" in info.value.message and "critical" in info.value.message
    assert isinstance(info.value, AgoraError)
    assert info.value.code == "UNCERTAINTY_ABORT"


# --------------------------------------------------------------------------- semantic sampling


@pytest.mark.parametrize(
    ("fused", "inside"),
    [
        (0.50, True),
        (0.72, True),
        (0.61, True),
        (math.nextafter(0.50, 0.0), False),
        (math.nextafter(0.72, 1.0), False),
    ],
)
def test_sampling_trigger_zone_includes_both_edges(fused: float, inside: bool) -> None:
    assert UncertaintyEstimator().should_sample(fused) is inside


@pytest.mark.parametrize(
    ("text", "bias", "sampled"),
    [
        ("Confidence: 50%", 0.0, True),  # fused 0.50: the lower edge
        ("Confidence: 49%", 0.0, False),  # fused 0.49
        ("Confidence: 96%", 0.25, True),  # fused 0.96 * 0.75 = 0.72: the upper edge
        ("Confidence: 97%", 0.25, False),  # fused 0.7275
    ],
)
async def test_sampling_trigger_zone_edges_end_to_end(text: str, bias: float, sampled: bool) -> None:
    model = ScriptedModel(["Paris"])
    est = UncertaintyEstimator(SAMPLING, model=model, verbalized_calibration_bias=bias)
    step, _ = await est.observe_llm_response(text, "s1", prompt_messages=PROMPT)
    assert step.samples_used == (2 if sampled else 0)
    assert len(model.calls) == step.samples_used


async def test_sampling_stops_early_when_the_first_pair_agrees() -> None:
    # Jaccard({a,b,c,d}, {a,b,c,e}) = 3/5 = 0.60: exactly the threshold, which counts as agreement.
    model = ScriptedModel(["a b c d", "a b c e", "x", "y", "z"])
    conf, samples = await UncertaintyEstimator().semantic_entropy(PROMPT, model)
    assert samples == 2
    assert conf == 1.0
    assert all(temperature == SAMPLING_TEMPERATURE for _, temperature in model.calls)
    assert all(messages == PROMPT for messages, _ in model.calls)


async def test_sampling_extends_to_five_on_disagreement() -> None:
    # Jaccard({a,b,c,d}, {a,b,c,e,f}) = 3/6 = 0.5 < 0.60: extend to max_samples.
    model = ScriptedModel(["a b c d", "a b c e f", "a b c d", "p q r", "p q r s"])
    conf, samples = await UncertaintyEstimator().semantic_entropy(PROMPT, model)
    assert samples == 5
    assert len(model.calls) == 5
    # Clusters (Jaccard >= 0.40 with the first member): {3 x "a b c ..."}, {"p q r", "p q r s"}
    entropy = -(0.6 * math.log2(0.6) + 0.4 * math.log2(0.4))
    assert conf == pytest.approx(1 - entropy / math.log2(5))  # 0.5818...


async def test_slow_path_fusion_is_pessimistic() -> None:
    # Five unrelated samples: every answer its own cluster, semantic confidence 0.0.
    model = ScriptedModel(["alpha", "beta", "gamma", "delta", "epsilon"])
    est = UncertaintyEstimator(SAMPLING, model=model)
    step, _ = await est.observe_llm_response("Confidence: 80%", "s1", prompt_messages=PROMPT)  # fast 0.6
    assert step.samples_used == 5
    assert step.semantic_confidence == 0.0
    assert step.fused_confidence == 0.0  # min(0.6, 0.0)
    assert step.propagated_confidence == 0.45

    agreeing = UncertaintyEstimator(SAMPLING, model=ScriptedModel(["Paris is the capital"]))
    step, _ = await agreeing.observe_llm_response("Confidence: 80%", "s1", prompt_messages=PROMPT)
    assert (step.samples_used, step.semantic_confidence, step.fused_confidence) == (2, 1.0, 0.6)


async def test_sampling_needs_the_policy_a_model_and_a_prompt() -> None:
    model = ScriptedModel(["Paris"])
    off = UncertaintyEstimator(NO_P_TRUE, model=model)
    step, _ = await off.observe_llm_response("Confidence: 80%", "s1", prompt_messages=PROMPT)
    assert step.samples_used == 0

    no_prompt = UncertaintyEstimator(SAMPLING, model=model)
    step, _ = await no_prompt.observe_llm_response("Confidence: 80%", "s1")
    assert step.samples_used == 0

    no_model = UncertaintyEstimator(SAMPLING)
    step, _ = await no_model.observe_llm_response("Confidence: 80%", "s1", prompt_messages=PROMPT)
    assert step.samples_used == 0
    assert model.calls == []


async def test_failed_sampling_is_left_out() -> None:
    est = UncertaintyEstimator(SAMPLING, model=FailingModel())
    step, _ = await est.observe_llm_response("Confidence: 80%", "s1", prompt_messages=PROMPT)
    assert (step.samples_used, step.semantic_confidence, step.fused_confidence) == (0, None, 0.6)
    assert step.signal_errors == ["semantic_sampling: ConnectionError: backend down"]


def test_jaccard_and_clustering() -> None:
    same = response_words("The capital is Paris."), response_words("paris, the CAPITAL is")
    assert jaccard(*same) == 1.0
    assert jaccard(response_words(""), response_words("")) == 1.0
    assert jaccard(response_words("a"), response_words("")) == 0.0
    assert cluster_responses(["a b", "a b c", "x y"]) == [["a b", "a b c"], ["x y"]]
    assert semantic_confidence(["only one"]) == 1.0
    assert semantic_confidence(["a", "b"]) == 0.0


# --------------------------------------------------------------------------- belief state


async def run_session(est: UncertaintyEstimator) -> None:
    await est.observe_llm_response("Confidence: 80%", "s1", prompt_messages=PROMPT)
    await est.observe_tool_call("search_web", "t1")
    await est.observe_llm_response("Confidence: 0%", "s2")


async def test_belief_state_round_trips_through_json() -> None:
    est = UncertaintyEstimator(
        UncertaintyPolicy(enable_p_true=True), model=ScriptedModel(['{"p_true": 0.6}'])
    )
    est.initialize("session-1", "agent-1")
    await run_session(est)
    belief = est.get_belief_state()

    restored = SessionBelief.model_validate_json(belief.model_dump_json())
    assert restored == belief
    assert isinstance(restored.step_uncertainties[0], StepUncertainty)
    assert restored.step_uncertainties[0].level is belief.step_uncertainties[0].level

    for saved in (belief.model_dump_json(), belief.model_dump(mode="json"), belief):
        resumed = UncertaintyEstimator.from_belief(saved, policy=NO_P_TRUE)
        assert resumed.get_belief_state() == belief
        assert resumed.summary_metadata() == est.summary_metadata()


async def test_a_resumed_session_continues_where_it_left_off() -> None:
    straight = UncertaintyEstimator(NO_P_TRUE)
    await run_session(straight)
    await straight.observe_llm_response("Confidence: 100%", "s3")

    first_half = UncertaintyEstimator(NO_P_TRUE)
    await run_session(first_half)
    resumed = UncertaintyEstimator(
        NO_P_TRUE, belief=SessionBelief.model_validate_json(first_half.get_belief_state().model_dump_json())
    )
    await resumed.observe_llm_response("Confidence: 100%", "s3")
    assert resumed.get_belief_state() == straight.get_belief_state()


async def test_summary_metadata_is_compact() -> None:
    est = UncertaintyEstimator(NO_P_TRUE)
    assert est.summary_metadata() == {
        "overall_level": "low",
        "cumulative_confidence": 1.0,
        "total_steps": 0,
        "high_uncertainty_steps": 0,
        "last_step_id": None,
        "last_action": None,
    }
    await run_session(est)
    # s1: 0.78 (MEDIUM); t1: 0.78 (MEDIUM); s2: 0.55 * 0.0 + 0.45 * 0.78 = 0.351 (CRITICAL)
    assert est.summary_metadata() == {
        "overall_level": "critical",
        "cumulative_confidence": 0.351,
        "total_steps": 3,
        "high_uncertainty_steps": 1,
        "last_step_id": "s2",
        "last_action": "abort",
    }


async def test_reset_forgets_steps_but_keeps_the_session() -> None:
    est = UncertaintyEstimator(NO_P_TRUE)
    est.initialize("session-1", "agent-1")
    await run_session(est)
    est.reset()
    assert est.get_belief_state() == SessionBelief(session_id="session-1", agent_id="agent-1")
    assert est.get_belief_state().cumulative_confidence == 1.0

    est.initialize("session-2", "agent-2")
    assert est.get_belief_state() == SessionBelief(session_id="session-2", agent_id="agent-2")


async def test_belief_state_is_immutable_to_callers() -> None:
    est = UncertaintyEstimator(NO_P_TRUE)
    await est.observe_llm_response("Confidence: 80%", "s1")
    belief = est.get_belief_state()
    with pytest.raises(ValidationError):
        belief.cumulative_confidence = 0.0  # type: ignore[misc]
    await est.observe_llm_response("Confidence: 80%", "s2")
    assert len(belief.step_uncertainties) == 1  # the earlier snapshot did not change
    assert len(est.get_belief_state().step_uncertainties) == 2


async def test_history_limit_keeps_the_newest_steps_and_every_count() -> None:
    est = UncertaintyEstimator(NO_P_TRUE, history_limit=2)
    await run_session(est)
    belief = est.get_belief_state()
    assert [s.step_id for s in belief.step_uncertainties] == ["t1", "s2"]
    assert (belief.total_steps, belief.high_uncertainty_steps) == (3, 1)


async def test_a_session_keeps_its_newest_steps_and_counts_every_one() -> None:
    est = UncertaintyEstimator(NO_P_TRUE)
    for n in range(MAX_KEPT_STEPS + 5):
        await est.observe_tool_call("search", f"s{n}")
    belief = est.get_belief_state()
    assert len(belief.step_uncertainties) == MAX_KEPT_STEPS
    assert belief.step_uncertainties[0].step_id == "s5"
    assert belief.total_steps == MAX_KEPT_STEPS + 5
    stored_before_the_cap = {
        **belief.model_dump(mode="json"),
        "step_uncertainties": [belief.step_uncertainties[0].model_dump(mode="json")] * (MAX_KEPT_STEPS + 5),
    }
    assert len(SessionBelief.model_validate(stored_before_the_cap).step_uncertainties) == MAX_KEPT_STEPS


@dataclass
class LongWindedFailure:
    async def __call__(self, messages: list[ModelMessage], *, temperature: float) -> str:
        raise ConnectionError("x" * (2 * MAX_NOTE_CHARS))


async def test_a_signal_error_is_cut_to_a_note() -> None:
    estimator = UncertaintyEstimator(model=LongWindedFailure())
    step, _ = await estimator.observe_llm_response("Confidence: 90%", "s1")
    [error] = step.signal_errors
    assert error.startswith("p_true: ConnectionError: xxx") and len(error) == MAX_NOTE_CHARS


@pytest.mark.parametrize(
    "data",
    [
        {"total_steps": 0, "high_uncertainty_steps": 1},
        {"cumulative_confidence": 1.5},
        {"total_steps": -1},
    ],
)
def test_belief_state_validation(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SessionBelief.model_validate(data)


def test_step_uncertainty_allows_minus_one_only_as_not_run() -> None:
    base: dict[str, object] = {
        "step_id": "s1",
        "step_type": "llm_call",
        "verbalized_confidence": 0.5,
        "p_true_confidence": NOT_RUN,
        "fused_confidence": 0.5,
        "propagated_confidence": 0.5,
        "level": "high",
        "action": "pause_for_human",
    }
    assert StepUncertainty.model_validate(base).p_true_confidence == NOT_RUN
    for bad in ({"p_true_confidence": -0.5}, {"step_type": "planning"}, {"fused_confidence": 1.1}):
        with pytest.raises(ValidationError):
            StepUncertainty.model_validate({**base, **bad})


def _messages(texts: Sequence[str]) -> list[ModelMessage]:
    return [ModelMessage(role="user", content=text) for text in texts]


async def test_concurrent_observations_do_not_lose_updates() -> None:
    est = UncertaintyEstimator(
        UncertaintyPolicy(enable_p_true=True), model=ScriptedModel(['{"p_true": 0.9}'])
    )
    await asyncio.gather(
        *(
            est.observe_llm_response("Confidence: 90%", f"s{i}", prompt_messages=_messages(["q"]))
            for i in range(5)
        )
    )
    assert est.get_belief_state().total_steps == 5
    assert len(est.get_belief_state().step_uncertainties) == 5
