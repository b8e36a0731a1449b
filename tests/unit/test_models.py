from __future__ import annotations

import pytest
from pydantic import ValidationError

from agora.core.messages import DeregisterAgent, RegisterAgent, registry_command_adapter
from agora.core.models import CapabilityProfile, CapabilityQuery, ModelTier


def test_profile_defaults_match_the_reference() -> None:
    p = CapabilityProfile(agent_id="researcher", agent_name="Web Researcher", skill_tags=["web_search"])
    assert p.model_tier is ModelTier.BALANCED
    assert p.cost_per_step_usd == 0.0
    assert p.max_steps == 20
    assert p.latency_sla_ms is None


def test_skill_tags_are_stripped_and_deduplicated_in_order() -> None:
    p = CapabilityProfile(agent_id="a", agent_name="A", skill_tags=[" x", "y", "x "])
    assert p.skill_tags == ["x", "y"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("agent_id", ""),
        ("agent_id", "has space"),
        ("agent_name", ""),
        ("skill_tags", []),
        ("skill_tags", ["ok", "  "]),
        ("cost_per_step_usd", -0.01),
        ("max_steps", 0),
        ("latency_sla_ms", 0),
        ("model_tier", "huge"),
    ],
)
def test_invalid_profiles_name_the_field(field: str, value: object) -> None:
    data: dict[str, object] = {"agent_id": "a", "agent_name": "A", "skill_tags": ["x"], field: value}
    with pytest.raises(ValidationError) as info:
        CapabilityProfile.model_validate(data)
    assert info.value.errors()[0]["loc"][0] == field


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError):
        CapabilityProfile.model_validate(
            {"agent_id": "a", "agent_name": "A", "skill_tags": ["x"], "extra": 1}
        )


def test_query_needs_a_required_skill() -> None:
    with pytest.raises(ValidationError):
        CapabilityQuery(required_skills=[])


def test_registry_commands_are_a_tagged_union() -> None:
    command = registry_command_adapter.validate_python(
        {"kind": "register", "profile": {"agent_id": "a", "agent_name": "A", "skill_tags": ["x"]}}
    )
    assert isinstance(command, RegisterAgent)
    assert isinstance(
        registry_command_adapter.validate_python({"kind": "deregister", "agent_id": "a"}), DeregisterAgent
    )
    with pytest.raises(ValidationError):
        registry_command_adapter.validate_python({"kind": "rename", "agent_id": "a"})
