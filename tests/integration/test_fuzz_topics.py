"""Fuzzing the intake topics (redis profile, every service its own app): payloads drawn from
junk (any JSON, deep nesting, huge strings, non-JSON bodies) and from valid messages with one
field broken, published through the console's sidecar as any client would. Every payload the
topic's contract refuses is dead-lettered with its reason; no app crashes or logs an error."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from agora.core.debate import DebateRequest
from agora.core.limits import MAX_TEXT_CHARS
from agora.core.market import TaskSpec
from agora.core.messages import registry_command_adapter
from agora.core.plans import PlanRequest
from agora.harness import LocalCluster, ServiceReplica
from tests.integration.helpers import replicas_of
from tests.integration.test_hostile_input import dead_letter_for, log_lines

pytestmark = pytest.mark.integration

VALID: dict[str, dict[str, Any]] = {
    "agora.tasks": {"task_id": "fuzz", "description": "Summarise", "required_skills": ["nonexistent_skill"]},
    "agora.registry": {"kind": "deregister", "agent_id": "fuzz-nobody"},
    "agora.plans": {"plan_id": "fuzz", "task": "Say hello"},
    "agora.debates": {"debate_id": "fuzz", "question": "Which? Options: a | b",
                      "config": {"debaters": [{"debater_id": "d0"}, {"debater_id": "d1"}]}},
}  # fmt: skip
CONTRACTS: dict[str, TypeAdapter[Any]] = {
    "agora.tasks": TypeAdapter(TaskSpec),
    "agora.registry": registry_command_adapter,
    "agora.plans": TypeAdapter(PlanRequest),
    "agora.debates": TypeAdapter(DebateRequest),
}
ID_FIELDS = {"agora.tasks": "task_id", "agora.plans": "plan_id", "agora.debates": "debate_id"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def payloads(draw: st.DrawFn, topic: str) -> Any:
    """Junk, or the topic's valid example with one field broken."""
    kind = draw(st.sampled_from(["junk", "broken field", "missing field", "huge", "deep", "unknown kind"]))
    if kind == "junk":
        return draw(json_values)
    if kind == "deep":
        nested: Any = "bottom"
        for _ in range(draw(st.integers(50, 300))):
            nested = [nested]
        return {**VALID[topic], "nested": nested}
    payload = dict(VALID[topic])
    field = draw(st.sampled_from(sorted(payload)))
    if kind == "missing field":
        del payload[field]
    elif kind == "huge":
        payload[field] = "x" * (MAX_TEXT_CHARS * 4)
    elif kind == "unknown kind":
        payload["kind" if topic == "agora.registry" else field] = "NOT_A_KNOWN_VALUE"
    else:
        payload[field] = draw(json_values)
    return payload


def refused_by_contract(topic: str, payload: Any) -> bool:
    try:
        CONTRACTS[topic].validate_python(payload)
    except ValidationError:
        return True
    return False


def publish(cluster: LocalCluster, topic: str, body: bytes, content_type: str) -> tuple[int, str]:
    console = replicas_of(cluster, "console")[0]
    event_id = f"fuzz-{uuid.uuid4().hex}"
    if content_type == "application/cloudevents+json":
        event = {"specversion": "1.0", "id": event_id, "source": "fuzz", "type": f"{topic}.v1",
                 "datacontenttype": "application/json", "data": json.loads(body)}  # fmt: skip
        body = json.dumps(event).encode()
    response = httpx.post(
        f"{console.dapr_http}/v1.0/publish/agora-pubsub/{topic}",
        content=body,
        headers={"content-type": content_type},
        timeout=30,
    )
    return response.status_code, event_id


@pytest.mark.parametrize("topic", sorted(VALID))
def test_every_payload_a_topic_refuses_is_dead_lettered_with_its_reason(
    redis_cluster: LocalCluster, topic: str
) -> None:
    refused: list[str] = []
    apps = [r for r in redis_cluster.replicas if r.spec.module is not None]
    errors_before = {r.name: errors_in(r) for r in apps}

    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
    @given(payload=payloads(topic))
    def send(payload: Any) -> None:
        if isinstance(payload, dict) and topic in ID_FIELDS:  # never collide with real work
            payload = (
                {**payload, ID_FIELDS[topic]: f"fuzz-{uuid.uuid4().hex[:10]}"}
                if ID_FIELDS[topic] in payload
                else payload
            )
        status, event_id = publish(
            redis_cluster, topic, json.dumps(payload).encode(), "application/cloudevents+json"
        )
        assert status < 500 and status in (200, 204), (status, payload)
        if refused_by_contract(topic, payload):
            refused.append(event_id)

    send()
    assert refused, "the fuzzing sent nothing the contract refuses"
    for event_id in refused:
        letter = dead_letter_for(redis_cluster, event_id, timeout=30)
        assert letter["reason"] and letter["topic"] == topic
        assert letter["errors"] or letter["reason"] != "payload failed validation"

    status, _ = publish(redis_cluster, topic, b"this is not JSON {", "text/plain")
    assert status in (200, 204)
    for replica in apps:
        assert httpx.get(f"{replica.app_url}/healthz", timeout=5).status_code == 200, replica.name
        new = errors_in(replica)[len(errors_before[replica.name]) :]
        assert not new, (replica.name, new[:3])


def errors_in(replica: ServiceReplica) -> list[dict[str, Any]]:
    return [line for line in log_lines(replica) if line.get("level") == "error"]
