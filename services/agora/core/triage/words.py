"""The words of a text as triage and outcome learning compare them: normalised (NFKC, lower
case), without stopwords and one-letter words, so "the file" and "File!" count as the same
word."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["STOPWORDS", "content_tokens", "normalise_text"]

_STOPWORDS_TEXT = (
    "a an and are as at be been but by can could did do does for from had has have if in into is it its "
    "of on or our so than that the their them then there these this those to was we were what when where "
    "which while who will with would you your i me my not no"
)
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def normalise_text(text: str) -> str:
    """NFKC, lower case, every run of non-alphanumerics (except `_`) collapsed to one space."""
    folded = unicodedata.normalize("NFKC", text).lower()
    return " ".join(re.findall(r"[a-z0-9_]+", folded))


def content_tokens(text: str) -> frozenset[str]:
    """The normalised words of `text` without stopwords and one-letter words: what similarity
    (Jaccard) and relatedness checks compare, so "the file" and "File!" count as the same word."""
    return frozenset(t for t in normalise_text(text).split() if len(t) > 1 and t not in STOPWORDS)
