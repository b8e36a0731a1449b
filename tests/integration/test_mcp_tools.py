"""Tools from MCP servers by Dapr's two paths, against a real market (redis profile): an agent
app built on the SDK takes tools from a small MCP server that is its own Dapr app
(tests/integration/apps/mcp_tools.py, app id `mcp-tools`),

- through service invocation on the agent app's own sidecar (MCP's streamable HTTP transport
  at `/v1.0/invoke/mcp-tools/method/mcp`, under mTLS and the server's access policy), and
- through an `MCPServer` resource of the agent app's daprd (which reaches the server through
  its own service invocation too), each call a durable workflow that completes even when the
  agent app is killed mid-call, the tool running once.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.system import CONSOLE, SERVICES
from tests.integration.helpers import eventually, publish_event, replicas_of

pytestmark = pytest.mark.integration

APPS = Path(__file__).resolve().parent / "apps"
TERMINAL = {"COMPLETED", "FAILED", "PARTIAL", "REJECTED"}
MCP_RESOURCE = """\
apiVersion: dapr.io/v1alpha1
kind: MCPServer
metadata:
  name: tools
spec:
  endpoint:
    streamableHTTP:
      url: http://127.0.0.1:{dapr_http_port}/v1.0/invoke/mcp-tools/method/mcp
      timeout: 60s
scopes:
  - agents
"""
"""The agent app's daprd reaches the MCP server app through its own service invocation (mTLS,
the server's access policy), so the durable path crosses apps as the other one does."""


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Path]]:
    run_dir = tmp_path_factory.mktemp("mcp-tools-cluster")
    calls = run_dir / "mcp-calls.txt"
    with LocalCluster("redis", run_dir=run_dir) as cluster:
        for spec in [*SERVICES, CONSOLE]:
            cluster.add_service(spec)
        cluster.add_service(
            ServiceSpec(
                "mcp-tools",
                None,
                command=[sys.executable, str(APPS / "mcp_tools.py")],
                env={"MCP_TOOLS_CALLS": str(calls)},
            )
        )
        resources = run_dir / "agents-resources"
        resources.mkdir()
        agents = cluster.reserve_replica(
            ServiceSpec(
                "agents",
                "agora.sdk",
                env={"AGORA_AGENTS_FILE": str(APPS / "mcp_agents.py")},
                resource_dirs=(resources,),
            )
        )
        (resources / "mcp-tools.yaml").write_text(
            MCP_RESOURCE.format(dapr_http_port=agents.endpoints.dapr_http_port)
        )
        agents.start()
        yield cluster, calls


def console(cluster: LocalCluster) -> ServiceReplica:
    return replicas_of(cluster, "console")[0]


def publish(cluster: LocalCluster, description: str, skill: str) -> str:
    task_id = f"mcp-{uuid.uuid4().hex[:8]}"
    spec = {
        "task_id": task_id,
        "description": description,
        "required_skills": [skill],
        "min_success_threshold": 0.0,
    }
    publish_event(console(cluster).dapr_http, "agora.tasks", spec)
    return task_id


def record_of(cluster: LocalCluster, task_id: str) -> dict[str, Any] | None:
    answer = httpx.get(console(cluster).invoke_url(f"v1/tasks/{task_id}", "taskboard"), timeout=10)
    return answer.json() if answer.status_code == 200 else None


def settled(cluster: LocalCluster, task_id: str, timeout: float = 90) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        record = record_of(cluster, task_id)
        return record if record and record["status"] in TERMINAL and record["outcome"] else None

    return eventually(done, timeout=timeout)


def test_an_agent_calls_a_tool_of_an_mcp_server_app_through_its_sidecar(
    market: tuple[LocalCluster, Path],
) -> None:
    cluster, _ = market
    record = settled(cluster, publish(cluster, "What is 2 + 3?", "mcp_arithmetic"))

    assert record["status"] == "COMPLETED" and record["allocation"]["winning_agent_id"] == "mcp-adder"
    assert record["outcome"]["summary"] == "5.0", "the MCP server's add answered"
    assert record["outcome"]["actual_steps"] == 2


def test_an_mcp_tool_s_error_reaches_the_model_and_the_run_goes_on(market: tuple[LocalCluster, Path]) -> None:
    cluster, _ = market
    record = settled(cluster, publish(cluster, "Refuse politely", "mcp_arithmetic"))

    summary = record["outcome"]["summary"]
    assert record["status"] == "COMPLETED", summary
    assert summary.startswith("error: McpToolFailed:") and "refused: politely" in summary


def test_service_invocation_passes_mcp_s_streamable_http_exchange_through(
    market: tuple[LocalCluster, Path],
) -> None:
    """The exchange as the SDK's client speaks it, through a sidecar: the answer to
    `initialize` is an SSE stream with the session's `mcp-session-id` header, which later
    requests carry (the server refuses one without it) and the closing DELETE ends."""
    cluster, _ = market
    url = console(cluster).invoke_url("mcp", "mcp-tools")
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}},
    }  # fmt: skip

    opened = httpx.post(url, json=initialize, headers=headers, timeout=10)
    session = {**headers, "mcp-session-id": opened.headers.get("mcp-session-id", "")}
    initialized = httpx.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session, timeout=10
    )
    listed = httpx.post(
        url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session, timeout=10
    )
    anonymous = httpx.post(
        url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=headers, timeout=10
    )
    ended = httpx.delete(url, headers=session, timeout=10)

    assert opened.status_code == 200 and opened.headers["content-type"].startswith("text/event-stream")
    assert opened.headers.get("mcp-session-id") and '"serverInfo"' in opened.text
    assert initialized.status_code == 202
    assert listed.status_code == 200 and '"name":"stamp"' in listed.text.replace(" ", "")
    assert anonymous.status_code == 400, "the session's header is what the server knows it by"
    assert ended.status_code == 200


def test_only_the_apps_its_policy_names_may_call_the_mcp_server(market: tuple[LocalCluster, Path]) -> None:
    """components/access-control/mcp-tools.yaml: `agents` may speak MCP at `/mcp`; the
    allocator (like every app not named) is denied by the server's sidecar."""
    cluster, _ = market
    [allocator] = replicas_of(cluster, "allocator")
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"accept": "application/json, text/event-stream"}

    denied = httpx.post(allocator.invoke_url("mcp", "mcp-tools"), json=request, headers=headers, timeout=10)

    assert denied.status_code == 403, denied.text


def test_a_durable_mcp_tool_call_completes_once_when_the_agent_app_is_killed_mid_call(
    market: tuple[LocalCluster, Path],
) -> None:
    cluster, calls = market
    label = uuid.uuid4().hex[:8]
    task_id = publish(cluster, f"Stamp {label}", "durable_stamp")
    [app] = replicas_of(cluster, "agents")

    def log() -> list[str]:
        return calls.read_text().splitlines() if calls.exists() else []

    eventually(lambda: f"start {label}" in log() or None, timeout=60)
    app.kill_app()  # the tool is under way: it takes four seconds
    time.sleep(1)
    app.start_app()
    record = settled(cluster, task_id)

    assert record["status"] == "COMPLETED" and record["outcome"]["agent_id"] == "stamper"
    assert record["outcome"]["summary"] == f"stamped {label}"
    assert [a["agent_id"] for a in record["awards"]] == ["stamper"], "the run resumed; nobody else got it"
    assert log().count(f"start {label}") == 1, "the resumed run waited for the call it had started"
    assert f"end {label}" in log()
