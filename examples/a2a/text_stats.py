"""An A2A agent that is not an Agora agent: built only from the A2A protocol's own SDK
(`a2a-sdk`), it could be any framework's. `make run` starts it and puts it on the market by its
card's URL, beside the example SDK agents; on your own:

    .venv/bin/python examples/a2a/text_stats.py --port 9100
    agora-agent run --a2a text-stats=http://127.0.0.1:9100     # beside the app's own daprd

Its card offers the skill `text-stats` (a task requiring it is this agent's) and declares
Agora's market extension (`urn:agora:a2a:market:v1`) with its price per step. Given a task, it
says it is counting (a status update the task's history shows), then answers with one artifact:
the text's words, sentences and most frequent word.
"""

from __future__ import annotations

import argparse
import re
import uuid
from collections import Counter

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.struct_pb2 import Struct
from starlette.applications import Starlette

MARKET_EXTENSION = "urn:agora:a2a:market:v1"
"""Agora's market terms in a card: what the agent asks per step, and at most how many steps."""
WORDS = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*")
SENTENCE_ENDS = re.compile(r"[.!?]+(?:\s|$)")


def text_stats(text: str) -> str:
    """Words, sentences and the most frequent word of `text`, in one line."""
    words = [w.lower() for w in WORDS.findall(text)]
    if not words:
        return "no words"
    sentences = max(1, len(SENTENCE_ENDS.findall(text.strip())))
    word, count = Counter(words).most_common(1)[0]
    counts = f"{counted(len(words), 'word')} in {counted(sentences, 'sentence')}"
    return f"{counts}; most frequent: {word!r} ({count}x)"


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


class TextStats(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id and context.message is not None
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
        await updater.start_work(said("counting"))
        await updater.add_artifact([Part(text=text_stats(context.get_user_input()))], name="stats")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def said(text: str) -> Message:
    return Message(message_id=uuid.uuid4().hex, role=Role.ROLE_AGENT, parts=[Part(text=text)])


def card(url: str) -> AgentCard:
    terms = Struct()
    terms.update({"price_per_step_usd": 0.001, "max_steps": 2})
    return AgentCard(
        name="Text statistics",
        description="Counts a text's words and sentences and finds its most frequent word.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(
            streaming=True, extensions=[AgentExtension(uri=MARKET_EXTENSION, params=terms)]
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="text-stats",
                name="Text statistics",
                description="Words, sentences and the most frequent word of a text.",
                tags=["text-stats"],
            )
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9100)
    args = parser.parse_args()
    agent_card = card(f"http://127.0.0.1:{args.port}/a2a")
    handler = DefaultRequestHandler(TextStats(), InMemoryTaskStore(), agent_card)
    routes = [*create_agent_card_routes(agent_card), *create_jsonrpc_routes(handler, "/a2a")]
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
