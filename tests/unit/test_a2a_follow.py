"""Following an A2A task the agent already has (an agent app's run resumed after the app was
lost): a real `a2a-sdk` server, reached in process, whose task ended after the app last looked."""

from __future__ import annotations

import asyncio

import httpx
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
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette

from agora.sdk._a2a import _followed

URL = "http://agent.test/a2a"


class Finishes(AgentExecutor):
    """Completes every task at once with one artifact."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id and context.message
        await event_queue.enqueue_event(
            Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message],
            )
        )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.add_artifact([Part(text="done")], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def test_a_task_that_ended_before_its_stream_was_resubscribed_is_read_as_it_ended() -> None:
    async def scenario() -> list[StreamResponse]:
        interface = AgentInterface(url=URL, protocol_binding="JSONRPC", protocol_version="1.0")
        card = AgentCard(
            name="finisher",
            supported_interfaces=[interface],
            capabilities=AgentCapabilities(streaming=True),
        )
        handler = DefaultRequestHandler(Finishes(), InMemoryTaskStore(), card)
        app = Starlette(routes=create_jsonrpc_routes(handler, "/a2a"))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            message = Message(
                message_id="m-1", context_id="c-1", role=Role.ROLE_USER, parts=[Part(text="go")]
            )
            request = SendMessageRequest(
                message=message, configuration=SendMessageConfiguration(accepted_output_modes=["text/plain"])
            )
            [sent] = [event async for event in client.send_message(request)]
            assert sent.task.status.state == TaskState.TASK_STATE_COMPLETED
            # What the resumed run saw a moment before the task ended.
            seen = Task(
                id=sent.task.id, context_id="c-1", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)
            )
            streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
            return [event async for event in _followed(streaming, seen, streaming=True, idle_seconds=5)]

    events = asyncio.run(scenario())

    assert [event.task.status.state for event in events] == [
        TaskState.TASK_STATE_WORKING,
        TaskState.TASK_STATE_COMPLETED,
    ]
    assert [part.text for part in events[-1].task.artifacts[0].parts] == ["done"]
