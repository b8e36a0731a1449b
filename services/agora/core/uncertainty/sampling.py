"""System 2, the slow path: semantic entropy over re-sampled answers. When a step's fused
confidence lies in the trigger zone ``0.50 <= fused <= 0.72`` (both ends included), the prompt
is re-sampled at temperature `SAMPLING_TEMPERATURE`: 2 samples first; if their word-set Jaccard
similarity is >= 0.60 sampling stops early, otherwise it extends to 5. Samples are clustered
greedily (a sample joins the first cluster whose first member it matches with Jaccard >= 0.40),
and::

    semantic = 1 - H(cluster sizes) / log2(n_samples)     (Shannon entropy, base 2)
    fused    = min(fused, semantic)                       (pessimistic fusion)
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence

from agora.core.similarity import greedy_clusters, jaccard
from agora.core.uncertainty.confidence import unit
from agora.core.uncertainty.model import ConfidenceModel, MessageLike, to_model_messages

__all__ = [
    "CLUSTER_JACCARD",
    "EARLY_STOP_JACCARD",
    "MAX_SAMPLES",
    "MIN_SAMPLES",
    "SAMPLING_TEMPERATURE",
    "SEMANTIC_TRIGGER_HIGH",
    "SEMANTIC_TRIGGER_LOW",
    "cluster_responses",
    "response_words",
    "sample_semantic_confidence",
    "semantic_confidence",
]

SAMPLING_TEMPERATURE = 0.8
"""Temperature for semantic-entropy samples: high enough that an unsure model disagrees with
itself, low enough that a sure one does not."""

CLUSTER_JACCARD = 0.40
"""Word-set Jaccard similarity at which two samples count as the same answer when clustering."""

SEMANTIC_TRIGGER_LOW = 0.50
SEMANTIC_TRIGGER_HIGH = 0.72
"""The trigger zone of the fused confidence, both ends included: a step above it is sure enough,
one below it unsure enough, without sampling."""

MIN_SAMPLES = 2
MAX_SAMPLES = 5
EARLY_STOP_JACCARD = 0.60
"""Word-set Jaccard similarity of the first two samples at which sampling stops early."""

_WORDS = re.compile(r"\w+")


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
    return unit(1.0 - entropy / math.log2(n))


async def sample_semantic_confidence(
    prompt_messages: Sequence[MessageLike],
    model: ConfidenceModel,
    *,
    min_samples: int = MIN_SAMPLES,
    max_samples: int = MAX_SAMPLES,
    early_stop_jaccard: float = EARLY_STOP_JACCARD,
    cluster_jaccard: float = CLUSTER_JACCARD,
) -> tuple[float, int]:
    """Adaptive sampling: `min_samples` answers; if the first pair's Jaccard similarity is at
    least `early_stop_jaccard`, stop; else draw up to `max_samples`. Returns
    (semantic confidence, samples drawn). Each batch's calls run concurrently."""
    messages = to_model_messages(prompt_messages)

    async def batch(count: int) -> list[str]:
        calls = [model(list(messages), temperature=SAMPLING_TEMPERATURE) for _ in range(count)]
        # Wait for every call, so no failed sibling is left with an unretrieved exception.
        answers = await asyncio.gather(*calls, return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
        return [answer for answer in answers if isinstance(answer, str)]

    samples = await batch(min_samples)
    if jaccard(response_words(samples[0]), response_words(samples[1])) < early_stop_jaccard:
        samples += await batch(max_samples - len(samples))
    return semantic_confidence(samples, cluster_jaccard), len(samples)
