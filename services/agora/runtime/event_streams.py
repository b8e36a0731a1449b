"""Live event streams of records (a task's, a plan's, a debate's), as Server-Sent Events.

One feed per watched record per replica reads the record every `poll_seconds` while anyone
watches it, and hands each new event to every watcher of that record: a thousand watchers of
one record cost one read per poll, not a thousand. Each watcher has a bounded buffer; one that
does not keep up is dropped with the reason (a last `dropped` event), so memory stays flat
whatever a consumer does. A stream resumes after the event id a client last saw
(`Last-Event-ID`), and ends after the record's final state (an `end` event).

An event's id (`seq`) names it for good. Two kinds of stream use this:
- a log (`backlog=True`): the record's events only grow at their end (a task's,
  `agora.core.task_events`), and a watcher gets every event after the one it last saw;
- a state (`backlog=False`): the event is the record as it is now, its id the record's
  revision; a watcher gets the record as it is, then each change the feed reads (changes
  between two reads arrive as one).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from starlette.responses import StreamingResponse

from agora.core.errors import NotFound, Unavailable

__all__ = [
    "DEFAULT_BUFFER_EVENTS",
    "DEFAULT_MAX_WATCHERS",
    "DEFAULT_POLL_SECONDS",
    "EVENT_ROUTE",
    "HEARTBEAT_SECONDS",
    "EventStreams",
    "ServerSentEvent",
    "SseReader",
    "event_stream_response",
    "last_seen",
    "sse",
    "sse_events",
    "state_streams",
]

DEFAULT_POLL_SECONDS = 0.5
DEFAULT_BUFFER_EVENTS = 64
"""Events a watcher may have unread before it is dropped."""
DEFAULT_MAX_WATCHERS = 10_000
"""Watchers one replica serves at once; one more is refused 503 UNAVAILABLE."""
HEARTBEAT_SECONDS = 15.0
"""A comment line this often on a quiet stream, so proxies keep it open."""
MAX_LAST_EVENT_ID_CHARS = 20


def sse(event: str, data: str, event_id: int | None = None) -> str:
    """One Server-Sent Event (`data` is one line of JSON)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n"


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One event of a stream read back: its name, its data and its id (None: it has none)."""

    event: str
    data: str
    id: str | None = None


class SseReader:
    """Server-Sent Events out of a stream's lines, taken one line at a time (comments skipped)."""

    def __init__(self) -> None:
        self._event = "message"
        self._data: list[str] = []
        self._id: str | None = None

    def line(self, line: str) -> ServerSentEvent | None:
        """The event this line completes (a blank line after its fields), else None."""
        if not line:
            done = ServerSentEvent(self._event, "\n".join(self._data), self._id) if self._data else None
            self._event, self._data, self._id = "message", [], None
            return done
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None


MAX_SSE_LINE_BYTES = 1024 * 1024
"""The longest line a stream read back may send (an event's data is one line of JSON)."""


async def sse_events(chunks: AsyncIterator[bytes]) -> AsyncGenerator[ServerSentEvent]:
    """The events of a stream as it arrives in chunks of bytes (a line longer than
    `MAX_SSE_LINE_BYTES` is refused with `ValueError`)."""
    reader, pending = SseReader(), b""
    async for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        if len(pending) > MAX_SSE_LINE_BYTES:
            raise ValueError(f"an event stream sent a line of more than {MAX_SSE_LINE_BYTES} bytes")
        for line in lines:
            event = reader.line(line.decode("utf-8", errors="replace").removesuffix("\r"))
            if event is not None:
                yield event


def last_seen(header: str | None) -> int:
    """The seq a client last saw, from its `Last-Event-ID` (none or unreadable: 0, from the
    start)."""
    if header is None or len(header) > MAX_LAST_EVENT_ID_CHARS:
        return 0
    try:
        return max(0, int(header.strip()))
    except ValueError:
        return 0


@dataclass(frozen=True, slots=True)
class _Rendered:
    """An event as its stream sends it, rendered once for all its watchers."""

    seq: int
    text: str


class _Dropped:
    def __init__(self, reason: str) -> None:
        self.reason = reason


class _End:
    pass


_END = _End()
Item = _Rendered | _Dropped | _End
MAX_CHUNK_EVENTS = 256
"""Events already waiting go out together, in one write."""


R = TypeVar("R")
E = TypeVar("E")


@dataclass
class _Feed:
    key: str
    last_seq: int = 0
    rendered: list[_Rendered] = field(default_factory=list)
    watchers: set[asyncio.Queue[Item]] = field(default_factory=set)
    ended: bool = False
    poller: asyncio.Task[None] | None = None


class EventStreams(Generic[R, E]):
    """The live streams of one kind of record (`what`: "task", "plan", ...): its events
    (`events_of`, each with its `seq_of` and rendered by `render` as the SSE event's name and
    its one line of JSON), until `ended`."""

    def __init__(
        self,
        what: str,
        read: Callable[[str], Awaitable[R]],
        *,
        events_of: Callable[[R], Sequence[E]],
        seq_of: Callable[[E], int],
        render: Callable[[E], tuple[str, str]],
        ended: Callable[[R], bool],
        backlog: bool,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        buffer_events: int = DEFAULT_BUFFER_EVENTS,
        max_watchers: int = DEFAULT_MAX_WATCHERS,
        max_backlog: int | None = None,
    ) -> None:
        self._what = what
        self._read = read
        self._events_of = events_of
        self._seq_of = seq_of
        self._render = render
        self._ended = ended
        self._backlog = backlog
        self._poll_seconds = poll_seconds
        self._buffer = buffer_events
        self._max_watchers = max_watchers
        self._max_backlog = max_backlog
        """The newest events a feed keeps for watchers that join it (None: every event of the
        record, for a record whose events are bounded themselves)."""
        self._feeds: dict[str, _Feed] = {}
        self.dropped = 0
        """Watchers dropped for not keeping up, since start."""

    @property
    def watchers(self) -> int:
        return sum(len(feed.watchers) for feed in self._feeds.values())

    @property
    def feeds(self) -> int:
        """Records being read for their watchers (one read each per poll)."""
        return len(self._feeds)

    def stream(self, key: str, record: R, after: int) -> AsyncIterator[str]:
        """The record's events after seq `after` as SSE text, live until it ends. `record` is
        the record as just read (so an unknown one was refused before this).

        The events a watcher has not seen when it starts (at most every event of a record, a
        bounded number) are its backlog; beyond that, it may fall `buffer_events` behind."""
        if self.watchers >= self._max_watchers:
            raise Unavailable(f"this replica serves {self._max_watchers} event streams already; try again")
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = _Feed(key)
        self._take(feed, record)
        queue: asyncio.Queue[Item] = asyncio.Queue()
        for rendered in feed.rendered:
            if rendered.seq > after:
                queue.put_nowait(rendered)
        if feed.ended:
            queue.put_nowait(_END)
        else:
            feed.watchers.add(queue)
            if feed.poller is None:
                feed.poller = asyncio.create_task(self._poll(feed), name=f"{self._what} events {key}")
        return self._drain(feed, queue, after)

    async def _drain(self, feed: _Feed, queue: asyncio.Queue[Item], sent: int) -> AsyncIterator[str]:
        try:
            while True:
                try:
                    async with asyncio.timeout(HEARTBEAT_SECONDS):
                        item = await queue.get()
                except TimeoutError:
                    yield ": still watching\n\n"
                    continue
                chunk: list[str] = []
                while isinstance(item, _Rendered):
                    if item.seq > sent:  # not one the client saw before it resumed
                        sent = item.seq
                        chunk.append(item.text)
                    if queue.empty() or len(chunk) >= MAX_CHUNK_EVENTS:
                        break
                    item = queue.get_nowait()
                if isinstance(item, _Dropped):
                    chunk.append(sse("dropped", json.dumps({"reason": item.reason, "last_seq": sent})))
                elif isinstance(item, _End):
                    chunk.append(sse("end", json.dumps({f"{self._what}_id": feed.key, "last_seq": sent})))
                if chunk:
                    yield "".join(chunk)
                if not isinstance(item, _Rendered):
                    return
        finally:
            feed.watchers.discard(queue)
            self._forget_if_unwatched(feed)

    def _forget_if_unwatched(self, feed: _Feed) -> None:
        if feed.watchers:
            return
        if feed.poller is not None:
            feed.poller.cancel()
            feed.poller = None
        if self._feeds.get(feed.key) is feed:
            del self._feeds[feed.key]

    def _take(self, feed: _Feed, record: R) -> None:
        """The record's events beyond those already known, handed to every watcher (a read
        older than one already taken adds nothing)."""
        fresh = [
            _Rendered(seq, sse(*self._render(event), seq))
            for event in self._events_of(record)
            if (seq := self._seq_of(event)) > feed.last_seq
        ]
        if not fresh:
            return
        feed.last_seq = fresh[-1].seq
        if self._backlog:
            feed.rendered.extend(fresh)
            if self._max_backlog is not None:
                del feed.rendered[: -self._max_backlog]
        else:
            feed.rendered = fresh[-1:]
        feed.ended = self._ended(record)
        for queue in list(feed.watchers):
            for event in fresh:
                if not self._offer(feed, queue, event):
                    break
            else:
                if feed.ended:
                    queue.put_nowait(_END)
        if feed.ended:
            feed.watchers.clear()  # each has its end queued; its stream forgets the feed
            self._forget_if_unwatched(feed)

    def _offer(self, feed: _Feed, queue: asyncio.Queue[Item], event: _Rendered) -> bool:
        if queue.qsize() < self._buffer:
            queue.put_nowait(event)
            return True
        feed.watchers.discard(queue)
        self.dropped += 1
        reason = f"more than {self._buffer} events unread; resume with Last-Event-ID"
        queue.put_nowait(_Dropped(reason))
        return False

    async def _poll(self, feed: _Feed) -> None:
        while not feed.ended:
            await asyncio.sleep(self._poll_seconds)
            try:
                record = await self._read(feed.key)
            except NotFound:
                # Its retention ended while watched: nothing more will happen to it here.
                for queue in list(feed.watchers):
                    queue.put_nowait(_Dropped(f"the {self._what} is no longer kept"))
                feed.ended = True
                feed.watchers.clear()
                self._forget_if_unwatched(feed)
                return
            except Exception:  # a failed read is tried again at the next poll
                continue
            self._take(feed, record)


class Revised(Protocol):
    """A record its service writes whole, counting its writes."""

    @property
    def revision(self) -> int: ...

    def model_dump_json(self) -> str: ...


S = TypeVar("S", bound=Revised)


def state_streams(
    what: str,
    read: Callable[[str], Awaitable[S]],
    ended: Callable[[S], bool],
    *,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    buffer_events: int = DEFAULT_BUFFER_EVENTS,
) -> EventStreams[S, S]:
    """The streams of a record written whole (a plan, a debate): each event (named `what`) is
    the record as the feed read it, its id the record's revision + 1 (a record not yet written
    is revision 0, so its first event is 1)."""
    return EventStreams(
        what,
        read,
        events_of=lambda record: [record],
        seq_of=lambda record: record.revision + 1,
        render=lambda record: (what, record.model_dump_json()),
        ended=ended,
        backlog=False,
        poll_seconds=poll_seconds,
        buffer_events=buffer_events,
    )


EVENT_ROUTE: dict[str, Any] = {
    "response_class": StreamingResponse,
    "responses": {200: {"content": {"text/event-stream": {}}}},
}
"""An events route's declaration (`@app.get(path, **EVENT_ROUTE)`): what it answers, for its
OpenAPI description."""


def event_stream_response(body: AsyncIterator[str] | AsyncIterator[bytes]) -> StreamingResponse:
    """An events route's answer: the stream, never cached or buffered by a proxy."""
    return StreamingResponse(
        body, media_type="text/event-stream", headers={"cache-control": "no-store", "x-accel-buffering": "no"}
    )
