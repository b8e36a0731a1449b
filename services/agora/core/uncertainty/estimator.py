"""The estimator: one per session, it measures each step's confidence (the System-1 signals,
their fusion, System-2 sampling in the trigger zone), propagates it through the session's
earlier steps, classifies it into a level and an action, and keeps the session's belief state.
The formulas are in the package's overview (`agora.core.uncertainty`) and in the modules of
each step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

from agora.core.limits import MAX_NOTE_CHARS
from agora.core.uncertainty.belief import MAX_KEPT_STEPS, NOT_RUN, SessionBelief, StepUncertainty
from agora.core.uncertainty.confidence import check_unit
from agora.core.uncertainty.fusion import (
    P_TRUE_CALIBRATION_BIAS,
    P_TRUE_WEIGHT,
    VERBALIZED_CALIBRATION_BIAS,
    VERBALIZED_WEIGHT,
    fuse,
)
from agora.core.uncertainty.model import ConfidenceModel, MessageLike
from agora.core.uncertainty.policy import UncertaintyAction, UncertaintyLevel, UncertaintyPolicy
from agora.core.uncertainty.propagation import StepType, UncertaintyPropagator
from agora.core.uncertainty.sampling import (
    CLUSTER_JACCARD,
    EARLY_STOP_JACCARD,
    MAX_SAMPLES,
    MIN_SAMPLES,
    SEMANTIC_TRIGGER_HIGH,
    SEMANTIC_TRIGGER_LOW,
    sample_semantic_confidence,
)
from agora.core.uncertainty.signals import DEFAULT_VERBALIZED, ask_p_true, parse_verbalized_confidence

__all__ = ["UncertaintyEstimator"]


class UncertaintyEstimator:
    """Measures each step's confidence and keeps the session's belief state (the package's
    overview has the formulas). One estimator per session; not shared across sessions.

    `policy` sets thresholds and switches; `model` is the default `ConfidenceModel` for P(True)
    and sampling (each `observe_llm_response` may pass its own); `belief` resumes a saved
    session. The keyword tunables default to the values of the formulas (`fusion`, `sampling`);
    `history_limit` keeps only the newest N steps in the belief state (at most and by default
    `MAX_KEPT_STEPS`; counters and the cumulative confidence still cover every step).
    """

    def __init__(
        self,
        policy: UncertaintyPolicy | None = None,
        *,
        model: ConfidenceModel | None = None,
        propagator: UncertaintyPropagator | None = None,
        belief: SessionBelief | None = None,
        verbalized_weight: float = VERBALIZED_WEIGHT,
        p_true_weight: float = P_TRUE_WEIGHT,
        verbalized_calibration_bias: float = VERBALIZED_CALIBRATION_BIAS,
        p_true_calibration_bias: float = P_TRUE_CALIBRATION_BIAS,
        min_samples: int = MIN_SAMPLES,
        max_samples: int = MAX_SAMPLES,
        early_stop_jaccard: float = EARLY_STOP_JACCARD,
        semantic_trigger_low: float = SEMANTIC_TRIGGER_LOW,
        semantic_trigger_high: float = SEMANTIC_TRIGGER_HIGH,
        cluster_jaccard: float = CLUSTER_JACCARD,
        default_verbalized: float = DEFAULT_VERBALIZED,
        history_limit: int = MAX_KEPT_STEPS,
    ) -> None:
        for name, value in (
            ("verbalized_weight", verbalized_weight),
            ("p_true_weight", p_true_weight),
            ("verbalized_calibration_bias", verbalized_calibration_bias),
            ("p_true_calibration_bias", p_true_calibration_bias),
            ("early_stop_jaccard", early_stop_jaccard),
            ("semantic_trigger_low", semantic_trigger_low),
            ("semantic_trigger_high", semantic_trigger_high),
            ("cluster_jaccard", cluster_jaccard),
            ("default_verbalized", default_verbalized),
        ):
            check_unit(name, value)
        if verbalized_weight + p_true_weight <= 0.0:
            raise ValueError("verbalized_weight and p_true_weight cannot both be 0")
        if min_samples < 2:
            raise ValueError("min_samples must be at least 2 (early stopping compares the first pair)")
        if max_samples < min_samples:
            raise ValueError("max_samples must be at least min_samples")
        if semantic_trigger_low > semantic_trigger_high:
            raise ValueError("semantic_trigger_low must not exceed semantic_trigger_high")
        if not 1 <= history_limit <= MAX_KEPT_STEPS:
            raise ValueError(f"history_limit must be between 1 and {MAX_KEPT_STEPS}")
        self.policy = policy or UncertaintyPolicy()
        self.model = model
        self.propagator = propagator or UncertaintyPropagator()
        self.verbalized_weight = verbalized_weight
        self.p_true_weight = p_true_weight
        self.verbalized_calibration_bias = verbalized_calibration_bias
        self.p_true_calibration_bias = p_true_calibration_bias
        self.min_samples = min_samples
        self.max_samples = max_samples
        self.early_stop_jaccard = early_stop_jaccard
        self.semantic_trigger_low = semantic_trigger_low
        self.semantic_trigger_high = semantic_trigger_high
        self.cluster_jaccard = cluster_jaccard
        self.default_verbalized = default_verbalized
        self.history_limit = history_limit
        self._belief = belief if belief is not None else SessionBelief()

    @classmethod
    def from_belief(
        cls,
        belief: SessionBelief | dict[str, Any] | str | bytes,
        *,
        policy: UncertaintyPolicy | None = None,
        model: ConfidenceModel | None = None,
        propagator: UncertaintyPropagator | None = None,
    ) -> Self:
        """An estimator resuming a saved session: `belief` as a model, its `model_dump()` or its
        JSON. Tunables other than these take their defaults (use the constructor otherwise)."""
        if isinstance(belief, str | bytes):
            belief = SessionBelief.model_validate_json(belief)
        elif isinstance(belief, dict):
            belief = SessionBelief.model_validate(belief)
        return cls(policy, model=model, propagator=propagator, belief=belief)

    # ---- System 1

    def extract_verbalized(self, text: str) -> float:
        """`parse_verbalized_confidence`, or `default_verbalized` (0.5) when the text states none."""
        found = parse_verbalized_confidence(text)
        return self.default_verbalized if found is None else found

    def fuse(self, verbalized: float, p_true: float | None = None) -> float:
        """Calibrated weighted fusion of the raw signals (`fusion.fuse` with this estimator's
        weights and biases); `p_true` None (or -1.0) = not run."""
        return fuse(
            verbalized,
            p_true,
            verbalized_weight=self.verbalized_weight,
            p_true_weight=self.p_true_weight,
            verbalized_calibration_bias=self.verbalized_calibration_bias,
            p_true_calibration_bias=self.p_true_calibration_bias,
        )

    async def p_true(
        self, response_text: str, prompt_messages: Sequence[MessageLike], model: ConfidenceModel
    ) -> float | None:
        """Ask `model` how likely `response_text` is correct; None when the answer has no number.
        Errors from the model propagate (the `observe_*` methods record them instead)."""
        return await ask_p_true(response_text, prompt_messages, model)

    # ---- System 2

    def should_sample(self, fused_confidence: float) -> bool:
        """Whether `fused_confidence` is in the trigger zone (both bounds included)."""
        return self.semantic_trigger_low <= fused_confidence <= self.semantic_trigger_high

    async def semantic_entropy(
        self, prompt_messages: Sequence[MessageLike], model: ConfidenceModel
    ) -> tuple[float, int]:
        """Adaptive sampling: `min_samples` answers; if the first pair's Jaccard similarity is at
        least `early_stop_jaccard`, stop; else draw up to `max_samples`. Returns
        (semantic confidence, samples drawn). Each batch's calls run concurrently."""
        return await sample_semantic_confidence(
            prompt_messages,
            model,
            min_samples=self.min_samples,
            max_samples=self.max_samples,
            early_stop_jaccard=self.early_stop_jaccard,
            cluster_jaccard=self.cluster_jaccard,
        )

    # ---- session

    async def observe_llm_response(
        self,
        response_text: str,
        step_id: str,
        *,
        prompt_messages: Sequence[MessageLike] | None = None,
        model: ConfidenceModel | None = None,
        step_type: StepType = "llm_call",
    ) -> tuple[StepUncertainty, UncertaintyAction]:
        """Full pipeline for one model response (System 1 always, System 2 in the trigger zone).

        `prompt_messages` is what the model was asked: it gives P(True) its context and is what
        semantic sampling re-asks (no prompt, no sampling). `model` overrides the estimator's.
        P(True) runs when the policy enables it and a model is available; a failed or
        unparsable P(True) or sample is left out (recorded in `signal_errors`), never fatal.
        The step is recorded in the belief state before this returns; on ABORT the caller
        raises `UncertaintyAbort(step)`.
        """
        if model is None:
            model = self.model
        prompt = list(prompt_messages or [])
        errors: list[str] = []
        found = parse_verbalized_confidence(response_text)
        verbalized = self.default_verbalized if found is None else found

        p_true: float | None = None
        if self.policy.enable_p_true and model is not None:
            try:
                p_true = await self.p_true(response_text, prompt, model)
            except Exception as exc:  # a failed self-check must not fail the agent's step
                errors.append(_signal_error("p_true", exc))
            else:
                if p_true is None:
                    errors.append("p_true: the answer held no probability")
        fused = self.fuse(verbalized, p_true)

        samples_used = 0
        semantic: float | None = None
        if (
            self.policy.enable_semantic_sampling
            and model is not None
            and prompt
            and self.should_sample(fused)
        ):
            try:
                semantic, samples_used = await self.semantic_entropy(prompt, model)
            except Exception as exc:
                errors.append(_signal_error("semantic_sampling", exc))
            else:
                fused = min(fused, semantic)

        # Everything after the awaits runs without yielding, so concurrent observations on one
        # estimator cannot lose each other's update.
        propagated = self.propagator.propagate(fused, step_type, self._belief.cumulative_confidence)
        level = self.policy.classify(propagated)
        step = StepUncertainty(
            step_id=step_id,
            step_type=step_type,
            verbalized_confidence=verbalized,
            p_true_confidence=NOT_RUN if p_true is None else p_true,
            fused_confidence=fused,
            propagated_confidence=propagated,
            level=level,
            action=self.policy.decide(level),
            samples_used=samples_used,
            reflection_injected=self.policy.inject_reflection_on_high and level is UncertaintyLevel.HIGH,
            verbalized_found=found is not None,
            semantic_confidence=semantic,
            signal_errors=errors,
        )
        self._record(step)
        return step, step.action

    async def observe_tool_call(
        self, tool_name: str, step_id: str
    ) -> tuple[StepUncertainty, UncertaintyAction]:
        """Check before running `tool_name`, from the session's cumulative confidence (no model
        call). An irreversible tool pauses at MEDIUM. The check is recorded as a `tool_call`
        step whose confidences all equal the cumulative one, so it leaves the cumulative
        confidence unchanged."""
        cumulative = self._belief.cumulative_confidence
        level = self.policy.classify(cumulative)
        step = StepUncertainty(
            step_id=step_id,
            step_type="tool_call",
            verbalized_confidence=NOT_RUN,
            p_true_confidence=NOT_RUN,
            fused_confidence=cumulative,
            propagated_confidence=cumulative,
            level=level,
            action=self.policy.decide(level, tool_name=tool_name),
            tool_name=tool_name,
            irreversible=self.policy.is_irreversible(tool_name),
        )
        self._record(step)
        return step, step.action

    def _record(self, step: StepUncertainty) -> None:
        belief = self._belief
        history = (*belief.step_uncertainties, step)[-self.history_limit :]
        high = step.level in (UncertaintyLevel.HIGH, UncertaintyLevel.CRITICAL)
        self._belief = belief.model_copy(
            update={
                "step_uncertainties": history,
                "cumulative_confidence": step.propagated_confidence,
                "total_steps": belief.total_steps + 1,
                "high_uncertainty_steps": belief.high_uncertainty_steps + int(high),
            }
        )

    def get_belief_state(self) -> SessionBelief:
        """The current belief state (immutable; a new object after every observation)."""
        return self._belief

    @property
    def overall_level(self) -> UncertaintyLevel:
        """The tier of the session's cumulative confidence under the current policy."""
        return self.policy.classify(self._belief.cumulative_confidence)

    def summary_metadata(self) -> dict[str, str | int | float | None]:
        """Compact, JSON-ready summary for a session's metadata (e.g. `metadata["uncertainty"]`)."""
        belief = self._belief
        last = belief.last_step
        return {
            "overall_level": self.overall_level.value,
            "cumulative_confidence": round(belief.cumulative_confidence, 4),
            "total_steps": belief.total_steps,
            "high_uncertainty_steps": belief.high_uncertainty_steps,
            "last_step_id": last.step_id if last else None,
            "last_action": last.action.value if last else None,
        }

    def reset(self) -> None:
        """Forget every step; the session and agent ids are kept."""
        self._belief = SessionBelief(session_id=self._belief.session_id, agent_id=self._belief.agent_id)

    def initialize(self, session_id: str, agent_id: str) -> None:
        """Start a new session: an empty belief state under these ids."""
        self._belief = SessionBelief(session_id=session_id, agent_id=agent_id)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _signal_error(signal: str, exc: BaseException) -> str:
    """One `signal_errors` entry, cut to a note's length (a model client's error may quote a
    whole response)."""
    return f"{signal}: {_describe(exc)}"[:MAX_NOTE_CHARS]
