"""Fuzzing every topic a service subscribes to (redis profile, every service its own app):
payloads drawn from junk (any JSON, deep nesting, huge strings, non-JSON bodies) and from valid
messages with one field broken. Intake topics are published through the console's sidecar as
any client would; protected topics through the sidecar of the one app their scopes let publish
(a buggy or hijacked publisher). Every payload the topic's contract refuses is dead-lettered
with its reason, and so is every valid one the receivers' source of truth disowns (`DISOWNED`:
the fuzzed ids name no real task or escalation); no app crashes or logs an error."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from agora.core.contracts import OutcomeReport
from agora.core.debate.request import DebateRequest
from agora.core.limits import MAX_TEXT_CHARS
from agora.core.market import TaskOutcome, TaskSpec
from agora.core.messages import (
    AwardLapsed,
    EscalationOutcome,
    EscalationResolved,
    TaskAwarded,
    TaskRejected,
    registry_command_adapter,
)
from agora.core.plans.request import PlanRequest
from agora.harness import LocalCluster, ServiceReplica
from agora.runtime.pubsub import REPLY_TO_ATTRIBUTE
from agora.worker.app import SAMPLE_AGENTS, load_profiles
from tests.integration.helpers import replicas_of
from tests.integration.test_hostile_input import dead_letter_for, log_lines

pytestmark = pytest.mark.integration

BID = {"bid_id": "b-fuzz", "task_id": "fuzz", "agent_id": "researcher", "self_reported_success_prob": 0.8,
       "estimated_cost_usd": 0.1, "estimated_steps": 1}  # fmt: skip
SCORE = {"bid_id": "b-fuzz", "agent_id": "researcher", "raw_success_prob": 0.8,
         "calibrated_success_prob": 0.8, "reputation_score": 0.5, "cost_score": 0.5, "composite": 0.6,
         "ucb_bonus": 0.0, "final_score": 0.6}  # fmt: skip

VALID: dict[str, dict[str, Any]] = {
    "agora.tasks": {"task_id": "fuzz", "description": "Summarise", "required_skills": ["nonexistent_skill"]},
    "agora.registry": {"kind": "deregister", "agent_id": "fuzz-nobody"},
    "agora.plans": {"plan_id": "fuzz", "task": "Say hello"},
    "agora.debates": {"debate_id": "fuzz", "question": "Which? Options: a | b",
                      "config": {"debaters": [{"debater_id": "d0"}, {"debater_id": "d1"}]}},
    "agora.task.awarded": {"task_id": "fuzz", "agent_id": "researcher", "award_token": "t" * 32,
                           "spec": {"task_id": "fuzz", "description": "d", "required_skills": ["s"]},
                           "bid": BID, "score": SCORE},
    "agora.task.rejected": {"task_id": "fuzz", "reason": "no capable agent",
                            "result": {"task_id": "fuzz", "status": "REJECTED",
                                       "reject_reason": "no capable agent"}},
    "agora.task.award_lapsed": {"task_id": "fuzz", "agent_id": "researcher", "attempt": 1,
                                "awarded_at": "2026-01-01T12:00:00Z", "lapsed_at": "2026-01-01T12:00:30Z"},
    "agora.task.outcome": {"task_id": "fuzz", "agent_id": "researcher", "actual_success": True,
                           "actual_cost_usd": 0.1, "actual_steps": 1, "award_token": "t" * 32},
    "agora.task.outcome.recorded": {"outcome": {"task_id": "fuzz", "agent_id": "fuzz-agent",
                                                "actual_success": True, "actual_cost_usd": 0.1,
                                                "actual_steps": 1},
                                    "counts_as_success": True},
    "agora.escalation.resolved": {"escalation_id": "fuzz", "waiting_party": {"kind": "task", "id": "fuzz"},
                                  "decision": {"kind": "escalation", "action": "skip"},
                                  "decided_by": "mallory", "status": "RESOLVED"},
    "agora.escalation.outcome": {"escalation_id": "fuzz", "succeeded": True},
}  # fmt: skip
CONTRACTS: dict[str, TypeAdapter[Any]] = {
    "agora.tasks": TypeAdapter(TaskSpec),
    "agora.registry": registry_command_adapter,
    "agora.plans": TypeAdapter(PlanRequest),
    "agora.debates": TypeAdapter(DebateRequest),
    "agora.task.awarded": TypeAdapter(TaskAwarded),
    "agora.task.rejected": TypeAdapter(TaskRejected),
    "agora.task.award_lapsed": TypeAdapter(AwardLapsed),
    "agora.task.outcome": TypeAdapter(TaskOutcome),
    "agora.task.outcome.recorded": TypeAdapter(OutcomeReport),
    "agora.escalation.resolved": TypeAdapter(EscalationResolved),
    "agora.escalation.outcome": TypeAdapter(EscalationOutcome),
}
ID_FIELDS = {
    "agora.tasks": "task_id",
    "agora.plans": "plan_id",
    "agora.debates": "debate_id",
    "agora.task.awarded": "task_id",
    "agora.task.rejected": "task_id",
    "agora.task.award_lapsed": "task_id",
    "agora.task.outcome": "task_id",
    "agora.escalation.resolved": "escalation_id",
    "agora.escalation.outcome": "escalation_id",
}
PUBLISHER = {
    "agora.task.awarded": "taskboard",
    "agora.task.rejected": "taskboard",
    "agora.task.award_lapsed": "taskboard",
    "agora.task.outcome": "worker",
    "agora.task.outcome.recorded": "taskboard",
    "agora.escalation.resolved": "escalation",
    "agora.escalation.outcome": "uncertainty",
}
"""Protected topics and the one app whose sidecar may publish each (components/redis/pubsub.yaml);
the intake topics are published through the console."""
DISOWNED = {"agora.task.awarded", "agora.task.award_lapsed", "agora.task.outcome", "agora.escalation.outcome"}
"""Topics whose receivers check every valid message against their source of truth and refuse
(dead-letter) one it disowns. A decision or a rejection naming a waiting party or task nobody
here holds is not refused but left alone, and so is an award to an agent no worker here runs:
every subscriber acts only on its own."""
OUR_AGENTS = {p.agent_id for p in load_profiles(SAMPLE_AGENTS)}


def disowned(topic: str, payload: Any) -> bool:
    """A valid message the receivers' source of truth refuses (the fuzzed ids name nothing)."""
    if topic not in DISOWNED:
        return False
    return topic != "agora.task.awarded" or payload.get("agent_id") in OUR_AGENTS


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
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


REPLY_ROUTED = {"agora.task.outcome.recorded", "agora.task.rejected", "agora.task.award_lapsed"}
"""A task's ends, which the planner hears only for its own tasks (`reply_to`): sent as a plan's
task's would be, so the planner's checks are fuzzed too."""


def publish(cluster: LocalCluster, topic: str, body: bytes, content_type: str) -> tuple[int, str]:
    console = replicas_of(cluster, PUBLISHER.get(topic, "console"))[0]
    event_id = f"fuzz-{uuid.uuid4().hex}"
    if content_type == "application/cloudevents+json":
        event = {"specversion": "1.0", "id": event_id, "source": "fuzz", "type": f"{topic}.v1",
                 "datacontenttype": "application/json", "data": json.loads(body)}  # fmt: skip
        if topic in REPLY_ROUTED:
            event[REPLY_TO_ATTRIBUTE] = "planner"
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
    apps_cluster: LocalCluster, topic: str
) -> None:
    refused: list[str] = []
    apps = [r for r in apps_cluster.replicas if r.spec.module is not None]
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
            apps_cluster, topic, json.dumps(payload).encode(), "application/cloudevents+json"
        )
        assert status < 500 and status in (200, 204), (status, payload)
        if refused_by_contract(topic, payload) or disowned(topic, payload):
            refused.append(event_id)

    send()
    assert refused, "the fuzzing sent nothing the contract refuses"
    for event_id in refused:
        letter = dead_letter_for(apps_cluster, event_id, timeout=30)
        assert letter["reason"] and letter["topic"] == topic
        assert letter["errors"] or letter["reason"] != "payload failed validation"

    status, _ = publish(apps_cluster, topic, b"this is not JSON {", "text/plain")
    assert status in (200, 204)
    # What a subscriber keeps of the junk can still be shown (the recorder lists what it got).
    recorder = replicas_of(apps_cluster, "recorder")[0]
    assert httpx.get(f"{recorder.app_url}/v1/messages/{topic}", timeout=10).status_code == 200
    for replica in apps:
        assert httpx.get(f"{replica.app_url}/healthz", timeout=5).status_code == 200, replica.name
        new = errors_in(replica)[len(errors_before[replica.name]) :]
        assert not new, (replica.name, new[:3])


def errors_in(replica: ServiceReplica) -> list[dict[str, Any]]:
    return [line for line in log_lines(replica) if line.get("level") == "error"]
