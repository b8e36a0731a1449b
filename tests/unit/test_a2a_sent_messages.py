"""An A2A agent is sent a task's message once, even by a run taken up again after its app was
lost: the app keeps each message as sent before it sends it, and the agent's task as soon as the
agent names it. Real `a2a-sdk` servers (A2A 1.0, and the 0.3 wire, which lists no tasks), reached
in process; the app's store is a memory repository."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette

from agora.core.market import Bid, BidScore, TaskSpec
from agora.core.messages import TaskAwarded
from agora.sdk import A2AAgent
from agora.sdk._a2a import A2ASent
from agora.sdk._agent import HandlerResult
from agora.sdk._app_a2a_sent import StoredSentMessages
from agora.sdk.testing import MemoryRepository

URL = "http://agent.test/a2a"
T = TypeVar("T")


class Works(AgentExecutor):
    """Starts work on each message, finishes when the test lets it, and keeps what reached it."""

    def __init__(self) -> None:
        self.received: list[str] = []
        self.release = asyncio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id and context.message
        self.received.append(context.message.message_id)
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        await self.release.wait()
        await updater.add_artifact([Part(text="done")], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class InProcess(A2AAgent):
    """An A2A agent reached in process instead of through a sidecar."""

    def __init__(self, wire: str, app: Starlette, sent: StoredSentMessages) -> None:
        super().__init__("writer", "http://agent.test", idle_seconds=5)
        interface = AgentInterface(url=URL, protocol_binding="JSONRPC", protocol_version=wire)
        self.card = AgentCard(
            name="writer", supported_interfaces=[interface], capabilities=AgentCapabilities(streaming=False)
        )
        self.sent = sent
        self._app = app

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self._app), timeout=5)

    def _reached_through_sidecar(self, card: AgentCard) -> AgentCard:
        return card


def award() -> TaskAwarded:
    bid = Bid(
        task_id="t1", agent_id="writer", self_reported_success_prob=0.9, estimated_cost_usd=0.1,
        estimated_steps=2,
    )  # fmt: skip
    score = BidScore(
        agent_id="writer", bid_id=bid.bid_id, raw_success_prob=0.9, calibrated_success_prob=0.9,
        reputation_score=0.5, cost_score=0.5, composite=0.5, ucb_bonus=0.0, final_score=0.5,
    )  # fmt: skip
    return TaskAwarded(
        task_id="t1",
        agent_id="writer",
        spec=TaskSpec(task_id="t1", description="a poem", required_skills=["s"]),
        bid=bid,
        score=score,
        award_token="t" * 32,
        attempt=1,
    )


FIRST_MESSAGE = "agora-t1-1"
"""The id of the award's first message to the agent (its task and attempt)."""


def run(wire: str, scenario: Callable[[Works, InProcess, MemoryRepository[A2ASent]], Awaitable[T]]) -> T:
    async def go() -> T:
        executor = Works()
        card = AgentCard(name="writer", supported_interfaces=[AgentInterface(url=URL, protocol_version=wire)])
        handler = DefaultRequestHandler(executor, InMemoryTaskStore(), card)
        app = Starlette(routes=create_jsonrpc_routes(handler, "/a2a", enable_v0_3_compat=wire == "0.3"))
        store = MemoryRepository(A2ASent)
        agent = InProcess(wire, app, StoredSentMessages(store.typed(), retention_seconds=3600))
        return await scenario(executor, agent, store)

    return asyncio.run(go())


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    for _ in range(200):
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("never came true")


async def started_elsewhere(agent: InProcess) -> str:
    """The award's first message sent as a lost run of it sent it: the agent's task id."""
    http = agent._http()
    assert agent.card is not None
    client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(agent.card)
    message = Message(
        message_id=FIRST_MESSAGE, context_id=FIRST_MESSAGE, role=Role.ROLE_USER, parts=[Part(text="a poem")]
    )
    at_once = SendMessageConfiguration(return_immediately=True)
    request = SendMessageRequest(message=message, configuration=at_once)
    [event] = [e async for e in client.send_message(request)]
    await http.aclose()
    return event.task.id


@pytest.mark.parametrize("wire", ["1.0", "0.3"])
def test_a_non_streaming_agent_s_task_is_kept_before_its_work_ends_and_read_until_it_completes(
    wire: str,
) -> None:
    async def scenario(executor: Works, agent: InProcess, store: MemoryRepository[A2ASent]) -> HandlerResult:
        running = asyncio.create_task(agent._run(award()))

        async def task_kept() -> bool:
            kept = await store.get(FIRST_MESSAGE)
            return kept is not None and bool(kept.value.a2a_task_id)

        await until(task_kept)
        assert not running.done(), "the task was kept while the agent still worked on it"
        executor.release.set()
        result = await running
        assert executor.received == [FIRST_MESSAGE]
        return result

    result = run(wire, scenario)
    assert result.success and result.summary == "done"


@pytest.mark.parametrize("wire", ["1.0", "0.3"])
def test_a_run_taken_up_again_follows_the_kept_task_and_sends_nothing_twice(wire: str) -> None:
    async def scenario(executor: Works, agent: InProcess, store: MemoryRepository[A2ASent]) -> HandlerResult:
        task_id = await started_elsewhere(agent)
        await store.save(FIRST_MESSAGE, A2ASent(message_id=FIRST_MESSAGE, a2a_task_id=task_id))
        running = asyncio.create_task(agent._run(award()))
        await asyncio.sleep(0.2)
        executor.release.set()
        result = await running
        assert executor.received == [FIRST_MESSAGE], "followed, not sent again"
        return result

    result = run(wire, scenario)
    assert result.success and result.summary == "done"


def test_a_run_lost_while_sending_finds_the_task_by_its_context_on_a_1_0_agent() -> None:
    async def scenario(executor: Works, agent: InProcess, store: MemoryRepository[A2ASent]) -> HandlerResult:
        await started_elsewhere(agent)
        await store.save(FIRST_MESSAGE, A2ASent(message_id=FIRST_MESSAGE))  # its task never kept
        running = asyncio.create_task(agent._run(award()))
        await asyncio.sleep(0.2)
        executor.release.set()
        result = await running
        assert executor.received == [FIRST_MESSAGE]
        return result

    result = run("1.0", scenario)
    assert result.success and result.summary == "done"


def test_a_run_lost_while_sending_to_a_0_3_agent_fails_with_why_and_does_not_send_again() -> None:
    async def scenario(executor: Works, agent: InProcess, store: MemoryRepository[A2ASent]) -> HandlerResult:
        await started_elsewhere(agent)
        await store.save(FIRST_MESSAGE, A2ASent(message_id=FIRST_MESSAGE))
        result = await agent._run(award())
        assert executor.received == [FIRST_MESSAGE], "not sent twice"
        executor.release.set()
        return result

    result = run("0.3", scenario)
    assert not result.success
    assert "its app was lost while it sent the agent the task" in result.summary
    assert "not sent twice" in result.summary


def test_a_message_never_begun_is_sent_and_kept_first() -> None:
    async def scenario(executor: Works, agent: InProcess, store: MemoryRepository[A2ASent]) -> HandlerResult:
        executor.release.set()
        result = await agent._run(award())
        kept = await store.get(FIRST_MESSAGE)
        assert kept is not None and kept.value.a2a_task_id, "kept with the task the agent named"
        return result

    result = run("0.3", scenario)
    assert result.success and result.summary == "done"
