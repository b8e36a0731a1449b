"""The market as an MCP server, through the `mcp` SDK's own client against the console of the
Redis system (every service its own app behind its own sidecar, with its scopes and policies):
a decider's key publishes a task and reads it decided, lists the agents, and decides an
escalation a session parked (the session continues, the decision names the key's person); a
viewer's key reads but cannot decide; a request without a key, or with an unknown one, is
refused; bad arguments come back as the tool's error, bounded, never a trace."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from agora.harness import LocalCluster
from tests.integration.helpers import CONSOLE_DECIDER, CONSOLE_KEYS, CONSOLE_VIEWER, replicas_of
from tests.integration.test_escalation import pause, session_state

pytestmark = pytest.mark.integration

EXPECTED_TOOLS = {
    "publish_task",
    "show_task",
    "cancel_task",
    "dispute_task",
    "list_tasks",
    "list_agents",
    "submit_plan",
    "show_plan",
    "ask_debate",
    "show_debate",
    "list_escalations",
    "show_escalation",
    "decide_escalation",
}


def mcp_url(cluster: LocalCluster) -> str:
    return f"{replicas_of(cluster, 'console')[0].app_url}/mcp"


@asynccontextmanager
async def connected(cluster: LocalCluster, key: str | None) -> AsyncIterator[ClientSession]:
    headers = {"authorization": f"Bearer {key}"} if key is not None else {}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(mcp_url(cluster), http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.isError, f"{tool}: {text_of(result)}"
    assert result.structuredContent is not None, tool
    return result.structuredContent


async def eventually_async(check: Any, timeout: float = 40.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError("not reached in time")
        await asyncio.sleep(0.3)


async def test_a_decider_publishes_a_task_and_reads_it_decided_by_the_market(
    apps_cluster: LocalCluster,
) -> None:
    task_id = f"mcp-{uuid.uuid4().hex[:10]}"
    async with connected(apps_cluster, CONSOLE_KEYS[CONSOLE_DECIDER]) as session:
        assert {t.name for t in (await session.list_tools()).tools} == EXPECTED_TOOLS
        agents = await call(session, "list_agents")
        assert {"researcher", "scout"} <= {a["agent_id"] for a in agents["agents"]}

        task = {
            "task_id": task_id,
            "description": "Summarise this week's papers on agent coordination",
            "required_skills": ["web_search"],
            "min_success_threshold": 0.0,
        }
        published = await call(session, "publish_task", task=task)
        assert published["task_id"] == task_id and published["event_id"]

        async def decided() -> dict[str, Any] | None:
            result = await session.call_tool("show_task", {"task_id": task_id})
            if result.isError:  # not on the board yet
                assert "TASK_NOT_FOUND" in text_of(result) or "NOT_FOUND" in text_of(result), text_of(result)
                return None
            record = result.structuredContent or {}
            return record if record.get("status") in {"COMPLETED", "FAILED"} else None

        record = await eventually_async(decided)
        assert record["allocation"]["status"] == "ALLOCATED"
        assert record["allocation"]["winning_agent_id"] in {"researcher", "scout"}
        listed = await call(session, "list_tasks", status=record["status"])
        assert task_id in listed["task_ids"]


async def test_a_decider_disputes_a_finished_task_in_their_own_name_and_a_viewer_cannot(
    apps_cluster: LocalCluster,
) -> None:
    task_id = f"mcp-{uuid.uuid4().hex[:10]}"
    task = {
        "task_id": task_id,
        "description": "Summarise this week's papers on agent coordination",
        "required_skills": ["web_search"],
        "min_success_threshold": 0.0,
    }
    async with connected(apps_cluster, CONSOLE_KEYS[CONSOLE_DECIDER]) as session:
        await call(session, "publish_task", task=task)

        async def ended() -> dict[str, Any] | None:
            result = await session.call_tool("show_task", {"task_id": task_id})
            record = None if result.isError else result.structuredContent or {}
            return record if record and record.get("status") in {"COMPLETED", "FAILED"} else None

        await eventually_async(ended)
        async with connected(apps_cluster, CONSOLE_KEYS[CONSOLE_VIEWER]) as viewer:
            refused = await viewer.call_tool(
                "dispute_task", {"task_id": task_id, "verdict": "failed", "why": "no"}
            )
            assert refused.isError and "FORBIDDEN: victor is a viewer" in text_of(refused), text_of(refused)
        disputed = await call(
            session, "dispute_task", task_id=task_id, verdict="failed", why="the list is empty"
        )
        assert disputed["status"] == "FAILED" and disputed["verdict"]["kind"] == "dispute", disputed
        assert (
            disputed["dispute"]["by"] == CONSOLE_DECIDER
            and "the list is empty" in disputed["verdict"]["reason"]
        )
        again = await session.call_tool(
            "dispute_task", {"task_id": task_id, "verdict": "passed", "why": "ok"}
        )
        assert again.isError and "NOT_DISPUTABLE" in text_of(again), text_of(again)


async def test_a_viewer_reads_an_escalation_but_only_a_decider_decides_it(
    apps_cluster: LocalCluster,
) -> None:
    session_id, escalation_id = pause(apps_cluster)

    async with connected(apps_cluster, CONSOLE_KEYS[CONSOLE_VIEWER]) as viewer:
        waiting = await call(viewer, "list_escalations", status="WAITING_FOR_HUMAN", limit=100)
        assert escalation_id in [e["escalation_id"] for e in waiting["escalations"]]
        shown = await call(viewer, "show_escalation", escalation_id=escalation_id)
        assert shown["status"] == "WAITING_FOR_HUMAN"
        refused = await viewer.call_tool(
            "decide_escalation",
            {"escalation_id": escalation_id, "decision": {"kind": "escalation", "action": "skip"}},
        )
        assert refused.isError and "FORBIDDEN: " in text_of(refused), text_of(refused)
        assert (await call(viewer, "show_escalation", escalation_id=escalation_id))[
            "status"
        ] == "WAITING_FOR_HUMAN"

    async with connected(apps_cluster, CONSOLE_KEYS[CONSOLE_DECIDER]) as decider:
        decided = await call(
            decider,
            "decide_escalation",
            escalation_id=escalation_id,
            decision={"kind": "escalation", "action": "skip"},
            why="decided through MCP",
        )
        assert decided["status"] == "RESOLVED"
        assert decided["decided_by"] == CONSOLE_DECIDER
        again = await decider.call_tool(
            "decide_escalation",
            {"escalation_id": escalation_id, "decision": {"kind": "escalation", "action": "abort"}},
        )
        assert again.isError, "a decided escalation is decided once"

    state = session_state(apps_cluster, session_id)
    assert state["status"] == "RUNNING", state


@pytest.mark.parametrize(
    "key", [None, "agora_nobody-has-this-key-at-the-console-mcp"], ids=["none", "unknown"]
)
def test_a_request_without_a_known_key_is_refused(apps_cluster: LocalCluster, key: str | None) -> None:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    answer = httpx.post(mcp_url(apps_cluster), json=body, headers=headers, timeout=10)
    assert answer.status_code == 401, answer.text
    assert answer.headers["www-authenticate"].lower().startswith("bearer")


async def test_bad_arguments_are_the_tools_error_not_a_trace(apps_cluster: LocalCluster) -> None:
    async with connected(apps_cluster, CONSOLE_KEYS[CONSOLE_DECIDER]) as session:
        cases: dict[str, dict[str, Any]] = {
            "show_task": {"task_id": "not an id/" * 50},
            "cancel_task": {"task_id": f"missing-{uuid.uuid4().hex[:8]}"},
            "publish_task": {"task": {"task_id": "t", "description": "", "required_skills": []}},
            "list_escalations": {"limit": 10_000},
            "show_escalation": {"escalation_id": f"esc-{uuid.uuid4().hex[:8]}"},
        }
        for tool, arguments in cases.items():
            result = await session.call_tool(tool, arguments)
            said = text_of(result)
            assert result.isError, f"{tool}: {said}"
            assert "Traceback" not in said and len(said) < 4_000, f"{tool}: {said[:500]}"
        unknown = await session.call_tool("show_escalation", {"escalation_id": f"esc-{uuid.uuid4().hex[:8]}"})
        assert "NOT_FOUND" in text_of(unknown), text_of(unknown)
