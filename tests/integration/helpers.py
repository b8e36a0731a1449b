"""Helpers shared by the integration tests."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc  # type: ignore[import-untyped]
import httpx
import pytest
import yaml
from dapr.ext.workflow._durabletask.internal import protos as pb
from dapr.ext.workflow._durabletask.internal.orchestrator_service_pb2_grpc import TaskHubSidecarServiceStub

from agora.console.api_keys import ApiKeyEntry
from agora.console.auth import Role
from agora.console.users import entry_yaml
from agora.harness import LocalCluster, ServiceReplica
from agora.harness.cluster import LOCAL_MODEL
from agora.llm import OpenAICompatibleClient

T = TypeVar("T")

STORE_PROFILE = os.environ.get("AGORA_TEST_STORE", "redis")
"""The profile of the systems whose services are each their own app: `redis` (Redis as store
and broker), or with AGORA_TEST_STORE=postgres, PostgreSQL as store and RabbitMQ as broker
(`make test-postgres` runs the market's, planner's, debate's, escalation's and agent apps'
tests so)."""
if STORE_PROFILE not in ("redis", "postgres"):
    raise ValueError(f"AGORA_TEST_STORE is redis or postgres, not {STORE_PROFILE!r}")
uses_redis_itself = pytest.mark.skipif(
    STORE_PROFILE != "redis", reason="reads or changes Redis itself (its own commands)"
)
"""For a test that talks to Redis directly: it runs only on the redis profile."""


def eventually(check: Callable[[], T | None], timeout: float = 20.0, interval: float = 0.2) -> T:
    """Poll `check` until it returns a truthy value (returned) or `timeout` passes (last
    AssertionError or a timeout error raised). A check may return None for "not yet"; what
    comes back is never None, so a `... | None` check gives a plain value."""
    deadline = time.monotonic() + timeout
    last_error: AssertionError | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except AssertionError as exc:
            last_error = exc
        time.sleep(interval)
    if last_error is not None:
        raise last_error
    raise AssertionError(f"condition not met within {timeout}s")


def present(value: T | None) -> T:
    """`value`, which must have been found (a lookup that answers None when nothing is there)."""
    assert value is not None
    return value


def record_at(replica: ServiceReplica, app_id: str, path: str) -> dict[str, Any] | None:
    """A run's record from a service's API through `replica`'s sidecar; None for 404."""
    response = httpx.get(replica.invoke_url(path, app_id), timeout=30)
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()
    return record


def record_in_state(
    replica: ServiceReplica, app_id: str, path: str, states: set[str], timeout: float
) -> dict[str, Any]:
    """The record once its `state` is one of `states`."""

    def reached() -> dict[str, Any] | None:
        record = record_at(replica, app_id, path)
        return record if record is not None and record["state"] in states else None

    return eventually(reached, timeout=timeout, interval=0.3)


def recorded_message(cluster: LocalCluster, topic: str, key: str, value: str) -> dict[str, Any] | None:
    """The message on `topic` whose `key` is `value`, as the recorder received it (junk the
    topic fuzzing published on the same topic is passed over)."""
    recorder = replicas_of(cluster, "recorder")[0]
    answer = httpx.get(f"{recorder.app_url}/v1/messages/{topic}", timeout=10).json()
    return next((m for m in answer["messages"] if isinstance(m, dict) and m.get(key) == value), None)


def recorded_activity_inputs(
    replica: ServiceReplica, instance_id: str, activity: str
) -> list[dict[str, Any]]:
    """The inputs of the calls of `activity` whose results the workflow `instance_id` (run by
    `replica`'s sidecar) has recorded in its history, read from the state store: the steps a
    restart of the app or its sidecar will not take again."""
    with grpc.insecure_channel(f"127.0.0.1:{replica.endpoints.dapr_grpc_port}") as channel:
        sidecar = TaskHubSidecarServiceStub(channel)  # type: ignore[no-untyped-call]
        history: pb.GetInstanceHistoryResponse = sidecar.GetInstanceHistory(
            pb.GetInstanceHistoryRequest(instanceId=instance_id), timeout=10
        )
    events = history.events
    scheduled = {e.eventId: e.taskScheduled for e in events if e.HasField("taskScheduled")}
    completed = [scheduled[e.taskCompleted.taskScheduledId] for e in events if e.HasField("taskCompleted")]
    return [json.loads(task.input.value) for task in completed if task.name == activity]


def error_line(app: ServiceReplica, key: str, value: str) -> dict[str, Any] | None:
    """The app's ERROR log line whose `key` is `value` (the app logs JSON lines)."""
    log = app.cluster.logs / f"{app.name}.app.log"
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"{value}"' in line:
            entry = json.loads(line)
            if entry.get("level") == "error" and entry.get(key) == value:
                return dict(entry)
    return None


def replicas_of(cluster: LocalCluster, app_id: str) -> list[ServiceReplica]:
    return [r for r in cluster.replicas if r.spec.app_id == app_id]


def profile(agent_id: str, *skills: str, **extra: object) -> dict[str, object]:
    return {
        "agent_id": agent_id,
        "agent_name": agent_id.replace("-", " ").title(),
        "skill_tags": list(skills),
        **extra,
    }


def filter_ids(base_url: str, required: list[str], preferred: list[str] | None = None) -> list[str]:
    response = httpx.post(
        f"{base_url}/v1/agents/filter",
        json={"required_skills": required, "preferred_skills": preferred or []},
        timeout=10,
    )
    response.raise_for_status()
    return [a["agent_id"] for a in response.json()["agents"]]


def publish_event(dapr_http: str, topic: str, payload: object, *, event_id: str | None = None) -> str:
    """Publish as an outside client would: a CloudEvent through a sidecar."""
    event_id = event_id or str(uuid.uuid4())
    event = {
        "specversion": "1.0",
        "id": event_id,
        "source": "tests",
        "type": f"{topic}.v1",
        "datacontenttype": "application/json",
        "data": payload,
    }
    response = httpx.post(
        f"{dapr_http}/v1.0/publish/agora-pubsub/{topic}",
        content=httpx.Request("POST", "/", json=event).content,
        headers={"content-type": "application/cloudevents+json"},
        timeout=10,
    )
    response.raise_for_status()
    return event_id


def start_agora_run(
    cwd: Path, env: dict[str, str], timeout: float = 180
) -> tuple[subprocess.Popen[str], list[str]]:
    """`agora run` (what `make run` starts) in `cwd`, once it says it is running: the process
    and what it printed. A system that does not come up fails the test, killed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agora.cli", "run"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    output: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line)
        if line.startswith("Running."):
            return proc, output
    proc.kill()
    pytest.fail("`agora run` did not come up:\n" + "".join(output))


CONSOLE_DECIDER, CONSOLE_VIEWER = "alice", "victor"
CONSOLE_SECRETS = {CONSOLE_DECIDER: "alice-decides-escalations", CONSOLE_VIEWER: "victor-only-looks"}


def write_console_users(path: Path) -> Path:
    """A console users file: `CONSOLE_DECIDER` may decide, `CONSOLE_VIEWER` only read."""
    path.write_text(
        "users:\n"
        + entry_yaml(CONSOLE_DECIDER, Role.DECIDER, CONSOLE_SECRETS[CONSOLE_DECIDER])
        + entry_yaml(CONSOLE_VIEWER, Role.VIEWER, CONSOLE_SECRETS[CONSOLE_VIEWER])
    )
    return path


CONSOLE_KEYS = {
    CONSOLE_DECIDER: "agora_alice-acts-with-this-key-at-the-console-mcp",
    CONSOLE_VIEWER: "agora_victor-reads-with-this-key-at-the-console-mcp",
}
"""The API keys the console's people act with at `/mcp` (`write_console_api_keys`)."""


def write_console_api_keys(path: Path) -> Path:
    """A console API keys file: `CONSOLE_KEYS`, each acting as its person with their role."""
    roles = {CONSOLE_DECIDER: Role.DECIDER, CONSOLE_VIEWER: Role.VIEWER}
    entries = [
        ApiKeyEntry(name=name, role=roles[name], key_sha256=hashlib.sha256(key.encode()).hexdigest())
        for name, key in CONSOLE_KEYS.items()
    ]
    path.write_text(yaml.safe_dump({"keys": [e.model_dump(mode="json") for e in entries]}))
    return path


def local_model_client(
    system: LocalCluster,
    *,
    max_tokens: int,
    timeout_s: float = 60,
    required_call_prefill: tuple[str, str] | None = None,
) -> OpenAICompatibleClient:
    """An OpenAI-compatible client straight to `system`'s local model server."""
    assert system.model_url is not None
    return OpenAICompatibleClient(
        system.model_url,
        None,
        LOCAL_MODEL,
        timeout_s=timeout_s,
        max_tokens=max_tokens,
        required_call_prefill=required_call_prefill,
    )
