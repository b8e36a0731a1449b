"""Publishing CloudEvents and subscribing to topics with validation, dead-lettering and dedupe.

Delivery is at least once, so every subscription is idempotent by CloudEvent id: ids already
handled (kept in memory and, with a TTL, in the state store, so a replica or a restart sees
them too) are acknowledged without running the handler again. A handler whose effects are
idempotent against their own source of truth (a `Task` actor that admits one post and one
outcome per task) is subscribed `idempotent=True`: its redeliveries are recognised there, so
its deliveries skip the shared marker's read and write and keep only the in-process memory.

Subscriptions take one message a delivery. Dapr's bulk subscribe is not used: for Redis and
the in-memory broker Dapr 1.18 gathers bulks in the sidecar, and a subscription stopped while
a gathered bulk is in flight (the app turning unhealthy and back, as a restart does) holds its
messages back until the sidecar stops, or leaves the broker's consumers waiting for ever.

A publish returns once the broker accepted its event, except on a broker that delivers inside
the publish call (`DELIVERS_IN_PUBLISH`: Dapr's in-memory one hands a subscription one message
at a time, and its publish returns only once the subscription's previous message was handled).
There a publisher would wait on a delivery, and a publisher holding what that delivery needs (an
actor's turn: the delivery of an earlier award calling the same task) would wait for ever. On
such a broker an event is handed to the sidecar and the publish returns at once; the broker
keeps nothing across a sidecar's restart, so waiting for it bought no durability.

A message that cannot be accepted is published to the dead-letter topic wrapped in a
`DeadLetter` that names the reason, then acknowledged: not a CloudEvent, a payload failing
validation, or a handler failing with a *permanent* error (`RejectMessage`, a domain error
such as an unknown id or an illegal transition: a permanent `AgoraError`), which would fail the
same way on every delivery. A handler failing otherwise (a sidecar or dependency unreachable,
a timeout, a lost optimistic-concurrency race) is *transient*: it answers RETRY, Dapr retries
with backoff (`components/common/resiliency.yaml`), and when those retries run out Dapr moves
the original event to the same dead-letter topic.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from fastapi import FastAPI, Request
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic import BaseModel, TypeAdapter, ValidationError

from agora.core.errors import AgoraError, field_errors
from agora.core.limits import MAX_ITEMS, MAX_JSON_DEPTH, MAX_NOTE_CHARS, MAX_TEXT_CHARS, json_depth
from agora.core.messages import DeadLetter
from agora.core.topics import Channel
from agora.runtime.batching import KeyedMicroBatcher
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprError, DaprSidecar
from agora.runtime.state import StateRepository
from agora.runtime.tracing import current_traceparent, extract_context, tracer

log = logging.getLogger(__name__)

T = TypeVar("T")
P = TypeVar("P", bound=BaseModel)

_ANY_JSON: TypeAdapter[Any] = TypeAdapter(Any)


REPLY_TO_ATTRIBUTE = "agorareplyto"
"""The CloudEvent extension attribute naming the app that waits for what a message announces."""


class RejectMessage(Exception):
    """Raised by a handler for a message that will never succeed: it is dead-lettered."""


@dataclass(slots=True)
class _Outgoing:
    cloud_event: dict[str, Any]
    handed_over: bool
    """Nobody waits for it: a failure to publish it is logged."""


DELIVERS_IN_PUBLISH = frozenset({"pubsub.in-memory"})
"""Component types whose publish call returns only once a delivery ended (see the module's
docstring): a publish to one of them is handed over without waiting."""


class Publisher:
    """Publishes CloudEvents. Publishes to one topic that come together (many actor turns or
    deliveries publishing at once) go as one bulk publish, each event with its own trace
    context; each publish returns once its own event was accepted, and fails alone if its
    event alone failed. A publish with none beside it goes as a single publish. On a broker
    that delivers inside the publish call, a publish returns once its event is handed over."""

    def __init__(self, sidecar: DaprSidecar, settings: ServiceSettings) -> None:
        self._sidecar = sidecar
        self._settings = settings
        self._tracer = tracer("agora.pubsub")
        # Each turn's publishes to a topic go out at once, beside any send still under way: a
        # broker that delivers inside the publish call (the in-memory one) may run a handler
        # that publishes in turn, and that publish must not wait for the call that waits for it.
        # A first send waits a turn more for the publishes a few awaits behind it (the other
        # deliveries of a burst): measured, a burst of 3,000 tasks decides about 10 % slower
        # without it.
        self._outgoing: KeyedMicroBatcher[tuple[str, str], _Outgoing, DaprError | None] = KeyedMicroBatcher(
            self._send, "publish", overlapping=True, wait_a_turn=True
        )
        self._handed_over: dict[str, bool] = {}
        """By pub/sub component: whether its publishes are handed over without waiting."""

    async def _hands_over(self, pubsub: str) -> bool:
        """Whether publishes to `pubsub` return once handed over (its broker delivers inside
        the publish call); asked of the sidecar's metadata once. A sidecar that does not answer
        is asked again next time, and the publish meanwhile waits (and fails) as any would."""
        known = self._handed_over.get(pubsub)
        if known is None:
            try:
                kind = await self._sidecar.component_type(pubsub)
            except Exception as exc:
                log.debug("the sidecar did not tell its components", extra={"reason": repr(exc)[:300]})
                return False
            known = self._handed_over[pubsub] = kind in DELIVERS_IN_PUBLISH
        return known

    async def drain(self, timeout_seconds: float) -> None:
        """Wait for the publishes under way (the ones handed over included), up to a time."""
        await self._outgoing.drain(timeout_seconds)

    async def publish(
        self,
        channel: Channel[P],
        payload: P,
        *,
        pubsub: str | None = None,
        message_id: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        """Publish `payload` on `channel`'s topic as the data of a CloudEvent; returns the
        event id. `reply_to`: the app waiting for what it announces (`REPLY_TO_ATTRIBUTE`), whose
        reply-only subscriptions take it."""
        return await self._publish_event(
            channel.name, payload, pubsub=pubsub, message_id=message_id, reply_to=reply_to
        )

    @property
    def app_id(self) -> str:
        """The app id this publisher speaks for (as a task's `reply_to`)."""
        return self._settings.app_id

    async def _publish_event(
        self,
        topic: str,
        payload: BaseModel,
        *,
        pubsub: str | None = None,
        message_id: str | None = None,
        event_type: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        pubsub_name = pubsub or self._settings.pubsub
        event_id = message_id or str(uuid.uuid4())
        data = payload.model_dump(mode="json")
        with self._tracer.start_as_current_span(
            f"publish {topic}",
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": "dapr",
                "messaging.operation.type": "send",
                "messaging.destination.name": topic,
                "messaging.message.id": event_id,
                "agora.pubsub.name": pubsub_name,
            },
        ):
            cloud_event: dict[str, Any] = {
                "specversion": "1.0",
                "id": event_id,
                "source": self._settings.app_id,
                "type": event_type or f"{topic}.v1",
                "time": datetime.now(UTC).isoformat(),
                "datacontenttype": "application/json",
                "data": data,
            }
            traceparent = current_traceparent()
            if traceparent:
                cloud_event["traceparent"] = traceparent
            if reply_to:
                cloud_event[REPLY_TO_ATTRIBUTE] = reply_to
            await self._publish_gathered(pubsub_name, topic, cloud_event)
        return event_id

    async def _publish_gathered(self, pubsub: str, topic: str, cloud_event: dict[str, Any]) -> None:
        if await self._hands_over(pubsub):
            self._outgoing.hand_over((pubsub, topic), _Outgoing(cloud_event, handed_over=True))
            return
        refused = await self._outgoing.submit((pubsub, topic), _Outgoing(cloud_event, handed_over=False))
        if refused is not None:
            raise refused

    async def _send(self, destination: tuple[str, str], gathered: list[_Outgoing]) -> list[DaprError | None]:
        """Publish what was gathered for one topic: each event's refusal, None where accepted."""
        pubsub, topic = destination
        try:
            if len(gathered) == 1:
                await self._sidecar.publish(pubsub, topic, gathered[0].cloud_event)
                failed: dict[int, str] = {}
            else:
                failed = await self._sidecar.publish_bulk(
                    pubsub, topic, [_traced(g.cloud_event) for g in gathered]
                )
        except Exception as exc:
            for g in gathered:
                if g.handed_over:
                    _lost(g, exc, topic)
            raise
        if not failed:
            return [None] * len(gathered)
        refusals: list[DaprError | None] = []
        for index, g in enumerate(gathered):
            problem = failed.get(index)
            refused = None if problem is None else DaprError(500, "ERR_PUBSUB_PUBLISH_MESSAGE", problem)
            if refused is not None and g.handed_over:
                _lost(g, refused, topic)
                refused = None
            refusals.append(refused)
        return refusals

    async def dead_letter(self, letter: DeadLetter) -> None:
        await self._publish_event(self._settings.dead_letter_topic, letter, event_type="agora.deadletter.v1")


def _traced(cloud_event: dict[str, Any]) -> dict[str, Any]:
    """The event as a bulk publish's entry: its trace context also as `traceid`, which the
    sidecar keeps (without it, every entry would take the bulk call's own trace)."""
    traceparent = cloud_event.get("traceparent")
    return {**cloud_event, "traceid": traceparent} if traceparent else cloud_event


def _lost(event: _Outgoing, failure: BaseException, topic: str) -> None:
    """Nobody waits for a handed-over event: say what was lost, and why (a broker that delivers
    inside the publish call refuses only once it is closed, as its sidecar stops)."""
    log.error(
        "an event handed to the broker was not published",
        extra={"topic": topic, "event_id": event.cloud_event.get("id"), "reason": repr(failure)[:500]},
    )


class ProcessedMarker(BaseModel):
    topic: str
    processed_at: datetime


class MessageDeduplicator:
    """Remembers handled message ids: a bounded in-process LRU in front of TTL'd state keys."""

    def __init__(
        self, repository: StateRepository[ProcessedMarker] | None, ttl_seconds: int, capacity: int = 10_000
    ):
        self._repository = repository
        self._ttl = ttl_seconds
        self._capacity = capacity
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._in_flight: set[str] = set()

    async def seen(self, message_key: str, *, shared: bool = True) -> bool:
        """Whether the message was handled. `shared=False` asks this process only: for fan-out
        topics every replica must handle every message, so one replica's marker (the state
        store is shared by an app's replicas) must not silence the others."""
        if message_key in self._recent:
            return True
        if shared and self._repository is not None and await self._repository.get(message_key) is not None:
            self._remember(message_key)
            return True
        return False

    def begin(self, message_key: str) -> bool:
        """Claim a message for processing; False when another delivery of it is in flight."""
        if message_key in self._in_flight:
            return False
        self._in_flight.add(message_key)
        return True

    def end(self, message_key: str) -> None:
        self._in_flight.discard(message_key)

    async def mark(self, message_key: str, topic: str, *, shared: bool = True) -> None:
        self._remember(message_key)
        if shared and self._repository is not None:
            marker = ProcessedMarker(topic=topic, processed_at=datetime.now(UTC))
            await self._repository.save(message_key, marker, ttl_seconds=self._ttl)

    def _remember(self, message_key: str) -> None:
        self._recent[message_key] = None
        self._recent.move_to_end(message_key)
        while len(self._recent) > self._capacity:
            self._recent.popitem(last=False)


@dataclass
class Subscription(Generic[T]):
    """One topic's subscription; several modules of one app may handle it (Dapr allows one
    subscription per topic and app), each handler in turn, the delivery done when all are."""

    pubsub: str
    topic: str
    adapter: TypeAdapter[T]
    handlers: list[Callable[[T], Awaitable[None]]]
    dead_letter: bool
    idempotent: bool = False
    """Every handler is idempotent by its own source of truth: no shared dedupe marker."""
    replies_only: bool = False
    """Only messages whose `agorareplyto` names this app are delivered (the sidecar drops the
    rest without calling the app)."""

    @property
    def route(self) -> str:
        return f"/events/{self.pubsub}/{self.topic}"


class Subscriptions:
    """Declares a service's topic subscriptions and serves them to daprd (`/dapr/subscribe`)."""

    def __init__(
        self, settings: ServiceSettings, publisher: Publisher, deduplicator: MessageDeduplicator
    ) -> None:
        self._settings = settings
        self._publisher = publisher
        self._dedupe = deduplicator
        self._subscriptions: list[Subscription[Any]] = []
        self._by_route: dict[str, Subscription[Any]] = {}
        """The same subscriptions by route: every delivery looks its route up."""
        self._tracer = tracer("agora.pubsub")
        self.in_flight = 0

    def subscribe(
        self,
        channel: Channel[P],
        handler: Callable[[P], Awaitable[None]],
        *,
        pubsub: str | None = None,
        dead_letter: bool = True,
        idempotent: bool = False,
        replies_only: bool = False,
    ) -> None:
        """Handle `channel`'s messages (validated into its payload type first) with `handler`;
        with `replies_only`, only those published with this app as their `reply_to` (when every
        handler of the topic in this app asks so)."""
        self._add(channel.name, channel.adapter, handler, pubsub, dead_letter, idempotent, replies_only)

    def subscribe_any(
        self,
        topic: str,
        handler: Callable[[Any], Awaitable[None]],
        *,
        pubsub: str | None = None,
        dead_letter: bool = True,
        idempotent: bool = False,
    ) -> None:
        """Handle whatever JSON arrives on `topic`: for tools that watch any topic (a recorder),
        never for a service's own contracts."""
        self._add(topic, _ANY_JSON, handler, pubsub, dead_letter, idempotent, replies_only=False)

    def _add(
        self,
        topic: str,
        adapter: TypeAdapter[Any],
        handler: Callable[[Any], Awaitable[None]],
        pubsub: str | None,
        dead_letter: bool,
        idempotent: bool,
        replies_only: bool,
    ) -> None:
        pubsub_name = pubsub or self._settings.pubsub
        for existing in self._subscriptions:
            if (existing.pubsub, existing.topic) == (pubsub_name, topic):
                if existing.adapter is not adapter:
                    raise ValueError(f"topic {topic} is already subscribed with another payload type")
                existing.handlers.append(handler)
                existing.dead_letter = existing.dead_letter or dead_letter
                existing.idempotent = existing.idempotent and idempotent
                existing.replies_only = existing.replies_only and replies_only
                return
        added = Subscription(pubsub_name, topic, adapter, [handler], dead_letter, idempotent, replies_only)
        self._subscriptions.append(added)
        self._by_route[added.route] = added

    def at_route(self, path: str) -> Subscription[Any] | None:
        """The subscription Dapr delivers to at `path` (`Subscription.route`), if any."""
        return self._by_route.get(path)

    def install(self, app: FastAPI) -> None:
        @app.get("/dapr/subscribe", include_in_schema=False)
        async def dapr_subscribe() -> list[dict[str, Any]]:
            declared = []
            for sub in self._subscriptions:
                declared.append(self.declaration(sub))
            return declared

        for sub in self._subscriptions:
            app.add_api_route(sub.route, self._endpoint(sub), methods=["POST"], include_in_schema=False)

    def declaration(self, sub: Subscription[Any]) -> dict[str, Any]:
        """The subscription as `/dapr/subscribe` declares it to the sidecar."""
        entry: dict[str, Any] = {"pubsubname": sub.pubsub, "topic": sub.topic}
        if sub.replies_only:
            # A routing rule: the sidecar drops a message no rule matches without calling the
            # app. Such a subscription has no dead-letter topic, where Dapr would send every
            # message meant for another app; a message this app refuses is still dead-lettered
            # by the app itself, with its reason.
            app_id = json.dumps(self._settings.app_id)  # a quoted string, as CEL reads one
            match = f"has(event.{REPLY_TO_ATTRIBUTE}) && event.{REPLY_TO_ATTRIBUTE} == {app_id}"
            entry["routes"] = {"rules": [{"match": match, "path": sub.route}]}
            return entry
        entry["route"] = sub.route
        if sub.dead_letter:
            entry["deadLetterTopic"] = self._settings.dead_letter_topic
        return entry

    def _endpoint(self, sub: Subscription[Any]) -> Callable[[Request], Awaitable[Any]]:
        async def deliver(request: Request) -> dict[str, str]:
            return {"status": await self.deliver(sub, await request.body(), dict(request.headers))}

        return deliver

    async def deliver(self, sub: Subscription[Any], body: bytes, headers: dict[str, str]) -> str:
        """Handle one delivery; returns Dapr's status word (SUCCESS / RETRY)."""
        self.in_flight += 1
        try:
            problem: str | None
            try:
                event = json.loads(body)
            except ValueError as exc:
                event, problem = body.decode(errors="replace"), str(exc)
            else:
                problem = None if isinstance(event, dict) else "a CloudEvent is a JSON object"
            if problem is not None:
                await self._refuse(sub, None, "malformed CloudEvent", [{"msg": problem}], event)
                return "SUCCESS"
            return await self._deliver(sub, event, headers)
        finally:
            self.in_flight -= 1

    async def _deliver(self, sub: Subscription[Any], event: dict[str, Any], headers: dict[str, str]) -> str:
        message_id = event.get("id")
        # Over HTTP the app's server span already continues daprd's `traceparent` header;
        # the CloudEvent's own trace context is the fallback for deliveries without one.
        parent = otel_context.get_current() if "traceparent" in headers else extract_context(event)
        token = otel_context.attach(parent)
        try:
            with self._tracer.start_as_current_span(
                f"process {sub.topic}",
                kind=SpanKind.CONSUMER,
                attributes={
                    "messaging.system": "dapr",
                    "messaging.operation.type": "process",
                    "messaging.destination.name": sub.topic,
                    "messaging.message.id": str(message_id),
                    "messaging.consumer.group.name": self._settings.app_id,
                },
            ) as span:
                dedupe_key = f"{sub.topic}:{message_id}" if message_id else None
                shared = sub.pubsub != self._settings.broadcast_pubsub and not sub.idempotent
                if dedupe_key and await self._dedupe.seen(dedupe_key, shared=shared):
                    span.set_attribute("agora.duplicate", True)
                    log.info(
                        "duplicate delivery acknowledged",
                        extra={"topic": sub.topic, "message_id": message_id},
                    )
                    return "SUCCESS"
                if dedupe_key and not self._dedupe.begin(dedupe_key):
                    return "RETRY"
                try:
                    status = await self._handle(sub, event, message_id)
                    if status == "SUCCESS" and dedupe_key:
                        await self._dedupe.mark(dedupe_key, sub.topic, shared=shared)
                    if status != "SUCCESS":
                        span.set_status(Status(StatusCode.ERROR, "handler failed; delivery will be retried"))
                    return status
                finally:
                    if dedupe_key:
                        self._dedupe.end(dedupe_key)
        finally:
            otel_context.detach(token)

    async def _handle(self, sub: Subscription[Any], event: dict[str, Any], message_id: str | None) -> str:
        data = event.get("data")
        if isinstance(data, str) and "json" in str(event.get("datacontenttype", "application/json")):
            with contextlib.suppress(ValueError):
                data = json.loads(data)
        try:
            payload = sub.adapter.validate_python(data)
        except ValidationError as exc:
            await self._refuse(sub, message_id, "payload failed validation", field_errors(exc.errors()), data)
            return "SUCCESS"
        try:
            for handler in sub.handlers:
                await handler(payload)
        except RejectMessage as exc:
            await self._refuse(sub, message_id, str(exc), [], data)
        except ValidationError as exc:
            await self._refuse(
                sub, message_id, "message refused by its handler", field_errors(exc.errors()), data
            )
        except AgoraError as exc:
            if not exc.permanent:
                return self._retry(sub, message_id, exc)
            await self._refuse(sub, message_id, f"{exc.code}: {exc.message}", [], data)
        except Exception as exc:
            return self._retry(sub, message_id, exc)
        return "SUCCESS"

    def _retry(self, sub: Subscription[Any], message_id: str | None, exc: Exception) -> str:
        """A transient failure: Dapr delivers the message again (with backoff) and moves it to the
        dead-letter topic when its retries run out. One warning line per attempt; the
        traceback only at debug level."""
        log.warning(
            "handler failed; the delivery will be retried",
            extra={"topic": sub.topic, "message_id": message_id, "reason": repr(exc)[:500]},
        )
        log.debug("handler failure", exc_info=exc)
        return "RETRY"

    async def _refuse(
        self,
        sub: Subscription[Any],
        message_id: str | None,
        reason: str,
        errors: list[Any],
        payload: Any,
    ) -> None:
        if json_depth(payload) > MAX_JSON_DEPTH:
            # Too deep to serialize as a JSON value: kept verbatim as its text, nothing lost.
            payload = json.dumps(payload)
        # Cut to the letter's bounds: the id and the refusal's text may come from anyone, and a
        # letter that does not validate would lose the message it is meant to keep.
        letter = DeadLetter(
            topic=sub.topic,
            message_id=None if message_id is None else message_id[:MAX_NOTE_CHARS],
            subscriber=self._settings.app_id,
            reason=reason[:MAX_TEXT_CHARS],
            errors=[dict(e) for e in errors[:MAX_ITEMS]],
            payload=payload,
        )
        log.warning(
            "message dead-lettered",
            extra={"topic": sub.topic, "message_id": message_id, "reason": reason, "errors": letter.errors},
        )
        await self._publisher.dead_letter(letter)
