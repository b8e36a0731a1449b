"""The market as an A2A agent: any A2A client (an agent of any framework) hands a task to the
market and follows it, over the protocol's JSON-RPC binding at `/a2a`, in A2A 1.0 and in the
0.3 wire that many frameworks still speak (the SDK's compatibility layer, chosen by method name).

- The Agent Card (`/.well-known/agent-card.json`, no key needed) lists the market's skills as
  they are now: one skill per skill tag an agent on the market offers.
- A message becomes a task on the market: its text parts the description, its skills those of
  `metadata.skills`, else the card's skills the text names. The task's id comes from the
  message's id, so a message sent again is the same task.
- The task board is the only record: a task's A2A state, status message and artifact are read
  off the board's record each time (`a2a_task`), and a stream sends what the board's record
  gained since the last look, the same events the board's own stream sends
  (`agora.core.task_events`).
- Requests carry the console's API keys (`Authorization: Bearer <key>`): a viewer's key reads
  tasks, a decider's also sends them.

Nothing is kept between requests: any console replica answers any request.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_agent_card_routes,
    create_jsonrpc_routes,
)
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    Artifact,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    HTTPAuthSecurityScheme,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from agora.console.api_keys import ApiKeys
from agora.console.auth import Person
from agora.console.auth import Role as PersonRole
from agora.core.acceptance import DisputeVerdict
from agora.core.errors import AgoraError, NotFound
from agora.core.escalation.listing import ListingFilter
from agora.core.escalation.record import EscalationStatus, WaitingPartyKind
from agora.core.limits import MAX_TEXT_CHARS
from agora.core.market import AllocationStatus, TaskSpec
from agora.core.messages import TaskCancel, TaskDispute
from agora.core.task_events import FINAL_TASK_STATUSES, TaskEvent, TaskEventKind, task_events
from agora.core.task_lifecycle import TaskNotCancellable, TaskRecord
from agora.runtime.clients import EscalationClient, RegistryClient, TaskBoardClient
from agora.runtime.event_streams import ServerSentEvent, sse_events
from agora.runtime.sidecar import DaprError, SidecarUnavailable

__all__ = [
    "A2A_PATH",
    "DISPUTE_METADATA_KEY",
    "SKILLS_METADATA_KEY",
    "KeyGate",
    "MarketAgent",
    "a2a_routes",
    "a2a_task",
    "market_card",
    "task_id_of",
    "task_spec_of",
]

A2A_PATH = "/a2a"
SKILLS_METADATA_KEY = "skills"
"""A message's `metadata.skills`: the skill tags its task needs (a list of strings)."""
DISPUTE_METADATA_KEY = "dispute"
"""A new message referencing a finished task (`referenceTaskIds`) with `metadata.dispute`:
`passed` or `failed`, what the sender says the outcome was; its text is why (`TaskDispute`)."""
TASK_TERMS = (
    "preferred_skills",
    "budget_usd",
    "min_success_threshold",
    "deadline_ms",
    "allow_partial",
    "acceptance",
)
"""What else a message's metadata may say of its task, by the task's own field names (other
metadata keys are left alone: they may be another extension's)."""
MAX_CARD_SKILLS = 500
"""Skills the card lists at most (the market's skill tags, alphabetically)."""
MAX_LISTED = 100
"""Tasks one ListTasks page holds at most (its default: 50)."""
BLOCKING_WAIT_SECONDS = 30.0
"""How long a SendMessage without `return_immediately` waits for the task to end or to wait for
a person; after that it answers with the task as it is (SUBMITTED or WORKING), which GetTask or
SubscribeToTask follow."""
POLL_SECONDS = 0.5
"""How often a waiting call reads the task's record (the board's own stream's pace), and how long
a stream waits before it resumes one that broke."""
ESCALATION_CHECK_SECONDS = 2.0
"""How often a stream of a task under way asks whether a person is deciding something of it."""
MAX_STREAM_SECONDS = 3600.0
"""The longest one stream stays open; the client subscribes again to follow a longer task."""
MAX_STREAMS = 1_000
"""Streams one console replica follows at once (each reads its task's record every
`POLL_SECONDS`); one more is refused UNAVAILABLE, and GetTask still answers."""
SECURITY_SCHEME = "consoleBearer"
JSONRPC_INVALID_PARAMS = -32602
"""JSON-RPC 2.0's code for invalid method parameters (A2A's InvalidParamsError)."""
NO_PUSH = "no push notifications: follow a task with SubscribeToTask (streaming)"
WAITING = EscalationStatus.WAITING_FOR_HUMAN

STATES = {
    AllocationStatus.PENDING: TaskState.TASK_STATE_SUBMITTED,
    AllocationStatus.BIDDING: TaskState.TASK_STATE_SUBMITTED,
    AllocationStatus.QUEUED: TaskState.TASK_STATE_SUBMITTED,
    AllocationStatus.ALLOCATED: TaskState.TASK_STATE_WORKING,
    AllocationStatus.COMPLETED: TaskState.TASK_STATE_COMPLETED,
    AllocationStatus.PARTIAL: TaskState.TASK_STATE_COMPLETED,
    AllocationStatus.FAILED: TaskState.TASK_STATE_FAILED,
    AllocationStatus.REJECTED: TaskState.TASK_STATE_REJECTED,
}
"""A board status as an A2A state. A task a person is deciding something of (an escalation of
its run waits) is INPUT_REQUIRED instead of WORKING."""
STATUSES_OF_STATE = {
    state: [status for status, mapped in STATES.items() if mapped == state] for state in set(STATES.values())
}

T = TypeVar("T")


# -- What the board's record says, in A2A's words ------------------------------------------------


def _timestamp(at: datetime | None) -> Timestamp | None:
    if at is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(at.astimezone(UTC))
    return stamp


def _status_text(record: TaskRecord, waiting_on: str | None) -> str:
    if record.cancellation is not None:
        return record.cancellation.summary
    if waiting_on is not None:
        return f"a person is deciding escalation {waiting_on} of this task's run"
    if record.status is AllocationStatus.REJECTED and record.allocation is not None:
        return f"rejected by the market: {record.allocation.reject_reason or 'no reason given'}"
    if record.outcome is not None:
        return record.outcome.summary
    if record.status is AllocationStatus.FAILED:
        return record.failure_reason or "failed"
    if record.current_award is not None:
        return f"awarded to {record.current_award.agent_id}"
    return "on the market: agents are bidding"


def _agent_message(task_id: str, text: str, message_id: str) -> Message:
    return Message(
        message_id=message_id,
        task_id=task_id,
        context_id=task_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )


def _state(record: TaskRecord, status: AllocationStatus) -> TaskState:
    """`status` of the task as an A2A state: a task a person cancelled ends CANCELED."""
    if record.cancellation is not None and status in FINAL_TASK_STATUSES:
        return TaskState.TASK_STATE_CANCELED
    return STATES[status]


def task_status(record: TaskRecord, waiting_on: str | None = None) -> TaskStatus:
    """The task's A2A status: its state, a line saying why, and when the board last moved it."""
    state = _state(record, record.status)
    if waiting_on is not None and state == TaskState.TASK_STATE_WORKING:
        state = TaskState.TASK_STATE_INPUT_REQUIRED
    status = TaskStatus(
        state=state,
        message=_agent_message(
            record.task_id, _status_text(record, waiting_on), f"{record.task_id}-status-{len(record.history)}"
        ),
    )
    at = _timestamp(record.history[-1].at if record.history else None)
    if at is not None:
        status.timestamp.CopyFrom(at)
    return status


def outcome_artifact(record: TaskRecord) -> Artifact | None:
    """The run's outcome as the task's artifact: its summary as text, the outcome as data."""
    if record.outcome is None:
        return None
    data = Value()
    ParseDict(record.outcome.model_dump(mode="json"), data)
    return Artifact(
        artifact_id=f"{record.task_id}-outcome",
        name="outcome",
        description=f"what {record.outcome.agent_id}'s run reported",
        parts=[Part(text=record.outcome.summary), Part(data=data, media_type="application/json")],
    )


def a2a_task(record: TaskRecord, waiting_on: str | None = None) -> Task:
    """The board's record of a task as an A2A task (its id is the board's task id; each task
    is its own context)."""
    task = Task(id=record.task_id, context_id=record.task_id, status=task_status(record, waiting_on))
    task.history.append(
        Message(
            message_id=f"{record.task_id}-request",
            task_id=record.task_id,
            context_id=record.task_id,
            role=Role.ROLE_USER,
            parts=[Part(text=record.spec.description)],
        )
    )
    artifact = outcome_artifact(record)
    if artifact is not None:
        task.artifacts.append(artifact)
    return task


def submitted_task(spec: TaskSpec) -> Task:
    """A task the board has not recorded yet (just published)."""
    return a2a_task(TaskRecord(spec=spec))


# -- A message as a task on the market -----------------------------------------------------------


def task_id_of(message: Message) -> str:
    """The market's id for the task a message asks for: the same message (by its id) is the
    same task, whoever's client sends it twice."""
    digest = hashlib.sha256(message.message_id.encode()).hexdigest()[:32]
    return f"a2a-{digest}"


def _metadata_skills(message: Message) -> list[str] | None:
    if SKILLS_METADATA_KEY not in message.metadata.fields:
        return None
    value = message.metadata.fields[SKILLS_METADATA_KEY]
    if not value.HasField("list_value") or not all(
        v.HasField("string_value") for v in value.list_value.values
    ):
        raise InvalidParamsError(
            message=f"metadata.{SKILLS_METADATA_KEY} must be a list of skill tags (strings)"
        )
    return [v.string_value for v in value.list_value.values]


def dispute_of(message: Message, by: str) -> TaskDispute:
    """The dispute a follow-up message makes: its `metadata.dispute` the verdict it says the
    outcome deserves, its text why; refused with what to send when it is neither."""
    value = message.metadata.fields[DISPUTE_METADATA_KEY]
    verdicts = [verdict.value for verdict in DisputeVerdict]
    if not value.HasField("string_value") or value.string_value not in verdicts:
        raise InvalidParamsError(
            message=f"metadata.{DISPUTE_METADATA_KEY} must be one of {', '.join(verdicts)}"
        )
    reason = "\n".join(part.text for part in message.parts if part.HasField("text")).strip()
    try:
        return TaskDispute(disputed_by=by, reason=reason, verdict=DisputeVerdict(value.string_value))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise InvalidParamsError(message=f"the dispute's text is why it is disputed: {problems}") from None


def dispute_answer(record: TaskRecord, message_id: str) -> Message:
    """The market's answer to a dispute: how the disputed task stands after it."""
    assert record.dispute is not None
    text = (
        f"task {record.task_id} is {record.status} as disputed by {record.dispute.by}: "
        f"{record.dispute.reason}"
    )
    answer = _agent_message(record.task_id, text, f"{message_id}-disputed")
    answer.ClearField("task_id")
    answer.reference_task_ids.append(record.task_id)
    return answer


class NoSkillNamed(Exception):
    """A message the market will not take because it names no skill: A2A's answer is a task
    REJECTED with the reason (the spec's `TASK_STATE_REJECTED`: "the agent has decided to not
    perform the task"), not a protocol error. Nothing is published."""

    def __init__(self, task_id: str, reason: str) -> None:
        super().__init__(reason)
        self.task_id = task_id
        self.reason = reason

    def task(self) -> Task:
        status = TaskStatus(
            state=TaskState.TASK_STATE_REJECTED,
            message=_agent_message(self.task_id, self.reason, f"{self.task_id}-rejected"),
        )
        return Task(id=self.task_id, context_id=self.task_id, status=status)


def task_spec_of(message: Message, market_skills: list[str], default_skills: Sequence[str] = ()) -> TaskSpec:
    """The task a message asks the market for: its text the description; its skills from
    `metadata.skills`, else the market's skills its text names (as whole words), else the
    console's `default_skills`; its budget, threshold, deadline and the like from the metadata's
    `TASK_TERMS`. A message that names no skill, with no default, is `NoSkillNamed` (a task
    REJECTED with the reason); one that is not text is refused with what to send instead."""
    if not message.message_id:
        raise InvalidParamsError(message="the message needs a messageId")
    texts = [part.text for part in message.parts if part.HasField("text")]
    if len(texts) != len(message.parts) or not "".join(texts).strip():
        raise InvalidParamsError(message="the market takes text parts only, and at least one with text")
    description = "\n".join(texts)
    if len(description) > MAX_TEXT_CHARS:
        raise InvalidParamsError(
            message=f"the text is {len(description)} characters; at most {MAX_TEXT_CHARS}"
        )
    skills = _metadata_skills(message)
    if skills is None:
        words = set(re.findall(r"[\w-]+", description.lower()))
        skills = [skill for skill in market_skills if skill.lower() in words] or list(default_skills)
        if not skills:
            raise NoSkillNamed(
                task_id_of(message),
                f"no skill named: name the skills the task needs in metadata.{SKILLS_METADATA_KEY}, or "
                "in the text (one of the Agent Card's skills)",
            )
    given = MessageToDict(message.metadata)
    terms = {name: given[name] for name in TASK_TERMS if name in given}
    try:
        return TaskSpec(task_id=task_id_of(message), description=description, required_skills=skills, **terms)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise InvalidParamsError(message=f"not a task the market takes: {problems}") from None


def market_card(public_url: str, version: str, skills: list[AgentSkill]) -> AgentCard:
    """The market's Agent Card: its JSON-RPC interface, streaming, the key it needs, its skills."""
    card = AgentCard(
        name="Agora market",
        description="A market of agents: a task goes to the agent whose bid scores best for its "
        "skills, and people decide what the agents escalate. Name the skills a task needs in the "
        f"message's metadata.{SKILLS_METADATA_KEY}, or in its text.",
        supported_interfaces=[
            AgentInterface(
                url=f"{public_url.rstrip('/')}{A2A_PATH}", protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        provider=AgentProvider(organization="Agora", url=public_url),
        version=version,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
    )
    card.security_schemes[SECURITY_SCHEME].CopyFrom(
        SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="bearer", description="A person's console key, from the console's operator"
            )
        )
    )
    requirement = SecurityRequirement()
    requirement.schemes[SECURITY_SCHEME].CopyFrom(StringList())
    card.security_requirements.append(requirement)
    return card


def market_skills(agents: list[Any]) -> list[AgentSkill]:
    """One skill per skill tag an agent on the market offers, naming who offers it."""
    offered: dict[str, list[str]] = {}
    for agent in agents:
        if agent.suspended_until is not None:
            continue
        for tag in agent.skill_tags:
            offered.setdefault(tag, []).append(agent.agent_id)
    return [
        AgentSkill(
            id=tag,
            name=tag,
            description=f"offered by {len(ids)} agent(s) on the market: {', '.join(sorted(ids)[:5])}",
            tags=[tag],
        )
        for tag, ids in sorted(offered.items())[:MAX_CARD_SKILLS]
    ]


# -- What the SDK reads leniently ----------------------------------------------------------------


def list_status_refusal(body: bytes) -> tuple[Any, str] | None:
    """A ListTasks call whose `status` names no task state: its request id and why. The SDK
    parses a request with unknown enum values taken as the first (`TASK_STATE_UNSPECIFIED`,
    "every state"), so such a filter would list every task instead of being refused."""
    if b'"ListTasks"' not in body:
        return None  # every other call is read once, by the SDK
    try:
        call = json.loads(body)
    except ValueError:
        return None  # not JSON: the SDK answers it as a parse error
    if not isinstance(call, dict) or call.get("method") != "ListTasks":
        return None
    params = call.get("params")
    status = params.get("status") if isinstance(params, dict) else None
    if status is None:
        return None
    names = list(TaskState.keys())
    known = status in names if isinstance(status, str) else status in TaskState.values()
    if known:
        return None
    return call.get("id"), f"status {str(status)[:40]!r} is not a task state (one of {', '.join(names)})"


class ListStatusCheck:
    """Refuses a ListTasks call filtered by a status that is no task state, with InvalidParams
    (-32602), before the SDK reads it as no filter (`list_status_refusal`). The body is
    bounded already (the app's `BodyLimit`)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        refusal = list_status_refusal(body)
        if refusal is not None:
            request_id, why = refusal
            error = {"code": JSONRPC_INVALID_PARAMS, "message": why}
            answer = JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error})
            await answer(scope, receive, send)
            return
        replayed = False

        async def replay() -> AsgiMessage:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app(scope, replay, send)


# -- Who asks ------------------------------------------------------------------------------------


class KeyGate:
    """The A2A endpoint's door: a request without a known console API key is refused (401, with
    `WWW-Authenticate: Bearer`); a known key's person goes with the request."""

    def __init__(self, app: ASGIApp, keys: ApiKeys) -> None:
        self._app = app
        self._keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        person = self._keys.person_of(token.strip()) if scheme.lower() == "bearer" else None
        if person is None:
            refused = JSONResponse(
                {
                    "error": "UNAUTHENTICATED",
                    "message": "send a console API key: Authorization: Bearer <key>",
                },
                status_code=401,
                headers={"www-authenticate": 'Bearer realm="agora"'},
            )
            await refused(scope, receive, send)
            return
        # A scope of its own: the scope's `state` is the app's lifespan state, shared by
        # every request.
        scope = {**scope, "state": {**scope.get("state", {}), "agora_person": person}}
        await self._app(scope, receive, send)


class _PersonContext(DefaultServerCallContextBuilder):
    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["person"] = request.state.agora_person
        return context


def _person(context: ServerCallContext, deciding: str | None = None) -> Person:
    """The person the request's key is; `deciding`: what they ask to do, which needs a decider."""
    person: Person | None = context.state.get("person")
    if person is None:  # the gate lets no request through without a key
        raise InvalidRequestError(message="UNAUTHENTICATED: no API key")
    if deciding is not None and person.role is not PersonRole.DECIDER:
        raise InvalidRequestError(
            message=f"FORBIDDEN: {person.name} is a viewer; {deciding} needs a decider's key"
        )
    return person


async def _answered(call: Awaitable[T]) -> T:
    """A service's answer, or its refusal in A2A's terms (never a traceback)."""
    try:
        return await call
    except NotFound as exc:
        raise TaskNotFoundError(message=exc.message) from None
    except TaskNotCancellable as exc:
        raise TaskNotCancelableError(message=f"{exc.code}: {exc.message}") from None
    except AgoraError as exc:
        raise InvalidParamsError(message=f"{exc.code}: {exc.message}") from None
    except DaprError as exc:
        raise InternalError(
            message=f"UNAVAILABLE: a service did not answer ({exc.error_code or exc.status_code})"
        ) from None
    except (SidecarUnavailable, TimeoutError):
        raise InternalError(message="UNAVAILABLE: the console's sidecar did not answer") from None


# -- The handler ---------------------------------------------------------------------------------


class MarketAgent(RequestHandler):
    """A2A's operations, each answered from the board (and, for INPUT_REQUIRED, the escalations
    waiting for a person)."""

    def __init__(
        self,
        board: TaskBoardClient,
        registry: RegistryClient,
        escalations: EscalationClient,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        max_streams: int = MAX_STREAMS,
        default_skills: Sequence[str] = (),
    ) -> None:
        self._board = board
        self._default_skills = tuple(default_skills)
        self._registry = registry
        self._escalations = escalations
        self._sleep = sleep
        self._clock = clock
        self._max_streams = max_streams
        self.streams = 0
        """Streams followed now."""

    @contextlib.contextmanager
    def _stream_slot(self) -> Iterator[None]:
        if self.streams >= self._max_streams:
            raise InternalError(
                message=f"UNAVAILABLE: this console follows {self._max_streams} streams already; try "
                "again, or follow the task with GetTask"
            )
        self.streams += 1
        try:
            yield
        finally:
            self.streams -= 1

    async def skills(self) -> list[AgentSkill]:
        return market_skills((await _answered(self._registry.agents())).agents)

    async def _record(self, task_id: str) -> TaskRecord | None:
        try:
            return await _answered(self._board.get(task_id))
        except TaskNotFoundError:
            return None

    async def _waiting_on(self, record: TaskRecord) -> str | None:
        """The escalation a person is deciding for the task's run, if one waits (among the 100
        newest waiting ones)."""
        if record.status is not AllocationStatus.ALLOCATED:
            return None
        for kind in (WaitingPartyKind.SESSION, WaitingPartyKind.TASK):
            page = await _answered(self._escalations.listed(WAITING, 100, 0, ListingFilter(kind=kind)))
            for escalation in page.escalations:
                if escalation.waiting_party.id == record.task_id:
                    return escalation.escalation_id
        return None

    async def _task(self, task_id: str) -> Task:
        found = await self._task_if_recorded(task_id)
        if found is None:
            raise TaskNotFoundError(message=f"no task {task_id} on the market")
        return found

    async def _dispute(self, message: Message, context: ServerCallContext) -> Message:
        """A new message that references one finished task (`referenceTaskIds`) with
        `metadata.dispute`: the task's outcome disputed in the key's person's name. The answer
        is a message saying how the task stands after (GetTask reads it); the task itself takes
        no message, as a task in a final state takes none."""
        person = _person(context, deciding="disputing a task's outcome")
        if message.task_id or len(message.reference_task_ids) != 1:
            raise InvalidParamsError(
                message=f"a dispute (metadata.{DISPUTE_METADATA_KEY}) is a new message whose "
                "referenceTaskIds name the one task disputed, and no taskId"
            )
        [task_id] = message.reference_task_ids
        record = await self._record(task_id)
        if record is None:
            raise TaskNotFoundError(message=f"no task {task_id} on the market")
        disputed = await _answered(self._board.dispute(task_id, dispute_of(message, person.name)))
        return dispute_answer(disputed, message.message_id)

    async def _publish(self, params: SendMessageRequest, context: ServerCallContext) -> TaskSpec:
        _person(context, deciding="sending a task")
        if params.message.task_id:
            if await self._record(params.message.task_id) is None:
                raise TaskNotFoundError(message=f"no task {params.message.task_id} on the market")
            raise UnsupportedOperationError(
                message="a task on the market takes no further messages: what it waits on is decided by a "
                "person in the console (or with the MCP server's decide_escalation); a finished one's "
                f"outcome is disputed with a new message (referenceTaskIds, metadata.{DISPUTE_METADATA_KEY})"
            )
        # The market's skills only when the message names none itself: the registry is not
        # asked (nor needed up) for a message that says what it needs.
        named = SKILLS_METADATA_KEY in params.message.metadata.fields
        market = [] if named else [skill.id for skill in await self.skills()]
        spec = task_spec_of(params.message, market, self._default_skills)
        await _answered(self._board.publish(spec))
        return spec

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        if DISPUTE_METADATA_KEY in params.message.metadata.fields:
            return await self._dispute(params.message, context)
        try:
            spec = await self._publish(params, context)
        except NoSkillNamed as refused:
            return refused.task()
        if params.configuration.return_immediately:
            return (await self._task_if_recorded(spec.task_id)) or submitted_task(spec)
        deadline = self._clock() + BLOCKING_WAIT_SECONDS
        while True:
            record = await self._record(spec.task_id)
            if record is not None:
                waiting_on = await self._waiting_on(record)
                if (
                    record.status in FINAL_TASK_STATUSES
                    or waiting_on is not None
                    or self._clock() >= deadline
                ):
                    return a2a_task(record, waiting_on)
            elif self._clock() >= deadline:
                return submitted_task(spec)
            await self._sleep(POLL_SECONDS)

    async def _task_if_recorded(self, task_id: str) -> Task | None:
        record = await self._record(task_id)
        return a2a_task(record, await self._waiting_on(record)) if record is not None else None

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        if DISPUTE_METADATA_KEY in params.message.metadata.fields:
            yield await self._dispute(params.message, context)
            return
        with self._stream_slot():  # before the task is published: a refusal publishes nothing
            try:
                spec = await self._publish(params, context)
            except NoSkillNamed as refused:
                yield refused.task()
                return
            yield submitted_task(spec)
            async for event in self._follow(spec.task_id, seen=0):
                yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        _person(context)
        with self._stream_slot():
            record = await self._record(params.id)
            if record is None:
                raise TaskNotFoundError(message=f"no task {params.id} on the market")
            if record.status in FINAL_TASK_STATUSES:
                raise UnsupportedOperationError(
                    message=f"task {params.id} has ended ({record.status}): GetTask shows it"
                )
            yield a2a_task(record, await self._waiting_on(record))
            async for event in self._follow(params.id, seen=len(task_events(record))):
                yield event

    async def _follow(self, task_id: str, seen: int) -> AsyncGenerator[Event]:
        """What happens to the task after its `seen` events, as A2A events, until it ends (or
        the stream has been open for `MAX_STREAM_SECONDS`): a status update for each status it
        enters, each award and each progress note, INPUT_REQUIRED while a person decides, the
        outcome as an artifact.

        The events come from the board's own stream of the task (`GET /v1/tasks/{id}/events`,
        which reads the task once a poll for all its watchers); a stream that breaks or drops
        this watcher, or that finds the task not on the board yet (one just published), is
        resumed after the last event passed on. Whether a person is deciding
        something of it is asked every `ESCALATION_CHECK_SECONDS`."""
        opened = self._clock()
        waiting_on: str | None = None
        asked_at = self._clock()
        record: TaskRecord | None = None
        events = sse_events(self._board.events(task_id, str(seen)))
        next_event: asyncio.Future[ServerSentEvent] | None = None
        try:
            while self._clock() - opened < MAX_STREAM_SECONDS:
                if next_event is None:
                    next_event = asyncio.ensure_future(anext(events))
                check_in = max(0.0, asked_at + ESCALATION_CHECK_SECONDS - self._clock())
                done, _ = await asyncio.wait({next_event}, timeout=check_in)
                if not done:
                    asked_at = self._clock()
                    record = await self._record(task_id) or record
                    now_waiting_on = await self._waiting_on(record) if record is not None else None
                    if record is not None and now_waiting_on != waiting_on:
                        waiting_on = now_waiting_on
                        yield TaskStatusUpdateEvent(
                            task_id=task_id, context_id=task_id, status=task_status(record, waiting_on)
                        )
                    continue
                arrived, next_event = next_event, None
                try:
                    sent = arrived.result()
                except (StopAsyncIteration, SidecarUnavailable, ValueError, NotFound):
                    # The stream broke, or the task just published is not on the board yet:
                    # resumed below.
                    sent = ServerSentEvent("dropped", "{}")
                if sent.event == "end":
                    return
                if sent.event == "dropped":
                    await events.aclose()
                    await self._sleep(POLL_SECONDS)
                    events = sse_events(self._board.events(task_id, str(seen)))
                    continue
                event = TaskEvent.model_validate_json(sent.data)
                if event.seq <= seen:
                    continue
                seen = event.seq
                if (
                    record is None
                    or event.kind is TaskEventKind.OUTCOME
                    or event.status in FINAL_TASK_STATUSES
                ):
                    record = await self._record(task_id) or record
                if record is not None:
                    for update in _updates(record, event):
                        yield update
        finally:
            if next_event is not None:
                next_event.cancel()
            await events.aclose()

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        _person(context)
        if params.HasField("history_length") and params.history_length < 0:
            raise InvalidParamsError(message="historyLength is 0 or more (0: no history)")
        return _history_cut(await self._task(params.id), params)

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The market's tasks in the asked state (every state by default), a page at a time
        (`page_token` is where the page starts)."""
        _person(context)
        if params.HasField("page_size") and not 1 <= params.page_size <= MAX_LISTED:
            raise InvalidParamsError(message=f"pageSize is from 1 to {MAX_LISTED} (50 when left out)")
        if params.HasField("history_length") and params.history_length < 0:
            raise InvalidParamsError(message="historyLength is 0 or more (0: no history)")
        if params.page_token and not params.page_token.isdigit():
            raise InvalidParamsError(message="pageToken is the one a ListTasks answer gave")
        size = params.page_size or 50
        start = int(params.page_token or 0)
        if params.status == TaskState.TASK_STATE_UNSPECIFIED:
            statuses = list(AllocationStatus)
        else:
            statuses = STATUSES_OF_STATE.get(params.status, [])
        ids: list[str] = []
        for status in statuses:
            ids += (await _answered(self._board.listed(status))).task_ids
        if params.context_id:
            ids = [task_id for task_id in ids if task_id == params.context_id]
        ids.sort()
        page = ids[start : start + size]
        tasks = [
            task for task in [await self._task_if_recorded(task_id) for task_id in page] if task is not None
        ]
        for task in tasks:
            _history_cut(task, params)
            if not params.include_artifacts:
                del task.artifacts[:]
        following = start + size
        return ListTasksResponse(
            tasks=tasks,
            next_page_token=str(following) if following < len(ids) else "",
            page_size=len(tasks),  # the tasks this page holds, as the A2A test kit reads it (docs/a2a.md)
            total_size=len(ids),
        )

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """The task cancelled on the market (`POST /v1/tasks/{id}/cancel` on the board): one not
        decided yet is rejected, one an agent runs is stopped; either is CANCELED here. An
        ended task cannot be cancelled."""
        person = _person(context, deciding="cancelling a task")
        cancel = TaskCancel(cancelled_by=person.name, reason="cancelled over A2A")
        try:
            record = await _answered(self._board.cancel(params.id, cancel))
        except TaskNotFoundError:
            raise TaskNotFoundError(message=f"no task {params.id} on the market") from None
        return a2a_task(record)

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError(message=NO_PUSH)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError(message=NO_PUSH)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError(message=NO_PUSH)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError(message=NO_PUSH)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError(message="the market's card is the public one")


def _history_cut(task: Task, params: GetTaskRequest | ListTasksRequest) -> Task:
    """The task with only the newest `historyLength` messages of its history, when asked (0:
    none); all of it otherwise."""
    if params.HasField("history_length"):
        history = list(task.history)
        kept = history[max(0, len(history) - params.history_length) :] if params.history_length else []
        del task.history[:]
        task.history.extend(kept)
    return task


def _updates(record: TaskRecord, event: TaskEvent) -> list[Event]:
    """The A2A events one of the board's task events makes: a status update for a status, an
    award or a progress note, the outcome's artifact then the final status for the outcome."""
    task_id = record.task_id
    if event.kind is TaskEventKind.OUTCOME:
        artifact = outcome_artifact(record)
        return (
            [TaskArtifactUpdateEvent(task_id=task_id, context_id=task_id, artifact=artifact, last_chunk=True)]
            if artifact
            else []
        )
    if event.kind is TaskEventKind.STATUS and event.status is not None:
        state = _state(record, event.status)
        text = event.detail or f"the task is {event.status}"
    elif event.kind is TaskEventKind.AWARDED:
        state, text = TaskState.TASK_STATE_WORKING, f"awarded to {event.agent_id}"
    elif event.kind is TaskEventKind.ACKNOWLEDGED:
        state, text = TaskState.TASK_STATE_WORKING, f"{event.agent_id} took the task up"
    elif event.kind is TaskEventKind.AWARD_EXPIRED:
        state, text = TaskState.TASK_STATE_WORKING, f"{event.agent_id}'s award ended: {event.detail}"
    elif event.kind is TaskEventKind.PROGRESS:
        state, text = TaskState.TASK_STATE_WORKING, f"{event.agent_id}: {event.detail}"
    else:
        return []
    status = TaskStatus(state=state, message=_agent_message(task_id, text, f"{task_id}-event-{event.seq}"))
    at = _timestamp(event.at)
    if at is not None:
        status.timestamp.CopyFrom(at)
    return [TaskStatusUpdateEvent(task_id=task_id, context_id=task_id, status=status)]


def a2a_routes(agent: MarketAgent, keys: ApiKeys, public_url: str, version: str) -> list[Route]:
    """The Agent Card's route (open) and the JSON-RPC endpoint's (behind the key gate), A2A 1.0
    and the 0.3 wire on the same endpoint."""
    card = market_card(public_url, version, [])
    last_skills: list[list[AgentSkill]] = [[]]

    async def live(served: AgentCard) -> AgentCard:
        # The registry not answering, the card keeps the skills it last gave.
        with contextlib.suppress(InternalError, InvalidParamsError):
            last_skills[0] = await agent.skills()
        fresh = AgentCard()
        fresh.CopyFrom(served)
        del fresh.skills[:]
        fresh.skills.extend(last_skills[0])
        return fresh

    [rpc] = create_jsonrpc_routes(agent, A2A_PATH, context_builder=_PersonContext(), enable_v0_3_compat=True)
    gated = Route(A2A_PATH, endpoint=KeyGate(ListStatusCheck(rpc.app), keys), methods=["POST"])
    # The card where A2A looks for it (the host's /.well-known) and relative to the endpoint
    # (where the A2A test kit also looks).
    beside = create_agent_card_routes(
        card, card_modifier=live, card_url=f"{A2A_PATH}/.well-known/agent-card.json"
    )
    return [*create_agent_card_routes(card, card_modifier=live), *beside, gated]
