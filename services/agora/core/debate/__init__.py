"""Multi-agent debate, the pure part: debaters and their config, rounds with their clustering and
convergence, the aggregations, the act-vs-escalate rule, the result, and the debate service's
request and record.

Several debaters (`config`) answer a question; in later rounds each sees its peers' previous
answers. Answers are grouped by meaning with one clustering (`rounds.cluster_positions`:
Jaccard similarity of their word sets, `SIMILARITY_THRESHOLD`); the convergence score of a
round is the share of debaters in its largest cluster; a round at or above
`convergence_threshold` ends the debate early. The final round is aggregated
(`aggregation.aggregate`): MAJORITY_VOTE takes the largest cluster and its most confident
member, WEIGHTED_VOTE scores each cluster by the sum of weight * confidence of its members,
JUDGE leaves the synthesis to a judge model (the caller asks it). A debate whose final
convergence is below `escalate_threshold` is for a person to decide (`gate.escalate_to_human`;
or the conformal gate, `agora.core.conformal`, calibrated on recorded outcomes). The debate's
`result` carries the answer and how it was reached; the service's `request` and `record` are
what it is asked with and what people watch.

Choices made as users would expect them:

* words are lower-cased runs of letters and digits; two answers are in one cluster when the
  Jaccard similarity of their word sets is at least 0.5 to the cluster's first answer
  (single pass, in debater order, so the clustering is deterministic); two empty answers are
  alike;
* ties: MAJORITY_VOTE prefers the larger cluster, then the higher summed confidence, then the
  cluster whose first member comes first; WEIGHTED_VOTE prefers the higher score, then the
  larger cluster, then the earlier one (sums equal to 9 decimals are ties: the order their
  terms were added in does not decide); the representative is the most confident member, the
  earlier on ties;
* the aggregated confidence is the winning cluster's share of the vote: MAJORITY_VOTE the mean
  confidence of its members times its share of the debaters; WEIGHTED_VOTE its score over the
  sum of every debater's weight;
* strategies and statuses are upper-case strings like every status in Agora; the routing
  decision is `"debate"` or `"single_agent"` (lower case: it names a route, not a status).

Each name is imported from the module that holds its idea (`agora.core.debate.rounds`...);
this package exports nothing itself.
"""

__all__: list[str] = []
