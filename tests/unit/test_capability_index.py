"""The index must answer exactly like a linear scan, under any sequence of writes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agora.core.capability_index import CapabilityIndex
from agora.core.models import CapabilityProfile

SKILLS = [f"s{i}" for i in range(8)]


def profile(agent_id: str, *skills: str) -> CapabilityProfile:
    return CapabilityProfile(agent_id=agent_id, agent_name=agent_id.title(), skill_tags=list(skills))


def linear_scan(
    profiles: dict[str, CapabilityProfile], required: list[str], preferred: list[str], limit: int
) -> list[str]:
    ranked = []
    for p in profiles.values():
        skills = set(p.skill_tags)
        if set(required) <= skills:
            ranked.append((-len(set(preferred) & skills), p.agent_id))
    return [agent_id for _, agent_id in sorted(ranked)[:limit]]


def test_required_skills_filter_and_preferred_skills_rank() -> None:
    index = CapabilityIndex()
    index.upsert(profile("researcher", "web_search", "summarize"))
    index.upsert(profile("scraper", "web_search"))
    index.upsert(profile("writer", "summarize"))
    found = index.filter_capable(["web_search"], ["summarize"], limit=5)
    assert [p.agent_id for p in found] == ["researcher", "scraper"]


def test_ties_break_by_agent_id_whatever_the_insertion_order() -> None:
    first, second = CapabilityIndex(), CapabilityIndex()
    for agent_id in ["c", "a", "b"]:
        first.upsert(profile(agent_id, "x"))
    for agent_id in ["b", "c", "a"]:
        second.upsert(profile(agent_id, "x"))
    assert [p.agent_id for p in first.filter_capable(["x"], [], 2)] == ["a", "b"]
    assert first.filter_capable(["x"], [], 3) == second.filter_capable(["x"], [], 3)


def test_limit_caps_the_answer_and_unknown_skills_match_nothing() -> None:
    index = CapabilityIndex()
    index.replace_all(profile(f"a{i:02}", "x") for i in range(20))
    assert len(index.filter_capable(["x"], [], 5)) == 5
    assert index.filter_capable(["nope"], [], 5) == []
    assert index.filter_capable(["x"], [], 0) == []


def test_update_replaces_skills_and_remove_forgets() -> None:
    index = CapabilityIndex(delta_limit=1)
    index.replace_all([profile("a", "x"), profile("b", "x")])
    index.upsert(profile("a", "y"))
    assert [p.agent_id for p in index.filter_capable(["x"], [], 5)] == ["b"]
    assert [p.agent_id for p in index.filter_capable(["y"], [], 5)] == ["a"]
    assert index.remove("b") is True
    assert index.remove("b") is False
    assert index.filter_capable(["x"], [], 5) == []
    assert len(index) == 1


def test_delta_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        CapabilityIndex(delta_limit=0)


skill_sets = st.lists(st.sampled_from(SKILLS), min_size=1, max_size=5, unique=True)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.sampled_from("abcdefghijkl"), skill_sets),
        st.tuples(st.just("remove"), st.sampled_from("abcdefghijkl"), st.just([])),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(
    ops=operations,
    delta_limit=st.integers(min_value=1, max_value=6),
    required=st.lists(st.sampled_from(SKILLS), min_size=1, max_size=3, unique=True),
    preferred=st.lists(st.sampled_from(SKILLS), max_size=4, unique=True),
    limit=st.integers(min_value=1, max_value=8),
)
def test_index_agrees_with_a_linear_scan(
    ops: list[tuple[str, str, list[str]]],
    delta_limit: int,
    required: list[str],
    preferred: list[str],
    limit: int,
) -> None:
    index = CapabilityIndex(delta_limit=delta_limit)
    truth: dict[str, CapabilityProfile] = {}
    for op, agent_id, skills in ops:
        if op == "upsert":
            truth[agent_id] = profile(agent_id, *skills)
            index.upsert(truth[agent_id])
        else:
            assert index.remove(agent_id) == (truth.pop(agent_id, None) is not None)
        found = [p.agent_id for p in index.filter_capable(required, preferred, limit)]
        assert found == linear_scan(truth, required, preferred, limit)
