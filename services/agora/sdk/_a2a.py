"""Agents of any framework on the market, over A2A.

An `A2AAgent` is an agent app's agent whose work an A2A agent elsewhere does (CrewAI, Google
ADK, Microsoft Agent Framework, LangGraph, or the A2A SDK itself, in A2A 1.0 or 0.3):

- The app reads the agent's Agent Card through its own sidecar (Dapr's invocation of an external
  URL: the app's resiliency policies, tracing and access control apply to every call), and
  offers the card's skills (ids and tags) on the market under the card's name, at the price it
  was given, else the one the card's Agora extension states (`agora.core.a2a_terms`).
- The lease of its registration is renewed only when the card is read again: an agent whose
  card is gone leaves the market when its lease lapses, and comes back when the card does.
- The market estimates its bids, unless the card's extension says the agent bids itself: then
  each bid is asked of the agent over A2A.
- A task it wins is one A2A task, run by its workflow from the start: the task's description
  goes as a message (streamed when the card says the agent streams), what the agent says while
  it works goes into the task's history, a question of its goes to a person and the answer back
  to it, its artifacts become the outcome, an agent that fails, goes silent for `IDLE_SECONDS`
  or cannot be reached gives a FAILED outcome with the reason, and the task's deadline cancels
  the A2A task. A step run again after the app was lost follows the agent's task instead of
  sending the message again.

    from agora.sdk import A2AAgent

    agents = [A2AAgent("researcher", "http://127.0.0.1:9100")]

Bounds: a card of at most `MAX_CARD_BYTES`, at most `MAX_SKILL_TAGS` skills taken from it, a
reply of at most `MAX_REPLY_EVENTS` events, an outcome of at most `MAX_TEXT_CHARS` characters.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict, ParseError
from google.protobuf.struct_pb2 import Struct, Value
from pydantic import BaseModel, Field, ValidationError

from agora.core.a2a_terms import (
    BID_OFFER_KEY,
    BID_REQUEST_KEY,
    MARKET_EXTENSION_URI,
    MAX_CARD_BYTES,
    MarketTerms,
)
from agora.core.contracts import BidOffer, BidSolicitation
from agora.core.errors import BidNotMade
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import resume_message
from agora.core.escalation.record import ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.limits import (
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_NOTE_CHARS,
    MAX_SKILL_TAG_CHARS,
    MAX_SKILL_TAGS,
    MAX_TEXT_CHARS,
)
from agora.core.market import TaskSpec
from agora.core.messages import EscalationResolved, TaskAwarded
from agora.core.models import CapabilityProfile, ModelTier
from agora.sdk._agent import Agent, AgentLoad, HandlerResult

__all__ = [
    "IDLE_SECONDS",
    "MAX_REPLY_EVENTS",
    "A2AAgent",
    "A2AReply",
    "A2ASent",
    "CardUnreadable",
    "SentMessages",
    "bid_offer_in",
    "card_location",
    "card_profile",
    "through_sidecar",
]

log = logging.getLogger(__name__)

IDLE_SECONDS = 300.0
"""The longest an A2A agent may stay silent while it holds a task (no event on its stream, or no
answer to a blocking send): then its task ends FAILED. `AGORA_A2A_IDLE_SECONDS` (or
`A2AAgent(idle_seconds=...)`) changes it."""
IDLE_SECONDS_ENV = "AGORA_A2A_IDLE_SECONDS"
CARD_READ_SECONDS = 10.0
MAX_REPLY_EVENTS = 1_000
"""Events one A2A task may send; an agent that streams more is out of protocol."""
BID_WAIT_MS = 5_000
"""What a bid request tells the agent of the time it has (the market's own wait bounds it)."""
CANCEL_SECONDS = 5.0
"""How long cancelling an A2A task at its deadline may take before the run gives up on it."""
POLL_SECONDS = 1.0
"""How often a task the agent already had is read, when the agent does not stream."""
MAX_HISTORY_LOOKED_AT = 100
"""Messages of a task's history searched for an answer sent before."""
DEFAULT_MAX_STEPS = 20
TERMINAL_STATES = frozenset(
    {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
     TaskState.TASK_STATE_REJECTED}
)  # fmt: skip
INTERRUPTED_STATES = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})


class CardUnreadable(Exception):
    """The agent's card could not be read or does not describe an agent the market can use."""


class OutOfProtocol(Exception):
    """The agent answered something A2A does not allow (or beyond Agora's bounds)."""


def card_location(card_url: str) -> str:
    """The card's own URL: `card_url` as given when it names a `.json` file, else the agent's
    base URL with A2A's well-known card path."""
    parts = urlsplit(card_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"an A2A agent's card URL is an http(s) URL with a host, not {card_url!r}")
    if parts.path.endswith(".json"):
        return urlunsplit(parts)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + AGENT_CARD_WELL_KNOWN_PATH))


def through_sidecar(url: str, dapr_http_endpoint: str) -> str:
    """`url` as the app's sidecar invokes it (Dapr's invocation of a URL outside the cluster:
    `<sidecar>/v1.0/invoke/<scheme>://<host:port>/method/<path>`)."""
    parts = urlsplit(url)
    target = f"{parts.scheme}://{parts.netloc}"
    path = parts.path or "/"
    query = f"?{parts.query}" if parts.query else ""
    return f"{dapr_http_endpoint.rstrip('/')}/v1.0/invoke/{target}/method{path}{query}"


def _sidecar_headers() -> dict[str, str]:
    token = os.environ.get("DAPR_API_TOKEN")
    return {"dapr-api-token": token} if token else {}


async def read_card(card_url: str, dapr_http_endpoint: str) -> AgentCard:
    """The agent's card, read through the sidecar; `CardUnreadable` says why it could not be."""
    url = through_sidecar(card_location(card_url), dapr_http_endpoint)
    try:
        async with (
            httpx.AsyncClient(timeout=CARD_READ_SECONDS, headers=_sidecar_headers()) as http,
            http.stream("GET", url) as response,
        ):
            if response.status_code != 200:
                raise CardUnreadable(f"its card answered HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_CARD_BYTES:
                    raise CardUnreadable(f"its card is larger than {MAX_CARD_BYTES} bytes")
    except httpx.HTTPError as exc:
        raise CardUnreadable(
            f"its card could not be read: {type(exc).__name__}: {exc}"[:MAX_NOTE_CHARS]
        ) from exc
    try:
        data = json.loads(body)
        card = parse_agent_card(data)
    except (ValueError, ParseError, TypeError) as exc:
        raise CardUnreadable(f"its card is not an A2A Agent Card: {exc}"[:MAX_NOTE_CHARS]) from exc
    if not card.supported_interfaces:
        raise CardUnreadable("its card names no interface to reach it at")
    return card


def market_terms(card: AgentCard) -> MarketTerms | None:
    """The terms the card's Agora extension states; None: the card does not declare it."""
    for extension in card.capabilities.extensions:
        if extension.uri == MARKET_EXTENSION_URI:
            try:
                return MarketTerms.model_validate(MessageToDict(extension.params))
            except ValidationError as exc:
                raise CardUnreadable(
                    f"its card's market terms do not parse: {exc.error_count()} error(s): "
                    f"{exc.errors()[0]['msg']}"
                ) from exc
    return None


def card_profile(
    card: AgentCard,
    agent_id: str,
    *,
    price_per_step: float | None,
    max_steps: int | None,
    tier: ModelTier,
) -> CapabilityProfile:
    """The capability profile the card describes: its skills' ids and tags (blank, overlong and
    repeated ones left out, at most `MAX_SKILL_TAGS`), its name, and its price and step limit
    (the registration's when given, else the card's Agora extension's, else the defaults)."""
    offered: dict[str, None] = {}
    for skill in card.skills:
        for tag in (skill.id, *skill.tags):
            cleaned = tag.strip()
            if cleaned and len(cleaned) <= MAX_SKILL_TAG_CHARS:
                offered[cleaned] = None
    if not offered:
        raise CardUnreadable("its card offers no skill")
    terms = market_terms(card) or MarketTerms()
    return CapabilityProfile(
        agent_id=agent_id,
        agent_name=(card.name.strip() or agent_id)[:MAX_NAME_CHARS],
        skill_tags=list(offered)[:MAX_SKILL_TAGS],
        model_tier=tier,
        cost_per_step_usd=price_per_step if price_per_step is not None else terms.price_per_step_usd,
        max_steps=max_steps or terms.max_steps or DEFAULT_MAX_STEPS,
    )


def part_text(part: Part) -> str:
    """What a part says, as text: its text, its data as JSON, or a note naming a file."""
    kind = part.WhichOneof("content")
    if kind == "text":
        return part.text
    if kind == "data":
        return json.dumps(MessageToDict(part.data), sort_keys=True)
    if kind in ("raw", "url"):
        return f"[file {part.filename or part.url or 'without a name'} ({part.media_type or 'no type'})]"
    return ""


@dataclass
class A2AReply:
    """What an A2A agent has answered so far about one task: the A2A task it made, its state and
    latest status message, and its artifacts' text (at most `MAX_TEXT_CHARS` kept)."""

    agent_id: str
    task_id: str = ""
    state: int = TaskState.TASK_STATE_UNSPECIFIED
    status_text: str = ""
    answer: str | None = None
    """A reply that is a message, not a task: the agent's whole answer."""
    events: int = 0
    said: list[str] = field(default_factory=list)
    """Each status message, with its state, in order: the agent's progress as it told it."""
    _artifacts: dict[str, list[str]] = field(default_factory=dict)
    _chars: int = 0
    cut: bool = False

    @property
    def ended(self) -> bool:
        return self.answer is not None or self.state in TERMINAL_STATES or self.state in INTERRUPTED_STATES

    def take(self, event: StreamResponse) -> None:
        """One event of the agent's reply (`OutOfProtocol` for one A2A does not allow)."""
        self.events += 1
        if self.events > MAX_REPLY_EVENTS:
            raise OutOfProtocol(f"it sent more than {MAX_REPLY_EVENTS} events for one task")
        kind = event.WhichOneof("payload")
        if kind == "message":
            self.answer = self._text(event.message.parts)
            return
        if kind == "task":
            self._same_task(event.task.id)
            self._status(event.task.status.state, event.task.status.message)
            for artifact in event.task.artifacts:
                self._artifact(artifact.artifact_id, artifact.parts, append=False)
            return
        if kind == "status_update":
            self._same_task(event.status_update.task_id)
            self._status(event.status_update.status.state, event.status_update.status.message)
            return
        if kind == "artifact_update":
            update = event.artifact_update
            self._same_task(update.task_id)
            self._artifact(update.artifact.artifact_id, update.artifact.parts, append=update.append)
            return
        raise OutOfProtocol("it sent an event that is neither a task, a message nor an update")

    @property
    def artifact_text(self) -> str:
        """The text of the agent's artifacts so far, one after the other."""
        return "\n\n".join("".join(chunks) for chunks in self._artifacts.values() if chunks)

    def result(self, price_per_step: float) -> HandlerResult:
        """The outcome of a reply that ended (or of what it came to when it was cut off)."""
        text = self.artifact_text
        note = f" (cut at {MAX_TEXT_CHARS} characters)" if self.cut else ""
        if self.answer is not None:
            return HandlerResult(success=True, summary=self.answer[:MAX_TEXT_CHARS], cost_usd=price_per_step)
        if self.state == TaskState.TASK_STATE_COMPLETED:
            summary = (text or self.status_text or "completed, with no artifact")[
                : MAX_TEXT_CHARS - len(note)
            ]
            return HandlerResult(
                success=True, summary=summary + note, cost_usd=price_per_step, partial=self.cut
            )
        state = TaskState.Name(self.state).removeprefix("TASK_STATE_")
        said = f": {self.status_text}" if self.status_text else ""
        if self.state in INTERRUPTED_STATES:
            reason = (
                f"the A2A agent {self.agent_id} asked for input ({state}){said}, and nobody can be asked here"
            )
        else:
            reason = f"the A2A agent {self.agent_id} ended its task {state}{said}"
        return HandlerResult(success=False, summary=reason[:MAX_TEXT_CHARS], cost_usd=price_per_step)

    def _same_task(self, task_id: str) -> None:
        if not task_id:
            raise OutOfProtocol("it sent an update without its task's id")
        if self.task_id and task_id != self.task_id:
            raise OutOfProtocol(f"it sent updates of two tasks ({self.task_id}, {task_id}) for one message")
        self.task_id = task_id

    def _status(self, state: int, message: Message) -> None:
        # A task read again (an agent that does not stream) repeats its status: told once.
        said = self._text(message.parts)[:MAX_NOTE_CHARS]
        if said and (state, said) != (self.state, self.status_text):
            self.said.append(f"{_state_name(state)}: {said}"[:MAX_NOTE_CHARS])
        self.state = state
        self.status_text = said or self.status_text

    def _artifact(self, artifact_id: str, parts: Any, *, append: bool) -> None:
        chunks = self._artifacts.setdefault(artifact_id, [])
        if not append:
            self._chars -= sum(len(c) for c in chunks)
            chunks.clear()
        text = self._text(parts)
        room = MAX_TEXT_CHARS - self._chars
        if len(text) > room:
            text, self.cut = text[: max(0, room)], True
        chunks.append(text)
        self._chars += len(text)

    @staticmethod
    def _text(parts: Any) -> str:
        return "\n".join(t for t in (part_text(p) for p in parts) if t)


MAX_QUESTION_CHARS = 512
MAX_SAME_QUESTION = 3
"""Times in a row an A2A agent may ask the same question: once more, its task is cancelled and
the run fails saying so (an agent that does not take its answers would ask for ever)."""


class A2ASent(BaseModel):
    """A message the app began to send to an A2A agent (kept before it is sent), and the agent's
    task once the agent has named it: a run taken up again after its app was lost tells by it
    whether the agent may have the message already."""

    message_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    a2a_task_id: str = Field(default="", max_length=MAX_ID_CHARS)


class SentMessages(Protocol):
    """Where an A2A agent's app keeps what it sent (the state store, in an agent app)."""

    async def sent(self, message_id: str) -> A2ASent | None: ...

    async def keep(self, sent: A2ASent) -> None: ...


class QuestionLink(BaseModel):
    """What a run paused on an A2A agent's question needs to go on: the agent's task, how many
    questions it has asked, and the last one (kept in the run's workflow history)."""

    a2a_task_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    asked: int = Field(ge=1, le=MAX_REPLY_EVENTS)
    question: str = Field(max_length=MAX_QUESTION_CHARS)
    in_a_row: int = Field(default=1, ge=1, le=MAX_SAME_QUESTION)
    """How many times in a row the agent has asked this question."""


class A2AAgent(Agent):
    """An A2A agent on the market, reached at `card_url` (its base URL, or its card's URL)
    through the agent app's sidecar, as agent `name`.

        agents = [A2AAgent("researcher", "http://127.0.0.1:9100", price_per_step=0.002)]

    Its skills and display name come from its card when the app starts, and again each time the
    app renews its lease; `price_per_step` and `max_steps` override the card's terms."""

    def __init__(
        self,
        name: str,
        card_url: str,
        *,
        price_per_step: float | None = None,
        max_steps: int | None = None,
        tier: ModelTier = ModelTier.BALANCED,
        max_concurrent_runs: int = 4,
        idle_seconds: float | None = None,
    ) -> None:
        self.card_url = card_url
        self.idle_seconds = idle_seconds or float(os.environ.get(IDLE_SECONDS_ENV) or IDLE_SECONDS)
        if self.idle_seconds <= 0:
            raise ValueError(f"agent {name}: idle_seconds is positive, not {self.idle_seconds}")
        card_location(card_url)  # refuses a URL it could never read
        self._price_per_step = price_per_step
        self._max_steps = max_steps
        self._tier = tier
        self.card: AgentCard | None = None
        # Until its card is read (before the app registers it), the agent offers one skill: its
        # own name. `offer` replaces the profile with the card's.
        provisional = CapabilityProfile(
            agent_id=name,
            agent_name=name,
            skill_tags=[name[:MAX_SKILL_TAG_CHARS]],
            model_tier=tier,
            cost_per_step_usd=price_per_step or 0.0,
            max_steps=max_steps or DEFAULT_MAX_STEPS,
        )
        self._init(
            provisional,
            instructions="",
            budget_usd=None,
            estimate=None,
            bids="market",
            max_concurrent_runs=max_concurrent_runs,
            handler=self._run,
            workflows=None,
        )
        self.runner = None
        # Its run is its workflow's from the start: a run stopped in the award's delivery and
        # started again by the workflow would send the agent the task twice.
        self.runs_inline = False
        self.decision_handler = self._answer
        self.sent: SentMessages | None = None
        """What the app sent the agent (its agent app attaches it): without it, a run taken up
        again asks the agent whether it has the message, and sends it when the agent cannot say."""
        self._dapr_http_endpoint = ""

    def __repr__(self) -> str:
        return f"A2AAgent({self.agent_id!r}, {self.card_url!r})"

    async def connect(self, dapr_http_endpoint: str) -> None:
        """Remembers the app's sidecar: the agent is reached through it (its card is read when
        the app offers it, or at its first run)."""
        self._dapr_http_endpoint = dapr_http_endpoint

    async def offer(self, dapr_http_endpoint: str) -> CapabilityProfile | None:
        """Read the card again: its profile to register, or None (the card cannot be read now,
        said in the log) so its lease lapses."""
        self._dapr_http_endpoint = dapr_http_endpoint
        try:
            card = await read_card(self.card_url, dapr_http_endpoint)
            self.profile = card_profile(
                card,
                self.agent_id,
                price_per_step=self._price_per_step,
                max_steps=self._max_steps,
                tier=self._tier,
            )
        except CardUnreadable as exc:
            log.warning(
                "an A2A agent's card cannot be read; its lease is not renewed",
                extra={"agent_id": self.agent_id, "card_url": self.card_url, "reason": str(exc)},
            )
            return None
        self.card = card
        bids_itself = bool((market_terms(card) or MarketTerms()).bids)
        self.bids = "self" if bids_itself else "market"
        self.estimate = self._ask_bid if bids_itself else None
        return self.profile

    async def _ask_bid(self, spec: TaskSpec, load: AgentLoad) -> BidOffer:
        """The agent's own bid, asked over A2A (`agora.core.a2a_terms`): `BidNotMade` with the
        reason for any answer but a message holding a bid offer."""
        solicitation = BidSolicitation(agent_id=self.agent_id, task=spec, respond_within_ms=BID_WAIT_MS)
        request = Struct()
        request.update({BID_REQUEST_KEY: solicitation.model_dump(mode="json")})
        message = Message(
            message_id=f"agora-bid-{spec.task_id}-{uuid.uuid4().hex[:12]}",
            context_id=f"agora-bid-{spec.task_id}",
            role=Role.ROLE_USER,
            parts=[Part(data=Value(struct_value=request))],
            extensions=[MARKET_EXTENSION_URI],
        )
        try:
            card = await self._known_card()
        except CardUnreadable as exc:
            raise BidNotMade(f"agent {self.agent_id}: {exc}") from exc
        http = self._http()
        try:
            client = self._client(card, http, streaming=False)
            async for event in client.send_message(SendMessageRequest(message=message)):
                return bid_offer_in(self.agent_id, event)
        except (A2AError, httpx.HTTPError) as exc:
            raise BidNotMade(
                f"agent {self.agent_id} could not be asked for a bid: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            await http.aclose()
        raise BidNotMade(f"agent {self.agent_id} answered its bid request with nothing")

    async def _run(self, award: TaskAwarded) -> HandlerResult:
        """The award's task, sent to the agent: what its reply comes to."""
        message = self._message(
            award, f"agora-{award.task_id}-{award.attempt}", award.spec.description, task_id=""
        )
        message.metadata.update(
            {
                "agora": {
                    "task_id": award.task_id,
                    "required_skills": list(award.spec.required_skills),
                    "budget_usd": award.spec.budget_usd,
                }
            }
        )
        return await self._settle(award, await self._exchange(award, message), asked=None)

    async def _answer(
        self, award: TaskAwarded, decided: EscalationResolved, handle: str | None
    ) -> HandlerResult:
        """A person's decision on the agent's question: the answer goes to the agent as the next
        message of its task (the decision's new prompt, else its guidance, else the decision
        itself); abort, skip and reassign cancel its task instead."""
        try:
            link = QuestionLink.model_validate_json(handle or "")
        except ValidationError:
            return self._failed("the decision came with no question of it to answer")
        decision = decided.decision
        who = decided.decided_by or "a person"
        action = str(decision.action)
        if action in ("abort", "skip", "reassign"):
            await self._cancel_quietly(link.a2a_task_id)
            reason = f"{action} by {who} after it asked: {link.question}"
            failed = self._failed(reason)
            return failed.model_copy(update={"partial": action == "skip"})
        text = decision.modified_prompt or decision.guidance or resume_message(decision)
        message = self._message(
            award,
            f"agora-{award.task_id}-{award.attempt}-answer-{link.asked}",
            text,
            task_id=link.a2a_task_id,
        )
        return await self._settle(award, await self._exchange(award, message), asked=link)

    async def stopped(self, award: TaskAwarded, handle: str | None) -> None:
        """A run that waited for a person's answer was ended at its deadline: the agent's task,
        still waiting for that answer, is cancelled."""
        try:
            link = QuestionLink.model_validate_json(handle or "")
        except ValidationError:
            return
        await self._cancel_quietly(link.a2a_task_id)

    async def _settle(
        self, award: TaskAwarded, reply: A2AReply | HandlerResult, asked: QuestionLink | None
    ) -> HandlerResult:
        """What a reply comes to: its outcome, or, when the agent asks for input, the run parked
        for a person on an escalation of the task, the question and what the agent produced so
        far shown as the run's output (`asked`: the question answered before it, if any). The
        same question more than `MAX_SAME_QUESTION` times in a row ends the run FAILED."""
        if isinstance(reply, HandlerResult):
            return reply
        if reply.state not in INTERRUPTED_STATES or self.escalator is None:
            return reply.result(self.profile.cost_per_step_usd)
        question = (reply.status_text or "(the agent said nothing more)")[:MAX_QUESTION_CHARS]
        number = (asked.asked if asked is not None else 0) + 1
        in_a_row = asked.in_a_row + 1 if asked is not None and asked.question == question else 1
        if in_a_row > MAX_SAME_QUESTION:
            await self._cancel_quietly(reply.task_id)
            return self._failed(
                f"the A2A agent {self.agent_id} asked the same question {in_a_row} times in a row, "
                f"whatever it was answered: {question}"
            )
        so_far = reply.artifact_text
        shown = f"The A2A agent {self.agent_id} asks: {question}"
        if so_far:
            shown += f"\n\nWhat it has produced so far:\n{so_far}"
        escalation_id = f"{award.task_id}.a2a-question-{number}"
        context = EscalationContext(
            job_id=award.task_id,
            step=number,
            validation_results=[],
            confidence=0.0,
            retry_count=number - 1,
            error_history=[],
            prompt_used=award.spec.description,
            output_summary=shown[:MAX_TEXT_CHARS],
        )
        await self.escalator.park(
            escalation_id,
            ParkRequest(
                waiting_party=WaitingParty(kind=WaitingPartyKind.TASK, id=award.task_id),
                context=context,
                who=f"agent:{self.agent_id}",
                why=f"the A2A agent asked for input ({_state_name(reply.state)})",
            ),
        )
        asked_now = QuestionLink(
            a2a_task_id=reply.task_id, asked=number, question=question, in_a_row=in_a_row
        )
        return HandlerResult(success=False, waiting_on=escalation_id, handle=asked_now.model_dump_json())

    async def _exchange(self, award: TaskAwarded, message: Message) -> A2AReply | HandlerResult:
        """`message` sent to the agent and its reply followed until its task ends or asks for
        input; a failed `HandlerResult` when the agent cannot be reached, fails or answers out
        of protocol. Stopped (the run's deadline, the app stopping), it cancels the agent's task.

        A message the agent may have already (the step run again after the app was lost mid-run)
        is not sent again: its task is followed from where it is (`_sent_before`). A message is
        kept as sent before it is sent, and its task as soon as the agent names it: an agent
        that does not stream is asked to answer at once with its task (`return_immediately`),
        which is then read until it settles."""
        try:
            card = await self._known_card()
        except CardUnreadable as exc:
            return self._failed(str(exc))
        streaming = card.capabilities.streaming
        reply = A2AReply(self.agent_id, task_id=message.task_id)
        http = self._http()
        request = SendMessageRequest(
            message=message,
            configuration=SendMessageConfiguration(
                accepted_output_modes=["text/plain", "application/json"], return_immediately=not streaming
            ),
        )
        try:
            client = self._client(card, http, streaming=streaming)
            before = await self._sent_before(client, message)
            if isinstance(before, str):
                return self._failed(before)
            if before is None:
                await self._keep(A2ASent(message_id=message.message_id, a2a_task_id=message.task_id))
                events = _sent(client, request, streaming=streaming, idle_seconds=self.idle_seconds)
            else:
                events = _followed(client, before, streaming=streaming, idle_seconds=self.idle_seconds)
            task_kept = bool(message.task_id) or before is not None
            async for event in events:
                reply.take(event)
                if reply.task_id and not task_kept:
                    await self._keep(A2ASent(message_id=message.message_id, a2a_task_id=reply.task_id))
                    task_kept = True
                await self._note_progress(award, reply)
                if reply.ended:
                    break
        except asyncio.CancelledError:
            if reply.task_id and not reply.ended:
                await asyncio.shield(self._cancel_quietly(reply.task_id))
            raise
        except OutOfProtocol as exc:
            return await self._given_up(reply, f"it answered out of protocol: {exc}")
        except (A2AError, httpx.HTTPError, ValueError) as exc:
            return await self._given_up(
                reply, f"it could not be reached or failed: {type(exc).__name__}: {exc}"
            )
        finally:
            await http.aclose()
        if not reply.ended:
            return await self._given_up(
                reply, f"its reply ended while its task was {_state_name(reply.state)}"
            )
        return reply

    async def _sent_before(self, client: Client, message: Message) -> Task | str | None:
        """The agent's task that has `message` already; None when the message is to be sent;
        the reason the run cannot go on when the agent may have it but cannot say.

        - Never begun to be sent (nothing kept): sent.
        - Kept with its task: that task, unless the message is an answer its task still waits
          for (it never reached the agent): then sent.
        - Kept without a task (the app was lost between sending a task's first message and the
          agent naming its task): the task the agent made in the message's context, asked by
          A2A 1.0's `ListTasks`; an agent that cannot say (the 0.3 wire has no `ListTasks`) is
          not sent the message twice, and the run ends FAILED with that reason."""
        if self.sent is None:
            return await _task_that_has(client, message)
        kept = await self.sent.sent(message.message_id)
        if kept is None:
            return None
        if kept.a2a_task_id:
            asked = GetTaskRequest(id=kept.a2a_task_id, history_length=MAX_HISTORY_LOOKED_AT)
            task = await client.get_task(asked)
            waits = task.status.state in INTERRUPTED_STATES and not _holds(task, message)
            return None if message.task_id and waits else task
        found = await _task_that_has(client, message)
        if found is not None:
            return found
        return (
            "its app was lost while it sent the agent the task, and the agent cannot say whether "
            "it has it (it lists no tasks): the task is not sent twice"
        )

    async def _keep(self, sent: A2ASent) -> None:
        if self.sent is not None:
            await self.sent.keep(sent)

    async def _given_up(self, reply: A2AReply, reason: str) -> HandlerResult:
        """The run gives up on the agent: its task, if it made one, is cancelled (it may still be
        working on it), and the outcome says why."""
        if reply.task_id and not reply.ended:
            await self._cancel_quietly(reply.task_id)
        return self._failed(reason)

    async def _note_progress(self, award: TaskAwarded, reply: A2AReply) -> None:
        """What the agent said since the last look, into the task's history (while it works:
        the statuses that end its task are the outcome's to say)."""
        told, reply.said = reply.said, []
        if self.progress is None or reply.ended:
            return
        for text in told:
            await self.progress.note(award, text)

    async def _cancel_quietly(self, a2a_task_id: str) -> None:
        """Cancel the agent's task, within `CANCEL_SECONDS`; an agent that cannot be told is
        left alone (its task is over for the market either way)."""
        if not a2a_task_id:
            return
        http = self._http()
        try:
            card = await self._known_card()
            client = self._client(card, http, streaming=False)
            async with asyncio.timeout(CANCEL_SECONDS):
                await client.cancel_task(CancelTaskRequest(id=a2a_task_id))
        except Exception as exc:  # gone, refusing, slow: logged, nothing more to do
            log.warning(
                "an A2A agent's task could not be cancelled",
                extra={"agent_id": self.agent_id, "a2a_task_id": a2a_task_id, "reason": repr(exc)[:300]},
            )
        finally:
            await http.aclose()

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=httpx.Timeout(self.idle_seconds, connect=CARD_READ_SECONDS), headers=_sidecar_headers()
        )

    @staticmethod
    def _message(award: TaskAwarded, message_id: str, text: str, task_id: str) -> Message:
        # The award's own ids: the context is the award's, so the agent's task in it is this run's.
        # A follow-up names its task twice: as the task it continues, and among the tasks it
        # refers to (`referenceTaskIds`), which is how some agents (the A2A samples') tell a
        # continuation from a new task.
        return Message(
            message_id=message_id,
            context_id=f"agora-{award.task_id}-{award.attempt}",
            task_id=task_id,
            reference_task_ids=[task_id] if task_id else [],
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            metadata=Struct(),
        )

    async def _known_card(self) -> AgentCard:
        """The card as last read, or read now (a run before the app offered the agent)."""
        return self.card if self.card is not None else await read_card(self.card_url, self._endpoint())

    def _client(self, card: AgentCard, http: httpx.AsyncClient, *, streaming: bool) -> Client:
        """An A2A client of the agent's card, every call going through the app's sidecar."""
        return ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(
            self._reached_through_sidecar(card)
        )

    def _reached_through_sidecar(self, card: AgentCard) -> AgentCard:
        routed = AgentCard()
        routed.CopyFrom(card)
        for interface in routed.supported_interfaces:
            interface.url = through_sidecar(interface.url, self._endpoint())
        return routed

    def _endpoint(self) -> str:
        if not self._dapr_http_endpoint:
            raise CardUnreadable("its app has not connected it to a sidecar yet")
        return self._dapr_http_endpoint

    def _failed(self, reason: str) -> HandlerResult:
        """A run that came to no answer from the agent: nothing charged."""
        said = f"the A2A agent {self.agent_id} at {self.card_url}: {reason}"
        return HandlerResult(success=False, summary=said[:MAX_TEXT_CHARS], cost_usd=0.0)


async def _sent(
    client: Client, request: SendMessageRequest, *, streaming: bool, idle_seconds: float
) -> AsyncIterator[StreamResponse]:
    """The events of a message sent: its stream; or the answer of an agent that does not stream
    (its task, at once when it honours `return_immediately`), then that task read until it
    settles."""
    last: StreamResponse | None = None
    async for event in client.send_message(request):
        last = event
        yield event
    if streaming or last is None or last.WhichOneof("payload") != "task" or _settled(last.task):
        return
    async for event in _polled(client, last.task, idle_seconds=idle_seconds):
        yield event


def _holds(task: Task, message: Message) -> bool:
    return any(m.message_id == message.message_id for m in task.history)


async def _task_that_has(client: Client, message: Message) -> Task | None:
    """The agent's task that already holds `message`: for a task's first message, the task the
    agent made in the message's context (A2A 1.0's `ListTasks`); for an answer, its task when
    the task's history has the answer. None when there is none, or the agent cannot say (the
    0.3 wire has no `ListTasks`): the message is then sent."""
    try:
        if not message.task_id:
            asked = ListTasksRequest(context_id=message.context_id, page_size=1, include_artifacts=True)
            listed = await client.list_tasks(asked)
            return listed.tasks[0] if listed.tasks else None
        task = await client.get_task(GetTaskRequest(id=message.task_id, history_length=MAX_HISTORY_LOOKED_AT))
    except (A2AError, httpx.HTTPError, NotImplementedError) as exc:
        log.info("an A2A agent could not say whether it has a message", extra={"reason": repr(exc)[:300]})
        return None
    return task if _holds(task, message) else None


async def _followed(
    client: Client, task: Task, *, streaming: bool, idle_seconds: float
) -> AsyncIterator[StreamResponse]:
    """The events of a task the agent already has: the task as it stands, then its updates (its
    stream resubscribed, or its state read every `POLL_SECONDS` until it has not changed for
    `idle_seconds`).

    A task can end between the look that found it and the resubscription, and an agent refuses
    to resubscribe to an ended task: a refused or broken resubscription falls back to reading
    the task."""
    yield StreamResponse(task=task)
    if _settled(task):
        return
    if streaming:
        try:
            async for event in client.subscribe(SubscribeToTaskRequest(id=task.id)):
                yield event
            return
        except (A2AError, httpx.HTTPError) as exc:
            log.info(
                "an A2A agent's task could not be resubscribed; it is read instead",
                extra={"a2a_task_id": task.id, "reason": repr(exc)[:300]},
            )
    async for event in _polled(client, task, idle_seconds=idle_seconds):
        yield event


async def _polled(client: Client, task: Task, *, idle_seconds: float) -> AsyncIterator[StreamResponse]:
    """`task` read every `POLL_SECONDS`, each change an event, until it ends, asks for input or
    has not changed for `idle_seconds`."""
    seen, quiet_since = task, time.monotonic()
    while True:
        now = await client.get_task(GetTaskRequest(id=task.id))
        if now != seen:
            seen, quiet_since = now, time.monotonic()
            yield StreamResponse(task=now)
        if _settled(now) or time.monotonic() - quiet_since >= idle_seconds:
            return
        await asyncio.sleep(POLL_SECONDS)


def _settled(task: Task) -> bool:
    """The task ended or waits for input: no more events come without a message."""
    return task.status.state in TERMINAL_STATES or task.status.state in INTERRUPTED_STATES


def bid_offer_in(agent_id: str, event: StreamResponse) -> BidOffer:
    """The bid offer an agent's answer to a bid request holds (`BidNotMade` says what is wrong)."""
    if event.WhichOneof("payload") != "message":
        raise BidNotMade(f"agent {agent_id} answered its bid request with a task, not a message")
    for part in event.message.parts:
        if part.WhichOneof("content") == "data" and part.data.WhichOneof("kind") == "struct_value":
            found = MessageToDict(part.data.struct_value).get(BID_OFFER_KEY)
            if found is not None:
                try:
                    return BidOffer.model_validate(found)
                except ValidationError as exc:
                    raise BidNotMade(
                        f"agent {agent_id}'s bid offer is out of contract: {exc.errors()[0]['msg']}"
                    ) from exc
    raise BidNotMade(f"agent {agent_id} answered its bid request without a {BID_OFFER_KEY!r} data part")


def _state_name(state: int) -> str:
    return TaskState.Name(state).removeprefix("TASK_STATE_") if state else "not begun"
