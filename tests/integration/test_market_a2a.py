"""The market as an A2A agent, through the `a2a-sdk`'s own client against the console of the
Redis system (every service its own app behind its own sidecar): the Agent Card lists the
market's skills; a decider's streamed message becomes a task the market completes, its status
and outcome arriving as they happen; GetTask and ListTasks read it back; the 0.3 wire's
`message/send` reaches the same market; a decider disputes a finished task with a follow-up
message; a viewer reads but cannot send; no key gets 401; a message the market cannot take is
refused with what to send instead, and nothing is published."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import A2AError

from agora.console.a2a_server import task_id_of
from agora.harness import LocalCluster
from tests.integration.helpers import CONSOLE_DECIDER, CONSOLE_KEYS, CONSOLE_VIEWER, eventually, replicas_of

pytestmark = pytest.mark.integration


def console_url(cluster: LocalCluster) -> str:
    return replicas_of(cluster, "console")[0].app_url


@asynccontextmanager
async def a2a_client(cluster: LocalCluster, person: str, streaming: bool = True) -> AsyncIterator[Client]:
    headers = {"authorization": f"Bearer {CONSOLE_KEYS[person]}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        client = await create_client(
            console_url(cluster), client_config=ClientConfig(streaming=streaming, httpx_client=http)
        )
        try:
            yield client
        finally:
            await client.close()


def task_message(text: str, skills: list[str] | None = None) -> Message:
    """A user's message asking for a task; any bid is good enough for it (as in the market's
    other tests), so the market awards it."""
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)])
    message.metadata.update({"min_success_threshold": 0.0})
    if skills is not None:
        message.metadata.update({"skills": skills})
    return message


def board_record(cluster: LocalCluster, task_id: str) -> dict[str, Any] | None:
    console = replicas_of(cluster, "console")[0]
    answer = httpx.get(console.invoke_url(f"v1/tasks/{task_id}", "taskboard"), timeout=10)
    return answer.json() if answer.status_code == 200 else None


async def test_the_card_lists_the_market_s_skills_and_asks_for_a_key(apps_cluster: LocalCluster) -> None:
    async with httpx.AsyncClient(timeout=30) as http:  # no key: the card is public
        card = await A2ACardResolver(http, console_url(apps_cluster)).get_agent_card()
        # The same card relative to the endpoint, where the A2A test kit also looks.
        beside = await http.get(f"{console_url(apps_cluster)}/a2a/.well-known/agent-card.json")
        assert beside.status_code == 200 and beside.json()["name"] == card.name, beside.text
    assert "web_search" in {skill.id for skill in card.skills}
    [interface] = card.supported_interfaces
    assert interface.url.endswith("/a2a") and interface.protocol_binding == "JSONRPC"
    assert card.capabilities.streaming and not card.capabilities.push_notifications
    assert card.security_schemes["consoleBearer"].http_auth_security_scheme.scheme == "bearer"


async def test_a_streamed_message_becomes_a_task_the_market_decides_and_reads_back(
    apps_cluster: LocalCluster,
) -> None:
    request = SendMessageRequest(
        message=task_message("Summarise this week's papers on agent coordination", ["web_search"])
    )
    seen: list[StreamResponse] = []
    async with a2a_client(apps_cluster, CONSOLE_DECIDER) as client:
        async for response in client.send_message(request):
            seen.append(response)
        first = seen[0]
        assert first.HasField("task") and first.task.status.state == TaskState.TASK_STATE_SUBMITTED, first
        task_id = first.task.id
        states = [r.status_update.status.state for r in seen if r.HasField("status_update")]
        assert TaskState.TASK_STATE_WORKING in states, states
        assert states[-1] == TaskState.TASK_STATE_COMPLETED, states
        # The outcome came as the task's artifact before the final status.
        [artifact] = [r.artifact_update.artifact for r in seen if r.HasField("artifact_update")]
        record = board_record(apps_cluster, task_id)
        assert record is not None and record["outcome"] is not None
        assert record["spec"]["min_success_threshold"] == 0.0, "the metadata's terms are the task's"
        assert artifact.parts[0].text == record["outcome"]["summary"]

        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == states[-1] and task.artifacts[0].artifact_id == f"{task_id}-outcome"
        assert task.history[0].parts[0].text.startswith("Summarise this week's papers")
        # Its context (the task's own) lists exactly it, in its state, and nothing after it.
        listed = await client.list_tasks(
            ListTasksRequest(context_id=task_id, status=task.status.state, page_size=100)
        )
        assert [t.id for t in listed.tasks] == [task_id] and not listed.next_page_token, listed

        # The same message again is the same task, not a second one.
        again = [r async for r in client.send_message(request)]
        assert again[0].task.id == task_id


def dispute_message(task_id: str, verdict: str, why: str) -> Message:
    """A new message referencing a finished task: the sender's word on its outcome."""
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=why)])
    message.reference_task_ids.append(task_id)
    message.metadata.update({"dispute": verdict})
    return message


async def disputed(client: Client, task_id: str, verdict: str, why: str) -> list[StreamResponse]:
    return [
        r
        async for r in client.send_message(SendMessageRequest(message=dispute_message(task_id, verdict, why)))
    ]


async def test_a_decider_disputes_a_finished_task_over_a2a_in_their_own_name_once(
    apps_cluster: LocalCluster,
) -> None:
    """A new message referencing a finished task, with `metadata.dispute`: the task turns FAILED
    on the board with the dispute in the key's person's name, and the answer says so; the same
    dispute again is answered as it stands, another is refused, a viewer cannot dispute, and a
    message to the finished task itself is refused as A2A refuses it, saying how to dispute."""
    request = SendMessageRequest(message=task_message("Summarise the week's papers", ["web_search"]))
    async with a2a_client(apps_cluster, CONSOLE_DECIDER, streaming=False) as client:
        [sent] = [r async for r in client.send_message(request)]
        task_id = sent.task.id
        eventually(
            lambda: (board_record(apps_cluster, task_id) or {}).get("status") == "COMPLETED", timeout=60
        )

        async with a2a_client(apps_cluster, CONSOLE_VIEWER, streaming=False) as viewer:
            with pytest.raises(A2AError, match="FORBIDDEN: victor is a viewer"):
                await disputed(viewer, task_id, "failed", "it misses two papers")
        follow_up = task_message("And the week before?")
        follow_up.task_id = task_id
        with pytest.raises(A2AError, match="a finished one's outcome is disputed with a new message"):
            [r async for r in client.send_message(SendMessageRequest(message=follow_up))]
        with pytest.raises(A2AError, match=r"metadata\.dispute must be one of passed, failed"):
            await disputed(client, task_id, "wrong", "it misses two papers")
        with pytest.raises(A2AError, match="no task a2a-missing on the market"):
            await disputed(client, "a2a-missing", "failed", "it misses two papers")

        [answer] = await disputed(client, task_id, "failed", "it misses two papers")
        assert answer.HasField("message") and list(answer.message.reference_task_ids) == [task_id], answer
        assert answer.message.parts[0].text.startswith(
            f"task {task_id} is FAILED as disputed by {CONSOLE_DECIDER}"
        )
        record = board_record(apps_cluster, task_id)
        assert record is not None and record["status"] == "FAILED"
        assert (record["dispute"]["by"], record["dispute"]["reason"]) == (
            CONSOLE_DECIDER,
            "it misses two papers",
        )
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_FAILED, task
        [repeated] = await disputed(client, task_id, "failed", "it misses two papers")
        assert repeated.message.parts[0].text == answer.message.parts[0].text
        with pytest.raises(A2AError, match="NOT_DISPUTABLE"):
            await disputed(client, task_id, "passed", "no, it was fine")


async def test_the_0_3_wire_reaches_the_same_market(apps_cluster: LocalCluster) -> None:
    message_id = uuid.uuid4().hex
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": message_id,
                "role": "user",
                "parts": [{"kind": "text", "text": "Summarise this week's papers on agent coordination"}],
                "metadata": {"skills": ["web_search"], "min_success_threshold": 0.0},
            },
            "configuration": {"blocking": False},
        },
    }
    headers = {"authorization": f"Bearer {CONSOLE_KEYS[CONSOLE_DECIDER]}"}
    answer = httpx.post(f"{console_url(apps_cluster)}/a2a", json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    # The 0.3 wire's answer: the task in 0.3's words, as the board has it (the market may have
    # decided it already).
    assert result["kind"] == "task" and result["id"] == task_id_of(Message(message_id=message_id)), result
    assert result["status"]["state"] in {"submitted", "working", "completed"}, result
    # The task the streamed test's market completes: taken and completed here too, as the 0.3
    # wire's tasks/get reads it back.
    record = eventually(lambda: board_record(apps_cluster, result["id"]), timeout=60)
    assert record["spec"]["required_skills"] == ["web_search"]

    def read_back() -> dict[str, Any] | None:
        got = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": result["id"]}}
        task = httpx.post(f"{console_url(apps_cluster)}/a2a", json=got, headers=headers, timeout=60).json()
        state = task["result"]["status"]["state"]
        assert state in {"submitted", "working", "completed"}, task
        return task["result"] if state == "completed" else None

    completed = eventually(read_back, timeout=120)
    assert completed["kind"] == "task" and completed["artifacts"], completed


async def test_a_viewer_reads_but_cannot_send_and_no_key_gets_401(apps_cluster: LocalCluster) -> None:
    async with a2a_client(apps_cluster, CONSOLE_VIEWER, streaming=False) as viewer:
        message = task_message("Summarise the papers", ["web_search"])
        with pytest.raises(A2AError, match="FORBIDDEN: victor is a viewer"):
            [r async for r in viewer.send_message(SendMessageRequest(message=message))]
        listed = await viewer.list_tasks(ListTasksRequest(page_size=5))
        assert listed.page_size == len(listed.tasks) <= 5, "the page size the page holds"
        for wrong, why in ((0, "pageSize is from 1 to"), (101, "pageSize is from 1 to")):
            with pytest.raises(A2AError, match=why):
                await viewer.list_tasks(ListTasksRequest(page_size=wrong))
        with pytest.raises(A2AError, match="historyLength is 0 or more"):
            await viewer.list_tasks(ListTasksRequest(history_length=-1))
        for task in (await viewer.list_tasks(ListTasksRequest(page_size=5, history_length=0))).tasks:
            assert not task.history, "historyLength 0: no history"
    assert board_record(apps_cluster, task_id_of(message)) is None

    # A status that is no task state is refused, not read as "every state" (the SDK's parse).
    headers = {"authorization": f"Bearer {CONSOLE_KEYS[CONSOLE_VIEWER]}", "a2a-version": "1.0"}
    for status, is_refused in (("INVALID_STATUS", True), ("TASK_STATE_COMPLETED", False)):
        call = {"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {"status": status}}
        answer = httpx.post(f"{console_url(apps_cluster)}/a2a", json=call, headers=headers, timeout=30).json()
        if is_refused:
            assert answer["error"]["code"] == -32602 and "is not a task state" in answer["error"]["message"]
        else:
            assert "result" in answer, answer

    refused = httpx.post(
        f"{console_url(apps_cluster)}/a2a",
        json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks"},
        timeout=30,
    )
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer"), (
        refused.text
    )


async def test_a_message_the_market_cannot_take_is_refused_with_what_to_send(
    apps_cluster: LocalCluster,
) -> None:
    async with a2a_client(apps_cluster, CONSOLE_DECIDER, streaming=False) as client:
        # Work the market will not take is a task REJECTED with the reason (nothing published).
        vague = task_message("Do something nice")
        [refused] = [r async for r in client.send_message(SendMessageRequest(message=vague))]
        assert refused.task.status.state == TaskState.TASK_STATE_REJECTED, refused
        assert (
            "name the skills the task needs in metadata.skills" in refused.task.status.message.parts[0].text
        )
        assert board_record(apps_cluster, refused.task.id) is None
        unknown = task_message("Summarise", ["web_search"])
        unknown.task_id = "a2a-missing"
        with pytest.raises(A2AError, match="no task a2a-missing on the market"):
            [r async for r in client.send_message(SendMessageRequest(message=unknown))]
        wrong = task_message("Summarise", ["web_search"])
        wrong.metadata.update({"skills": "web_search"})
        with pytest.raises(A2AError, match="must be a list of skill tags"):
            [r async for r in client.send_message(SendMessageRequest(message=wrong))]
        immediately = SendMessageRequest(
            message=task_message("Summarise the papers", ["web_search"]),
            configuration=SendMessageConfiguration(return_immediately=True),
        )
        [answer] = [r async for r in client.send_message(immediately)]
        # The task as the board has it at that moment (the market may have decided it already).
        assert answer.task.id == task_id_of(immediately.message), answer
        assert answer.task.status.state != TaskState.TASK_STATE_UNSPECIFIED, answer
        with pytest.raises(A2AError, match="no task a2a-missing on the market"):
            await client.get_task(GetTaskRequest(id="a2a-missing"))
