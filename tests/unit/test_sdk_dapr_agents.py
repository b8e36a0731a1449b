"""A dapr-agents agent's registry metadata as an Agora capability profile (no sidecar needed)."""

from __future__ import annotations

import pytest
from dapr_agents import AgentMetadata, AgentMetadataSchema, ToolMetadata

from agora.core.models import ModelTier
from agora.sdk._dapr_agents import _answer
from agora.sdk.dapr_agents import agent_id_of, instance_of, profile_of


def metadata(
    name: str = "Fast Scout", tools: list[str] | None = None, max_iterations: int | None = 6
) -> AgentMetadataSchema:
    return AgentMetadataSchema(
        version="1.0.9",
        name=name,
        registered_at="2026-11-26T12:00:00+00:00",
        agent=AgentMetadata(appid="agents", type="DurableAgent", max_iterations=max_iterations),
        tools=[ToolMetadata(name=t, description=f"the {t} tool", args="{}") for t in tools or []],
    )


def test_the_profile_takes_the_agent_s_name_its_skills_its_price_and_its_iteration_cap() -> None:
    profile = profile_of(metadata(), skills=["web_search"], cost_per_step_usd=0.01, model_tier=ModelTier.FAST)
    assert profile.agent_id == "fast-scout" and profile.agent_name == "Fast Scout"
    assert profile.skill_tags == ["web_search"] and profile.cost_per_step_usd == 0.01
    assert profile.max_steps == 6 and profile.model_tier is ModelTier.FAST
    assert profile_of(metadata(max_iterations=None), skills=["x"]).max_steps == 10
    assert profile_of(metadata(), skills=["x"], max_steps=3, agent_id="scout-2").max_steps == 3


def test_without_skills_the_agent_offers_its_tools_and_without_tools_it_must_say() -> None:
    assert profile_of(metadata(tools=["search_archive", "read_record"])).skill_tags == [
        "search_archive",
        "read_record",
    ]
    with pytest.raises(ValueError, match="give the skills it offers"):
        profile_of(metadata())


def test_agent_ids_and_run_instances() -> None:
    assert agent_id_of("Archivist") == "archivist"
    assert agent_id_of("  Dr. Who's  Helper ") == "dr-who-s-helper"
    with pytest.raises(ValueError, match="give agent_id"):
        agent_id_of("???")
    assert instance_of("task-1") == "dapr-agents.task-1"


def test_the_answer_is_the_final_message_s_text() -> None:
    assert _answer('{"role": "assistant", "content": "three records"}') == "three records"
    assert _answer('{"role": "assistant", "content": null}') == ""
    assert _answer("not json") == "not json"
    assert _answer(None) == ""
