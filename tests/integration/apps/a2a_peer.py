"""An A2A agent of another framework, built only from the `a2a-sdk` (its server, its task
updater, its in-memory task store): what an agent app's `A2AAgent` reaches through its sidecar.

    python tests/integration/apps/a2a_peer.py --port P --name NAME --log FILE [--wire 0.3] [--no-streaming]
        [--bids own|text]

Its card offers the skill `haiku-by-NAME` (tags `poetry`, `verse`), so a task can name the agent it
is for by the skill it needs, and declares Agora's market extension
with a price. What it does with a task depends on the task's text:

- anything else: says it is drafting (a status update), adds an artifact
  `a haiku by NAME about <text>`, completes;
- `vanish`: starts work, then the process dies (exit 3) without answering;
- `stall`: starts work and waits until it is cancelled (its cancel is logged);
- `slow`: works for `SLOW_SECONDS`, then completes as for anything else;
- `silence`: starts work and never says anything more;
- `chatter`: sends `CHATTER_UPDATES` status updates, then completes;
- `sprawl`: completes with an artifact of `SPRAWL_WORDS` words (60,000 characters);
- `ask`: asks for input (INPUT_REQUIRED: `which season?`); the answer, the next message of the
  same task, is the theme of the haiku it then completes with.
- `quiz`: as the A2A samples' number game: adds an artifact (`a draft by NAME`), then asks
  `QUIZ_QUESTION`; it takes a follow-up as the answer only when the follow-up lists its task in
  `referenceTaskIds` (logged `unreferenced <task id>` otherwise), and asks again until the
  answer is `QUIZ_ANSWER`, then completes.

With `--card broken|huge|skilless` it serves a card that is no use (`CARELESS_CARDS`).
With `--bids own` its card says it bids itself, and it answers the market's bid requests with
its offer (`BID_OFFER`); with `--bids text` it says so too but answers them with plain text.

Every message it receives is logged as `message <message id> <context id>`, every cancel as
`cancel <task id>`, one line each, so a test counts what reached it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

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
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct, Value
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agora.core.a2a_terms import BID_OFFER_KEY, BID_REQUEST_KEY, MARKET_EXTENSION_URI

PRICE_PER_STEP_USD = 0.002
SLOW_SECONDS = 8.0
CHATTER_UPDATES = 1_200
SPRAWL_WORDS = 10_000
QUIZ_QUESTION = "which number am I thinking of?"
QUIZ_ANSWER = "7"


BID_OFFER: dict[str, float | int | str] = {
    "self_reported_success_prob": 0.9,
    "estimated_cost_usd": 0.004,
    "estimated_steps": 2,
    "rationale": "a bid of its own, over A2A",
}


class Peer(AgentExecutor):
    def __init__(self, name: str, log: Path, bids: str) -> None:
        self.name = name
        self.log = log
        self.bids = bids

    def note(self, line: str) -> None:
        with self.log.open("a") as out:
            out.write(line + "\n")

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None and context.task_id and context.context_id
        self.note(f"message {message.message_id} {message.context_id}")
        if MARKET_EXTENSION_URI in message.extensions:
            await event_queue.enqueue_event(self.bid_answer(message))
            return
        text = context.get_user_input()
        if context.current_task is not None and "quiz" in _first_text(context.current_task):
            await self.quizzed(context, message, text, event_queue)
            return
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work(self.said("drafting"))
        if "vanish" in text:
            await asyncio.sleep(0.3)
            os._exit(3)
        if "silence" in text:  # says nothing more, ever
            await asyncio.Event().wait()
        if "chatter" in text:  # streams without end
            for n in range(CHATTER_UPDATES):
                await updater.update_status(TaskState.TASK_STATE_WORKING, self.said(f"still at it ({n})"))
            await updater.complete()
            return
        if "sprawl" in text:  # an artifact larger than any outcome
            await updater.add_artifact([Part(text="verse " * SPRAWL_WORDS)], name="epic")
            await updater.complete()
            return
        if "stall" in text:
            await asyncio.Event().wait()
        if "slow" in text:
            await asyncio.sleep(SLOW_SECONDS)
        if "ask" in text:
            await updater.requires_input(self.said("which season?"))
            return
        if "quiz" in text:
            await updater.add_artifact([Part(text=f"a draft by {self.name}")], name="draft")
            await updater.requires_input(self.said(QUIZ_QUESTION))
            return
        await updater.add_artifact([Part(text=f"a haiku by {self.name} about {text}")], name="haiku")
        await updater.complete()

    async def quizzed(self, context: RequestContext, message: Message, text: str, queue: EventQueue) -> None:
        """A follow-up of a quiz task: its answer when it refers to the task, else asked again."""
        assert context.task_id and context.context_id
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.task_id not in message.reference_task_ids:
            self.note(f"unreferenced {context.task_id}")
        elif text.strip() == QUIZ_ANSWER:
            found = Part(text=f"{self.name} was thinking of {QUIZ_ANSWER}")
            await updater.add_artifact([found], name="found")
            await updater.complete()
            return
        await updater.requires_input(self.said(QUIZ_QUESTION))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        self.note(f"cancel {context.task_id}")
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    def bid_answer(self, request: Message) -> Message:
        asked = MessageToDict(request.parts[0].data.struct_value)[BID_REQUEST_KEY]
        assert asked["agent_id"] and asked["task"]["task_id"]
        if self.bids != "own":
            return self.said("I would do it gladly")
        offer = Struct()
        offer.update({BID_OFFER_KEY: BID_OFFER})
        answer = self.said("")
        answer.parts[0].CopyFrom(Part(data=Value(struct_value=offer)))
        return answer

    def said(self, text: str) -> Message:
        return Message(message_id=os.urandom(8).hex(), role=Role.ROLE_AGENT, parts=[Part(text=text)])


def _first_text(task: Task) -> str:
    """The text of the message that began the task."""
    first = task.history[0] if task.history else None
    return " ".join(part.text for part in first.parts) if first is not None else ""


def card(name: str, url: str, wire: str, streaming: bool, bids: str) -> AgentCard:
    terms = Struct()
    terms.update({"price_per_step_usd": PRICE_PER_STEP_USD, "max_steps": 6, "bids": bids != "none"})
    return AgentCard(
        name=f"{name} (A2A)",
        description="Writes haiku.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=wire)],
        capabilities=AgentCapabilities(
            streaming=streaming, extensions=[AgentExtension(uri=MARKET_EXTENSION_URI, params=terms)]
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id=f"haiku-by-{name}", name="Haiku", description="A haiku.", tags=["poetry", "verse"])
        ],
    )


def _broken(_: AgentCard) -> Callable[[Request], Awaitable[Response]]:
    async def answer(request: Request) -> Response:
        return Response('{"name": "half a card", "skills": [', media_type="application/json")

    return answer


def _huge(real: AgentCard) -> Callable[[Request], Awaitable[Response]]:
    body = MessageToDict(real)
    body["description"] = "x" * (400 * 1024)

    async def answer(request: Request) -> Response:
        return JSONResponse(body)

    return answer


def _skilless(real: AgentCard) -> Callable[[Request], Awaitable[Response]]:
    body = MessageToDict(real)
    body["skills"] = [{"id": " ", "name": "nothing", "description": "-", "tags": [""]}]

    async def answer(request: Request) -> Response:
        return JSONResponse(body)

    return answer


CARELESS_CARDS: dict[str, Callable[[AgentCard], Callable[[Request], Awaitable[Response]]]] = {
    "broken": _broken,
    "huge": _huge,
    "skilless": _skilless,
}
"""Cards that do not describe an agent the market can use: one that does not parse, one of
400 KiB, one whose skills are all blank."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--wire", default="1.0", choices=["1.0", "0.3"])
    parser.add_argument("--no-streaming", action="store_true")
    parser.add_argument("--bids", default="none", choices=["none", "own", "text"])
    parser.add_argument("--card", default="good", choices=["good", *CARELESS_CARDS])
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/a2a"
    agent_card = card(args.name, url, args.wire, not args.no_streaming, args.bids)
    handler = DefaultRequestHandler(Peer(args.name, args.log, args.bids), InMemoryTaskStore(), agent_card)
    served_card = (
        create_agent_card_routes(agent_card)
        if args.card == "good"
        else [Route(AGENT_CARD_WELL_KNOWN_PATH, CARELESS_CARDS[args.card](agent_card))]
    )
    routes = [
        *served_card,
        *create_jsonrpc_routes(handler, "/a2a", enable_v0_3_compat=args.wire == "0.3"),
    ]
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
