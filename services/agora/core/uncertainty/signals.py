"""The System-1 signals of a model response: the confidence the response states about itself
(verbalized: "Confidence: 85%", `parse_verbalized_confidence`), and P(True), the probability
the model gives its answer when asked in one follow-up call (`ask_p_true`, `parse_p_true`).
Both are raw, over-confident signals; `fusion` calibrates and blends them."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from agora.core.uncertainty.model import ConfidenceModel, MessageLike, ModelMessage, to_model_messages

__all__ = [
    "DEFAULT_VERBALIZED",
    "P_TRUE_PROMPT",
    "P_TRUE_TEMPERATURE",
    "ask_p_true",
    "parse_p_true",
    "parse_verbalized_confidence",
]

DEFAULT_VERBALIZED = 0.5
"""Raw verbalized confidence assumed when a response states none: maximally uninformative."""

P_TRUE_TEMPERATURE = 0.0
"""Temperature for the P(True) follow-up: a self-assessment should not be random."""

P_TRUE_PROMPT = (
    "Consider the question and your previous answer. How likely is it that your answer is "
    "correct and well-grounded? Reply with only a JSON object: "
    '{"p_true": <a number from 0.0 to 1.0>, "reason": "<one sentence>"}'
)
"""The P(True) follow-up (Kadavath et al. 2022, black-box variant: the probability is asked for
rather than read from token log-probabilities, which chat APIs rarely expose)."""


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


async def ask_p_true(
    response_text: str, prompt_messages: Sequence[MessageLike], model: ConfidenceModel
) -> float | None:
    """Ask `model` how likely `response_text` (its answer to `prompt_messages`) is correct; None
    when the answer has no number. Errors from the model propagate."""
    messages = [
        *to_model_messages(prompt_messages),
        ModelMessage(role="assistant", content=response_text),
        ModelMessage(role="user", content=P_TRUE_PROMPT),
    ]
    return parse_p_true(await model(messages, temperature=P_TRUE_TEMPERATURE))
