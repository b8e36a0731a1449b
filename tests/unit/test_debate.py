"""Debate's pure core: its defaults, clustering, convergence, the aggregations,
the escalate rule and the result."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agora.core.debate.aggregation import aggregate
from agora.core.debate.config import AggregationStrategy, DebateConfig, DebaterConfig
from agora.core.debate.gate import escalate_to_human
from agora.core.debate.record import (
    MAX_RETRIES_BY_PERSON,
    AnswerSource,
    DebateDecision,
    DebateRecord,
    DebateState,
    apply_debate_decision,
    new_debate_record,
    waiting,
)
from agora.core.debate.request import DebateRequest, DebateSubmission
from agora.core.debate.result import debate_result, single_agent_result
from agora.core.debate.rounds import (
    SIMILARITY_THRESHOLD,
    Position,
    cluster_positions,
    converged,
    debate_round,
    words,
)
from agora.core.escalation.decisions import EscalationResponse
from agora.core.planning import TokenUsage


def debaters(n: int = 3, **weights: float) -> list[DebaterConfig]:
    return [DebaterConfig(debater_id=f"d{i}", weight=weights.get(f"d{i}", 1.0)) for i in range(n)]


def config(**fields: object) -> DebateConfig:
    return DebateConfig.model_validate({"debaters": debaters(), **fields})


def position(debater: str, answer: str, confidence: float = 0.8) -> Position:
    return Position(
        debater_id=debater, answer=answer, reasoning=f"{debater} thinks so", confidence=confidence
    )


def test_the_reference_defaults_exactly() -> None:
    cfg = DebateConfig(debaters=debaters(2))
    assert cfg.max_rounds == 3
    assert cfg.aggregation is AggregationStrategy.WEIGHTED_VOTE
    assert cfg.convergence_threshold == 0.8
    assert cfg.adaptive_routing is True
    assert cfg.routing_confidence_threshold == 0.85
    assert cfg.escalate_threshold == 0.5
    assert cfg.cost_budget_usd is None and cfg.judge_config is None
    assert cfg.router == cfg.debaters[0]
    debater = DebaterConfig(debater_id="x")
    assert debater.weight == 1.0 and debater.temperature == 0.7 and debater.role_hint == ""


def test_a_debate_needs_two_distinct_debaters_and_a_judge_for_judge() -> None:
    with pytest.raises(ValidationError, match="at least 2"):
        DebateConfig(debaters=debaters(1))
    with pytest.raises(ValidationError, match="unique"):
        DebateConfig(debaters=[DebaterConfig(debater_id="a"), DebaterConfig(debater_id="a")])
    with pytest.raises(ValidationError, match="judge_config"):
        config(aggregation="JUDGE")


def test_answers_alike_in_words_share_a_cluster() -> None:
    assert words("Paris, the capital!") == {"paris", "the", "capital"}
    assert words("Paris") == words("paris")
    positions = [
        position("d0", "The answer is Paris"),
        position("d1", "Lyon"),
        position("d2", "the answer is paris"),
    ]
    assert cluster_positions(positions) == [[0, 2], [1]]
    debate = debate_round(1, positions)
    assert debate.clusters == [["d0", "d2"], ["d1"]]
    assert debate.convergence_score == pytest.approx(2 / 3)
    assert SIMILARITY_THRESHOLD == 0.5


def test_majority_takes_the_largest_cluster_and_its_most_confident_member() -> None:
    positions = [
        position("d0", "Paris", 0.6),
        position("d1", "Lyon", 0.99),
        position("d2", "Paris", 0.9),
    ]
    chosen = aggregate(debate_round(1, positions), config(aggregation="MAJORITY_VOTE"))
    assert chosen.debater_id == "d2" and chosen.answer == "Paris"
    assert chosen.confidence == pytest.approx((0.6 + 0.9) / 3)


def test_weights_decide_a_weighted_vote() -> None:
    positions = [position("d0", "Paris", 0.6), position("d1", "Lyon", 0.9), position("d2", "Paris", 0.6)]
    cfg = DebateConfig(debaters=debaters(3, d1=3.0))
    chosen = aggregate(debate_round(1, positions), cfg)
    assert chosen.answer == "Lyon"  # 3 * 0.9 = 2.7 against 0.6 + 0.6
    assert chosen.confidence == pytest.approx(2.7 / 5.0)
    even = aggregate(debate_round(1, positions), config())
    assert even.answer == "Paris"  # 1.2 against 0.9


def test_the_escalate_rule_and_early_stop() -> None:
    cfg = config()
    split = debate_round(2, [position("d0", "yes"), position("d1", "no"), position("d2", "maybe")])
    assert escalate_to_human(split.convergence_score, cfg) and not converged(split, cfg)
    agreed = debate_round(1, [position("d0", "yes"), position("d1", "yes"), position("d2", "yes")])
    assert converged(agreed, cfg) and not escalate_to_human(agreed.convergence_score, cfg)
    assert escalate_to_human(0.49, cfg) and not escalate_to_human(0.5, cfg)


def test_the_result_reports_every_field() -> None:
    cfg = config()
    first = debate_round(1, [position("d0", "yes"), position("d1", "no"), position("d2", "yes")])
    second = debate_round(2, [position("d0", "yes"), position("d1", "yes"), position("d2", "yes")])
    with_usage = [p.model_copy(update={"token_usage": TokenUsage(prompt_tokens=3), "cost_usd": 0.01})
                  for p in second.positions]  # fmt: skip
    second = second.model_copy(update={"positions": with_usage})
    result = debate_result([first, second], aggregate(second, cfg), cfg, duration_seconds=2.5)
    assert result.routing_decision == "debate" and result.total_rounds_run == 2
    assert result.converged and result.final_convergence_score == 1.0 and not result.escalate_to_human
    assert result.total_token_usage.prompt_tokens == 9 and result.total_cost_usd == pytest.approx(0.03)
    assert result.final_answer == "yes" and result.duration_seconds == 2.5
    single = single_agent_result(position("d0", "42", 0.95), duration_seconds=0.1)
    assert single.routing_decision == "single_agent" and single.rounds == [] and not single.escalate_to_human


ANSWERS = st.sampled_from(["Paris", "Lyon", "Marseille", "the answer is Paris", "it is Lyon"])


@settings(max_examples=200, deadline=None)
@given(
    answer=ANSWERS,
    confidences=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=8),
    strategy=st.sampled_from([AggregationStrategy.MAJORITY_VOTE, AggregationStrategy.WEIGHTED_VOTE]),
)
def test_unanimous_answers_converge_in_round_one_and_never_escalate(
    answer: str, confidences: list[float], strategy: AggregationStrategy
) -> None:
    cfg = DebateConfig(debaters=debaters(len(confidences)), aggregation=strategy)
    positions = [position(f"d{i}", answer, c) for i, c in enumerate(confidences)]
    debate = debate_round(1, positions)
    assert debate.convergence_score == 1.0 and converged(debate, cfg)
    assert not escalate_to_human(debate.convergence_score, cfg)
    assert aggregate(debate, cfg).answer == answer


@settings(max_examples=200, deadline=None)
@given(
    answers=st.lists(ANSWERS, min_size=2, max_size=8),
    confidences=st.data(),
    factor=st.floats(0.1, 10.0),
)
def test_scaling_every_weight_alike_changes_no_weighted_vote(
    answers: list[str], confidences: st.DataObject, factor: float
) -> None:
    values = [confidences.draw(st.floats(0.01, 1.0)) for _ in answers]
    positions = [position(f"d{i}", a, c) for i, (a, c) in enumerate(zip(answers, values, strict=True))]
    base = DebateConfig(debaters=debaters(len(answers)))
    scaled = DebateConfig(
        debaters=[d.model_copy(update={"weight": d.weight * factor}) for d in base.debaters]
    )
    debate = debate_round(1, positions)
    first, second = aggregate(debate, base), aggregate(debate, scaled)
    assert first.answer == second.answer and first.confidence == pytest.approx(second.confidence)


@settings(max_examples=200, deadline=None)
@given(answers=st.lists(ANSWERS, min_size=2, max_size=8))
def test_clusters_partition_the_positions_and_convergence_is_the_largest_share(answers: list[str]) -> None:
    positions = [position(f"d{i}", a) for i, a in enumerate(answers)]
    clusters = cluster_positions(positions)
    assert sorted(i for c in clusters for i in c) == list(range(len(positions)))
    assert [len(c) for c in clusters] == sorted((len(c) for c in clusters), reverse=True)
    assert debate_round(1, positions).convergence_score == len(clusters[0]) / len(positions)


def test_a_persons_decision_on_a_split_debate() -> None:
    now = datetime(2026, 11, 22, tzinfo=UTC)
    cfg = config()
    split = debate_round(1, [position("d0", "red"), position("d1", "green"), position("d2", "blue")])
    result = debate_result([split], aggregate(split, cfg), cfg, duration_seconds=1.0)
    assert result.escalate_to_human
    record = waiting(
        new_debate_record(DebateRequest(debate_id="q", question="which?", config=cfg), now), result, "e1", now
    )

    def decide(action: str, **fields: object) -> DebateRecord:
        response = EscalationResponse.model_validate({"action": action, **fields})
        return apply_debate_decision(
            record, DebateDecision(escalation_id="e1", response=response, decided_by="pat"), now
        )

    given = decide("modify_prompt", modified_prompt="green")
    assert given.state is DebateState.COMPLETED and given.final_answer == "green"
    assert given.answer_source is AnswerSource.PERSON and given.decided_by == "pat"
    kept = decide("skip")
    assert kept.final_answer == result.final_answer and kept.answer_source is AnswerSource.DEBATE
    again = decide("retry", guidance="think of latency")
    assert again.state is DebateState.RUNNING and again.rounds == [] and again.earlier == [result]
    assert again.question == "which?\nGuidance from pat: think of latency"
    aborted = decide("abort")
    assert aborted.state is DebateState.ABORTED and aborted.final_answer is None
    record = record.model_copy(update={"earlier": [result] * MAX_RETRIES_BY_PERSON})
    assert decide("retry").state is DebateState.ABORTED


def test_a_debate_s_options_are_data_at_least_two_distinct_lines_and_shown_in_its_question() -> None:
    config = DebateConfig(debaters=[DebaterConfig(debater_id="a"), DebaterConfig(debater_id="b")])
    asked = DebateSubmission(
        question="Keep a backup?", config=config, options=[" keep a backup", "drop it now"]
    )
    assert asked.options == ["keep a backup", "drop it now"]
    assert asked.question_as_asked == "Keep a backup?\nOptions: keep a backup | drop it now"
    for options, why in (
        (["yes"], "one option is no choice"),
        (["Yes", "yes"], "options must differ"),
        (["a | b", "c"], "String should match pattern"),
        (["   ", "c"], "an option is blank"),
    ):
        with pytest.raises(ValidationError, match=why):
            DebateSubmission(question="?", config=config, options=options)
    plain = DebateSubmission(question="?", config=config)
    assert "options" not in plain.model_dump(mode="json"), "left out when empty, as before"
