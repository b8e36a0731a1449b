"""Uncertainty quantification for agent sessions: a confidence per step, and what to do about it.

Why: an agent that is unsure should not
silently act as if it were sure. Each step gets a confidence in [0, 1]; the session keeps a
belief state across steps; a three-tier ladder turns the confidence into an action.

Pipeline for one model response (`UncertaintyEstimator.observe_llm_response`), "dual-process":

* System 1 (fast, always):

  1. Verbalized confidence: what the response itself says ("Confidence: 85%") — see
     `parse_verbalized_confidence`. Nothing found: `default_verbalized` (0.5, "no information").
  2. P(True), when `UncertaintyPolicy.enable_p_true` and a model is given: one follow-up call
     asking the model how likely its answer is correct (`P_TRUE_PROMPT`).
  3. Calibrated fusion. Both signals are over-confident, so each is shrunk by its calibration
     bias, then they are blended::

         calibrated(x, bias) = x * (1 - bias)
         fused = (wv * calibrated(verbalized, 0.25) + wp * calibrated(p_true, 0.10)) / (wv + wp)
               with wv = 0.4, wp = 0.6 (they sum to 1, so the division changes nothing at defaults)
         fused = calibrated(verbalized, 0.25)       when P(True) did not run

     Consequence, by design: verbalized confidence alone is capped at 0.75, so a session that
     never runs P(True) cannot stay at LOW uncertainty for long (a model's stated confidence is
     a weak signal on its own: expected calibration errors of 0.377 and more are measured).

* System 2 (slow, opt-in with `enable_semantic_sampling`): when the fused confidence lies in the
  trigger zone ``0.50 <= fused <= 0.72`` (both ends included), the prompt is re-sampled at
  temperature `SAMPLING_TEMPERATURE`: 2 samples first; if their word-set Jaccard similarity is
  >= 0.60 sampling stops early, otherwise it extends to 5. Samples are clustered greedily (a
  sample joins the first cluster whose first member it matches with Jaccard >= 0.40), and::

         semantic = 1 - H(cluster sizes) / log2(n_samples)     (Shannon entropy, base 2)
         fused    = min(fused, semantic)                       (pessimistic fusion)

Propagation through prior steps (SAUP-style: a step's weight depends on its type, because a
decision cascades further than a memory read)::

    cumulative(0) = 1.0                       (no evidence of doubt before the first step)
    propagated(t) = w(type) * fused(t) + (1 - w(type)) * cumulative(t - 1)
    cumulative(t) = propagated(t)
    w: decision 0.70, llm_call 0.55, tool_call 0.45, memory_read 0.35

Unrolled, a step's confidence is a weighted average of every earlier step's fused confidence
with geometrically decaying weights, so one unsure step is not erased by the next confident
one. Because of the prior, a single first step cannot fall below ``1 - w`` (0.45 for an
`llm_call`: HIGH, a pause), so an ABORT needs doubt sustained over steps (or a `decision`).

Classification of the propagated confidence (each boundary belongs to the more confident tier)::

    c >= 0.80 -> LOW       -> PROCEED
    c >= 0.60 -> MEDIUM    -> PROCEED_WITH_LOG  (PAUSE_FOR_HUMAN before an irreversible tool)
    c >= 0.40 -> HIGH      -> PAUSE_FOR_HUMAN   (System-2 reflection flagged on model steps)
    c <  0.40 -> CRITICAL  -> ABORT             (the caller raises `UncertaintyAbort`)

Confidences are clamped to [0, 1] and rounded to 12 decimal places, so that worked numbers
that are exact on paper (0.4 * 0.75 + 0.6 * 0.9 ...) land exactly on a threshold instead of a
float's width below it.

This module is pure: no Dapr, no network, deterministic. Model calls go through the injected
`ConfidenceModel` (see its docstring for an adapter over `agora.llm.ModelClient`).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Literal, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from agora.core.errors import AgoraError
from agora.core.limits import MAX_ID_CHARS, MAX_ITEMS, MAX_NOTE_CHARS, IdRef, NameRef, Note
from agora.core.similarity import greedy_clusters, jaccard

StepType = Literal["llm_call", "tool_call", "memory_read", "decision"]
MessageRole = Literal["system", "user", "assistant", "tool"]

DEFAULT_STEP_WEIGHTS: dict[StepType, float] = {
    "decision": 0.70,
    "llm_call": 0.55,
    "tool_call": 0.45,
    "memory_read": 0.35,
}
"""SAUP weight of a step's own (fused) confidence, by step type; the rest goes to the prior."""

NOT_RUN = -1.0
"""Value of `p_true_confidence` (and `verbalized_confidence` on steps without a model response)
when that signal was not measured."""

DEFAULT_VERBALIZED = 0.5
"""Raw verbalized confidence assumed when a response states none: maximally uninformative."""

SAMPLING_TEMPERATURE = 0.8
"""Temperature for semantic-entropy samples: high enough that an unsure model disagrees with
itself, low enough that a sure one does not."""

P_TRUE_TEMPERATURE = 0.0
"""Temperature for the P(True) follow-up: a self-assessment should not be random."""

CLUSTER_JACCARD = 0.40
"""Word-set Jaccard similarity at which two samples count as the same answer when clustering."""

ROUND_DIGITS = 12

MAX_KEPT_STEPS = 100
"""Steps a session's belief state keeps, the newest (its counters and cumulative confidence still
cover every step): a session may report steps for as long as it lives."""

P_TRUE_PROMPT = (
    "Consider the question and your previous answer. How likely is it that your answer is "
    "correct and well-grounded? Reply with only a JSON object: "
    '{"p_true": <a number from 0.0 to 1.0>, "reason": "<one sentence>"}'
)
"""The P(True) follow-up (Kadavath et al. 2022, black-box variant: the probability is asked for
rather than read from token log-probabilities, which chat APIs rarely expose)."""

REFLECTION_PROMPT = (
    "Before you continue, make your uncertainty explicit. List the points in your current "
    "reasoning that you are not confident about. For each one, state (1) what you know, "
    "(2) what you do not know, and (3) what information would resolve it."
)
"""System-2 reflection. When a step has `reflection_injected`, the caller appends this as a
system message before pausing, so the next model call (after the human answers) sees it."""


def _unit(value: float) -> float:
    """Clamp to [0, 1] and round away float noise (see the module docstring)."""
    return round(min(1.0, max(0.0, value)), ROUND_DIGITS)


def _check_unit(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")


class UncertaintyLevel(StrEnum):
    """How uncertain a step is, from the propagated confidence (see `UncertaintyPolicy`)."""

    LOW = "low"
    """confidence >= low_threshold"""
    MEDIUM = "medium"
    """medium_threshold <= confidence < low_threshold"""
    HIGH = "high"
    """high_threshold <= confidence < medium_threshold"""
    CRITICAL = "critical"
    """confidence < high_threshold"""


class UncertaintyAction(StrEnum):
    """What the caller does with a step."""

    PROCEED = "proceed"
    """The run continues."""
    PROCEED_WITH_LOG = "proceed_with_log"
    """The run continues; the caller logs a warning."""
    PAUSE_FOR_HUMAN = "pause_for_human"
    """The run parks (WAITING_FOR_HUMAN) until a person resumes it."""
    ABORT = "abort"
    """The run ends with `UncertaintyAbort`."""


class ModelMessage(BaseModel):
    """One chat message sent to a `ConfidenceModel` (mirrors `agora.llm.ChatMessage`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: MessageRole
    content: str


class MessageLike(Protocol):
    """Anything with a role and a content, e.g. `agora.llm.ChatMessage`, accepted as a prompt."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


class ConfidenceModel(Protocol):
    """The one way this module calls a model: chat messages in, answer text out.

    Kept minimal so the core imports no client. A service adapts its `ModelClient`::

        async def ask(messages: list[ModelMessage], *, temperature: float) -> str:
            chat = [ChatMessage(role=m.role, content=m.content) for m in messages]
            return (await client.complete(chat, temperature=temperature)).text
    """

    async def __call__(self, messages: list[ModelMessage], *, temperature: float) -> str: ...


class UncertaintyPolicy(BaseModel):
    """Thresholds and switches: how a confidence becomes a level, and a level an action."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    low_threshold: float = Field(default=0.80, ge=0.0, le=1.0, description="Confidence floor for LOW")
    medium_threshold: float = Field(default=0.60, ge=0.0, le=1.0, description="Floor for MEDIUM")
    high_threshold: float = Field(default=0.40, ge=0.0, le=1.0, description="Floor for HIGH")
    enable_p_true: bool = Field(default=True, description="Run the P(True) follow-up call")
    enable_semantic_sampling: bool = Field(
        default=False, description="Enable the adaptive semantic-entropy slow path"
    )
    irreversible_tool_names: list[str] = Field(
        default_factory=list,
        description="Tool name substrings (case-insensitive) that turn MEDIUM into PAUSE_FOR_HUMAN",
    )
    inject_reflection_on_high: bool = Field(
        default=True, description="Flag a System-2 reflection on model steps at HIGH, before the pause"
    )

    @field_validator("irreversible_tool_names")
    @classmethod
    def _names_are_clean(cls, names: list[str]) -> list[str]:
        # A blank substring would match every tool, pausing every MEDIUM tool call.
        cleaned = [name.strip() for name in names]
        if any(not name for name in cleaned):
            raise ValueError("irreversible tool names must be non-empty strings")
        return cleaned

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> UncertaintyPolicy:
        if not self.low_threshold >= self.medium_threshold >= self.high_threshold:
            raise ValueError("thresholds must satisfy low_threshold >= medium_threshold >= high_threshold")
        return self

    def classify(self, confidence: float) -> UncertaintyLevel:
        """The tier of `confidence`; a value exactly on a threshold belongs to the tier above it
        (0.80 is LOW, 0.60 MEDIUM, 0.40 HIGH at the defaults)."""
        if confidence >= self.low_threshold:
            return UncertaintyLevel.LOW
        if confidence >= self.medium_threshold:
            return UncertaintyLevel.MEDIUM
        if confidence >= self.high_threshold:
            return UncertaintyLevel.HIGH
        return UncertaintyLevel.CRITICAL

    def is_irreversible(self, tool_name: str | None) -> bool:
        """Whether `tool_name` contains any of `irreversible_tool_names`, ignoring case."""
        if not tool_name:
            return False
        lowered = tool_name.lower()
        return any(name.lower() in lowered for name in self.irreversible_tool_names)

    def decide(self, level: UncertaintyLevel, *, tool_name: str | None = None) -> UncertaintyAction:
        """The action for `level`; `tool_name` is the tool about to run, if any. Only MEDIUM
        depends on the tool: LOW is safe even for an irreversible tool, HIGH pauses anyway."""
        if level is UncertaintyLevel.LOW:
            return UncertaintyAction.PROCEED
        if level is UncertaintyLevel.MEDIUM:
            if self.is_irreversible(tool_name):
                return UncertaintyAction.PAUSE_FOR_HUMAN
            return UncertaintyAction.PROCEED_WITH_LOG
        if level is UncertaintyLevel.HIGH:
            return UncertaintyAction.PAUSE_FOR_HUMAN
        return UncertaintyAction.ABORT


class UncertaintyPropagator(BaseModel):
    """SAUP-style propagation: `propagated = w * fused + (1 - w) * cumulative`, `w` by step type."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step_weights: dict[StepType, float] = Field(
        default_factory=lambda: dict(DEFAULT_STEP_WEIGHTS),
        description="Weight of a step's own confidence by step type; types left out keep their default",
    )

    @field_validator("step_weights")
    @classmethod
    def _weights_complete(cls, weights: dict[StepType, float]) -> dict[StepType, float]:
        for step_type, weight in weights.items():
            _check_unit(f"step weight for {step_type!r}", weight)
        return {**DEFAULT_STEP_WEIGHTS, **weights}

    def weight(self, step_type: StepType) -> float:
        if step_type not in self.step_weights:
            raise ValueError(f"unknown step type {step_type!r}; expected one of {sorted(self.step_weights)}")
        return self.step_weights[step_type]

    def propagate(self, fused_confidence: float, step_type: StepType, cumulative_confidence: float) -> float:
        """Confidence of this step given the session's confidence before it."""
        w = self.weight(step_type)
        return _unit(w * fused_confidence + (1.0 - w) * cumulative_confidence)


class StepUncertainty(BaseModel):
    """The record of one observed step, as returned by the `observe_*` methods."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step_id: str = Field(min_length=1, max_length=MAX_ID_CHARS, description="Unique step identifier")
    step_type: StepType = Field(description='"llm_call", "tool_call", "memory_read" or "decision"')
    verbalized_confidence: float = Field(
        ge=-1.0,
        le=1.0,
        description="Raw extracted confidence (before calibration); -1.0 on steps without a response",
    )
    p_true_confidence: float = Field(ge=-1.0, le=1.0, description="P(True) result; -1.0 when not run")
    fused_confidence: float = Field(
        ge=0.0, le=1.0, description="Calibrated weighted fusion (lowered by the semantic slow path if it ran)"
    )
    propagated_confidence: float = Field(ge=0.0, le=1.0, description="After SAUP propagation")
    level: UncertaintyLevel = Field(description="Classified tier")
    action: UncertaintyAction = Field(description="Control action to take")
    samples_used: int = Field(default=0, ge=0, description="Semantic entropy samples drawn (0 = not run)")
    reflection_injected: bool = Field(default=False, description="Whether System-2 reflection applies")
    verbalized_found: bool = Field(
        default=False,
        description="The response stated a confidence (False: default used, or no response).",
    )
    semantic_confidence: float | None = Field(
        default=None, ge=0.0, le=1.0, description="1 - normalised semantic entropy, when sampled."
    )
    tool_name: NameRef | None = Field(default=None, description="The tool checked (tool checks only).")
    irreversible: bool = Field(default=False, description="The tool matched an irreversible name.")
    signal_errors: list[Note] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Model calls that failed or did not parse and were left out of the estimate.",
    )

    @field_validator("verbalized_confidence", "p_true_confidence")
    @classmethod
    def _probability_or_not_run(cls, value: float) -> float:
        if value < 0.0 and value != NOT_RUN:
            raise ValueError("must be in [0, 1], or -1.0 when not measured")
        return value


class SessionBelief(BaseModel):
    """Everything the estimator knows about a session; persist it with `model_dump(mode="json")`
    and rebuild the estimator with `UncertaintyEstimator.from_belief`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: IdRef = ""
    agent_id: IdRef = ""
    step_uncertainties: tuple[StepUncertainty, ...] = Field(
        default=(),
        max_length=MAX_KEPT_STEPS,
        description="Observed steps, oldest first (the newest `history_limit`, at most 100)",
    )
    cumulative_confidence: float = Field(
        default=1.0, ge=0.0, le=1.0, description="Propagated confidence after the last step; 1.0 before any"
    )
    total_steps: int = Field(
        default=0, ge=0, description="Steps observed, including any dropped from history"
    )
    high_uncertainty_steps: int = Field(default=0, ge=0, description="Steps classified HIGH or CRITICAL")

    @field_validator("step_uncertainties", mode="before")
    @classmethod
    def _newest_kept(cls, steps: Any) -> Any:
        """A belief saved before steps were capped loads with its newest `MAX_KEPT_STEPS`."""
        if isinstance(steps, list | tuple) and len(steps) > MAX_KEPT_STEPS:
            return steps[-MAX_KEPT_STEPS:]
        return steps

    @model_validator(mode="after")
    def _counts_agree(self) -> SessionBelief:
        if self.total_steps < len(self.step_uncertainties):
            raise ValueError("total_steps cannot be less than the number of recorded steps")
        if self.high_uncertainty_steps > self.total_steps:
            raise ValueError("high_uncertainty_steps cannot exceed total_steps")
        return self

    @property
    def last_step(self) -> StepUncertainty | None:
        return self.step_uncertainties[-1] if self.step_uncertainties else None


class SessionNotRunning(AgoraError):
    """A step was reported for a session that waits for a person or was aborted."""

    code = "SESSION_NOT_RUNNING"
    http_status = 409


class UncertaintyAbort(AgoraError):
    """A step reached CRITICAL uncertainty: the session ends and takes no more steps. `step` is
    the step that did it (None on the far side of Dapr, where only the code and message
    arrive)."""

    code = "UNCERTAINTY_ABORT"
    http_status = 409

    def __init__(self, step: StepUncertainty | None, message: str | None = None) -> None:
        if message is None:
            assert step is not None, "an abort names its step or gives a message"
            message = (
                f"step {step.step_id!r} ({step.step_type}) aborted: propagated confidence "
                f"{step.propagated_confidence:.3f} is {step.level.value}"
            )
        super().__init__(message)
        self.step = step

    @classmethod
    def from_message(cls, message: str, details: Mapping[str, JsonValue] | None = None) -> UncertaintyAbort:
        return cls(None, message)


# --------------------------------------------------------------------------- signal parsing

_NUMBER = r"(?P<num>\d{1,3}(?:\.\d+)?|\.\d+)(?![\d.]*\d)"
_UNIT = r"(?:\s*(?P<pct>%|percent\b)|\s*(?:/|out\s+of)\s*(?P<den>\d+(?:\.\d+)?))?"
_CONFIDENCE_KEY = (
    r"\bconfidence(?:[\s_-]*(?:score|level|rating))?"  # confidence, confidence_score, confidence level
    r"(?:\s*\([^)]{0,20}\))?"  # an optional "(0-1)" or "(%)"
    r"\s*[\"']?\s*(?:[:=]|\bis\b|\bof\b|\bat\b)?\s*[\"']?\s*"
)
_KEYED_NUMBER = re.compile(_CONFIDENCE_KEY + _NUMBER + _UNIT, re.IGNORECASE)
_KEYED_WORD = re.compile(
    _CONFIDENCE_KEY + r"(?P<word>very\s+high|high|moderate|medium|very\s+low|low)\b", re.IGNORECASE
)
_SURE_NUMBER = re.compile(_NUMBER + _UNIT + r"\s*(?:sure|confident|certain)\b", re.IGNORECASE)
_P_TRUE_KEYED = re.compile(r"\bp[_\s-]?true[\"']?\s*[:=]\s*[\"']?\s*" + _NUMBER + _UNIT, re.IGNORECASE)
_BARE_NUMBER = re.compile(r"^\s*" + _NUMBER + _UNIT + r"\s*\.?\s*$", re.IGNORECASE)
_WORD_CONFIDENCE = {
    "very high": 0.95,
    "high": 0.85,
    "moderate": 0.6,
    "medium": 0.6,
    "low": 0.3,
    "very low": 0.1,
}
_WORDS = re.compile(r"\w+")
_NEGATED = re.compile(r"\bnot\s+(?:\w+\s+){0,2}$", re.IGNORECASE)
"""Ends with "not", maybe a word or two after it: "not 100% sure", "not even 50% certain"."""


def _to_probability(match: re.Match[str], *, bare_percent: bool) -> float | None:
    """A matched number as a probability: `85%`, `85 percent` -> 0.85, `8/10` -> 0.8, `0.85`
    as is; a bare number in (1, 100] is read as a percentage only when `bare_percent`. Anything
    else (over 100%, a fraction above 1, a zero denominator) is not a probability: None."""
    value = float(match.group("num"))
    if match.group("pct"):
        return value / 100.0 if value <= 100.0 else None
    denominator = match.group("den")
    if denominator is not None:
        den = float(denominator)
        return value / den if den > 0.0 and value <= den else None
    if value <= 1.0:
        return value
    if bare_percent and value <= 100.0:
        return value / 100.0
    return None


def _last_probability(
    pattern: re.Pattern[str], text: str, *, bare_percent: bool, skip_negated: bool = False
) -> float | None:
    found = None
    for match in pattern.finditer(text):
        if skip_negated and _NEGATED.search(text, 0, match.start()):
            continue
        value = _to_probability(match, bare_percent=bare_percent)
        if value is not None:
            found = value
    return found


def parse_verbalized_confidence(text: str) -> float | None:
    """The confidence a response states about itself, in [0, 1], or None if it states none.

    Forms recognised, in priority order (within a form the *last* statement wins, since models
    tend to conclude with their final confidence):

    1. A `confidence` key with a number: ``Confidence: 85%``, ``confidence=0.9``,
       ``{"confidence": 0.9}``, ``confidence_score: 0.7``, ``confidence level is 8/10``,
       ``Confidence (0-1): 0.8``. A bare number above 1 after the key is a percentage
       (``confidence: 85`` -> 0.85).
    2. A `confidence` key with a word: very high 0.95, high 0.85, medium/moderate 0.6, low 0.3,
       very low 0.1.
    3. A number before sure/confident/certain: ``I'm about 0.7 sure``, ``90% confident``,
       ``80 percent certain``, ``9/10 sure``. Here a bare number must be at most 1 (``2 sure
       bets`` is not a confidence), and a negated statement (``not 100% sure``) is skipped: it
       says what the confidence is not.

    Numbers that are no probability (``confidence: 150%``, ``confidence: 1234``) are ignored.
    """
    keyed = _last_probability(_KEYED_NUMBER, text, bare_percent=True)
    if keyed is not None:
        return keyed
    words = [match.group("word") for match in _KEYED_WORD.finditer(text)]
    if words:
        return _WORD_CONFIDENCE[" ".join(words[-1].lower().split())]
    return _last_probability(_SURE_NUMBER, text, bare_percent=False, skip_negated=True)


def parse_p_true(text: str) -> float | None:
    """The probability in a P(True) answer, or None if it gives none.

    Accepts the requested JSON (``{"p_true": 0.8, ...}``, also inside surrounding prose or a code
    fence), a ``p_true: 0.8`` line, or an answer that is just a number (``0.8``, ``80%``).
    """
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        value = obj.get("p_true")
        if isinstance(value, int | float) and not isinstance(value, bool) and 0.0 <= value <= 1.0:
            return float(value)
    keyed = _last_probability(_P_TRUE_KEYED, text, bare_percent=True)
    if keyed is not None:
        return keyed
    return _last_probability(_BARE_NUMBER, text, bare_percent=True)


def calibrate(raw: float, bias: float) -> float:
    """ECE correction for an over-confident signal: ``raw * (1 - bias)``, within [0, 1]."""
    return _unit(raw * (1.0 - bias))


def response_words(text: str) -> frozenset[str]:
    """The lower-cased words of a sampled response: what two samples are compared by
    (`jaccard`) when sampling stops early and when samples are clustered."""
    return frozenset(_WORDS.findall(text.lower()))


def cluster_responses(responses: Sequence[str], threshold: float = CLUSTER_JACCARD) -> list[list[str]]:
    """Greedy clustering, in order (`greedy_clusters` over `response_words`): a response joins
    the first cluster whose first member it matches with Jaccard >= `threshold`, else it starts a
    new cluster. Responses without words match each other."""
    clusters = greedy_clusters([response_words(response) for response in responses], threshold)
    return [[responses[index] for index in cluster] for cluster in clusters]


def semantic_confidence(responses: Sequence[str], threshold: float = CLUSTER_JACCARD) -> float:
    """``1 - H / log2(n)``: 1.0 when all `n` responses fall in one cluster, 0.0 when each is alone.
    Fewer than two responses carry no disagreement: 1.0."""
    n = len(responses)
    if n < 2:
        return 1.0
    entropy = 0.0
    for cluster in cluster_responses(responses, threshold):
        p = len(cluster) / n
        entropy -= p * math.log2(p)
    return _unit(1.0 - entropy / math.log2(n))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _signal_error(signal: str, exc: BaseException) -> str:
    """One `signal_errors` entry, cut to a note's length (a model client's error may quote a
    whole response)."""
    return f"{signal}: {_describe(exc)}"[:MAX_NOTE_CHARS]


# --------------------------------------------------------------------------- estimator


class UncertaintyEstimator:
    """Measures each step's confidence and keeps the session's belief state (module docstring
    has the formulas). One estimator per session; not shared across sessions.

    `policy` sets thresholds and switches; `model` is the default `ConfidenceModel` for P(True)
    and sampling (each `observe_llm_response` may pass its own); `belief` resumes a saved
    session. The keyword tunables default to the values of the module docstring's formulas;
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
        verbalized_weight: float = 0.4,
        p_true_weight: float = 0.6,
        verbalized_calibration_bias: float = 0.25,
        p_true_calibration_bias: float = 0.10,
        min_samples: int = 2,
        max_samples: int = 5,
        early_stop_jaccard: float = 0.60,
        semantic_trigger_low: float = 0.50,
        semantic_trigger_high: float = 0.72,
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
            _check_unit(name, value)
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
        """Calibrated weighted fusion of the raw signals; `p_true` None (or -1.0) = not run."""
        calibrated_verbalized = calibrate(verbalized, self.verbalized_calibration_bias)
        if p_true is None or p_true < 0.0 or self.p_true_weight == 0.0:
            return calibrated_verbalized
        calibrated_p_true = calibrate(p_true, self.p_true_calibration_bias)
        total = self.verbalized_weight + self.p_true_weight
        return _unit(
            (self.verbalized_weight * calibrated_verbalized + self.p_true_weight * calibrated_p_true) / total
        )

    async def p_true(
        self, response_text: str, prompt_messages: Sequence[MessageLike], model: ConfidenceModel
    ) -> float | None:
        """Ask `model` how likely `response_text` is correct; None when the answer has no number.
        Errors from the model propagate (the `observe_*` methods record them instead)."""
        messages = [
            *_to_model_messages(prompt_messages),
            ModelMessage(role="assistant", content=response_text),
            ModelMessage(role="user", content=P_TRUE_PROMPT),
        ]
        return parse_p_true(await model(messages, temperature=P_TRUE_TEMPERATURE))

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
        messages = _to_model_messages(prompt_messages)

        async def batch(count: int) -> list[str]:
            calls = [model(list(messages), temperature=SAMPLING_TEMPERATURE) for _ in range(count)]
            # Wait for every call, so no failed sibling is left with an unretrieved exception.
            answers = await asyncio.gather(*calls, return_exceptions=True)
            for answer in answers:
                if isinstance(answer, BaseException):
                    raise answer
            return [answer for answer in answers if isinstance(answer, str)]

        samples = await batch(self.min_samples)
        if jaccard(response_words(samples[0]), response_words(samples[1])) < self.early_stop_jaccard:
            samples += await batch(self.max_samples - len(samples))
        return semantic_confidence(samples, self.cluster_jaccard), len(samples)

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

    def observe_step(
        self, step_id: str, confidence: float, *, step_type: StepType = "tool_call"
    ) -> tuple[StepUncertainty, UncertaintyAction]:
        """Record a step whose confidence is known without a model (a tool result's
        success, a retrieval score), taken as its fused confidence and propagated by type."""
        _check_unit("confidence", confidence)
        fused = _unit(confidence)
        propagated = self.propagator.propagate(fused, step_type, self._belief.cumulative_confidence)
        level = self.policy.classify(propagated)
        step = StepUncertainty(
            step_id=step_id,
            step_type=step_type,
            verbalized_confidence=NOT_RUN,
            p_true_confidence=NOT_RUN,
            fused_confidence=fused,
            propagated_confidence=propagated,
            level=level,
            action=self.policy.decide(level),
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


def _to_model_messages(messages: Sequence[MessageLike]) -> list[ModelMessage]:
    return [
        message
        if isinstance(message, ModelMessage)
        else ModelMessage.model_validate({"role": message.role, "content": message.content})
        for message in messages
    ]
