"""How alike two sets are, and grouping items by it: the one Jaccard similarity and the one
greedy clustering every part of Agora uses (a debate's positions, an uncertain model's
samples, past outcomes compared with the present situation).

`jaccard(a, b)` is the size of the sets' intersection over the size of their union, and 1.0
when both sets are empty: two empty sets are the same set, so two answers without a word are
alike (a debate counts them as one position, the uncertainty monitor as samples that agree).
Outcome similarity never asks about two empty sets: one of its components takes part only when
the query gives it.

`greedy_clusters` groups items in one pass, in order, so the grouping is deterministic: an item
joins the first cluster whose first member is similar enough to it, else it starts its own.
What counts as a word stays with each caller (a debate's answers, a model's samples, an
outcome's text each have their own), and so does the threshold.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from collections.abc import Set as AbstractSet

__all__ = ["greedy_clusters", "jaccard"]


def _as_set(items: Iterable[Hashable]) -> AbstractSet[Hashable]:
    return items if isinstance(items, AbstractSet) else set(items)


def jaccard(a: Iterable[Hashable], b: Iterable[Hashable]) -> float:
    """Size of the intersection over size of the union of `a` and `b` (each taken as a set),
    in [0, 1]; 1.0 when both are empty (two empty sets are equal)."""
    left, right = _as_set(a), _as_set(b)
    union = len(left | right)
    if not union:
        return 1.0
    return len(left & right) / union


def greedy_clusters(sets: Sequence[AbstractSet[Hashable]], threshold: float) -> list[list[int]]:
    """Indices of `sets` grouped in one pass, in order: each joins the first cluster whose
    first member's `jaccard` with it is at least `threshold`, else it starts a new cluster.
    Clusters come in the order they were started, members in the order given."""
    clusters: list[list[int]] = []
    for index, members in enumerate(sets):
        for cluster in clusters:
            if jaccard(sets[cluster[0]], members) >= threshold:
                cluster.append(index)
                break
        else:
            clusters.append([index])
    return clusters
