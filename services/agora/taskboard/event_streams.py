"""Live event streams of tasks (`GET /v1/tasks/{id}/events`), as Server-Sent Events.

One feed per watched task per board replica reads the task's record every `poll_seconds` while
anyone watches it, and hands each new event (`agora.core.task_events`) to every watcher of that
task: a thousand watchers of one task cost one read per poll, not a thousand. Each watcher has
a bounded buffer; one that does not keep up is dropped with the reason (a last `dropped`
event), so memory stays flat whatever a consumer does. A stream resumes after the event id a
client last saw (`Last-Event-ID`), and ends after the task's final status (an `end` event).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from agora.core.errors import NotFound, Unavailable
from agora.core.task_events import FINAL_TASK_STATUSES, TaskEvent, task_events
from agora.core.task_lifecycle import TaskRecord

__all__ = [
    "DEFAULT_BUFFER_EVENTS",
    "DEFAULT_MAX_WATCHERS",
    "DEFAULT_POLL_SECONDS",
    "HEARTBEAT_SECONDS",
    "TaskEventStreams",
    "last_seen",
    "sse",
]

DEFAULT_POLL_SECONDS = 0.5
DEFAULT_BUFFER_EVENTS = 64
"""Events a watcher may have unread before it is dropped."""
DEFAULT_MAX_WATCHERS = 10_000
"""Watchers one board replica serves at once; one more is refused 503 UNAVAILABLE."""
HEARTBEAT_SECONDS = 15.0
"""A comment line this often on a quiet stream, so proxies keep it open."""
MAX_LAST_EVENT_ID_CHARS = 20


def sse(event: str, data: str, event_id: int | None = None) -> str:
    """One Server-Sent Event (`data` is one line of JSON)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n"


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


@dataclass
class _Feed:
    task_id: str
    events: list[TaskEvent] = field(default_factory=list)
    rendered: list[_Rendered] = field(default_factory=list)
    watchers: set[asyncio.Queue[Item]] = field(default_factory=set)
    ended: bool = False
    poller: asyncio.Task[None] | None = None


class TaskEventStreams:
    def __init__(
        self,
        read: Callable[[str], Awaitable[TaskRecord]],
        *,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        buffer_events: int = DEFAULT_BUFFER_EVENTS,
        max_watchers: int = DEFAULT_MAX_WATCHERS,
    ) -> None:
        self._read = read
        self._poll_seconds = poll_seconds
        self._buffer = buffer_events
        self._max_watchers = max_watchers
        self._feeds: dict[str, _Feed] = {}
        self.dropped = 0
        """Watchers dropped for not keeping up, since start."""

    @property
    def watchers(self) -> int:
        return sum(len(feed.watchers) for feed in self._feeds.values())

    @property
    def feeds(self) -> int:
        """Tasks being read for their watchers (one read each per poll)."""
        return len(self._feeds)

    def stream(self, record: TaskRecord, after: int) -> AsyncIterator[str]:
        """The task's events after seq `after` as SSE text, live until its final status.
        `record` is the task as just read (so an unknown task was refused before this).

        The events a watcher has not seen when it starts (at most every event of a task, a
        bounded number) are its backlog; beyond that, it may fall `buffer_events` behind."""
        if self.watchers >= self._max_watchers:
            raise Unavailable(f"this replica serves {self._max_watchers} event streams already; try again")
        feed = self._feeds.get(record.task_id)
        if feed is None:
            feed = self._feeds[record.task_id] = _Feed(record.task_id)
        self._take(feed, record)
        queue: asyncio.Queue[Item] = asyncio.Queue()
        for rendered in feed.rendered[after:]:
            queue.put_nowait(rendered)
        if feed.ended:
            queue.put_nowait(_END)
        else:
            feed.watchers.add(queue)
            if feed.poller is None:
                feed.poller = asyncio.create_task(self._poll(feed), name=f"task events {feed.task_id}")
        return self._drain(feed, queue, after)

    async def _drain(self, feed: _Feed, queue: asyncio.Queue[Item], sent: int) -> AsyncIterator[str]:
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), HEARTBEAT_SECONDS)
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
                    chunk.append(sse("end", json.dumps({"task_id": feed.task_id, "last_seq": sent})))
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
        if self._feeds.get(feed.task_id) is feed:
            del self._feeds[feed.task_id]

    def _take(self, feed: _Feed, record: TaskRecord) -> None:
        """The record's events beyond those already known, handed to every watcher (a read
        older than one already taken adds nothing)."""
        events = task_events(record)
        if len(events) <= len(feed.events):
            return
        fresh = [
            _Rendered(e.seq, sse(e.kind, e.model_dump_json(), e.seq)) for e in events[len(feed.events) :]
        ]
        feed.events = events
        feed.rendered.extend(fresh)
        feed.ended = record.status in FINAL_TASK_STATUSES
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
                record = await self._read(feed.task_id)
            except NotFound:
                # Its retention ended while watched: nothing more will happen to it here.
                for queue in list(feed.watchers):
                    queue.put_nowait(_Dropped("the task is no longer on the board"))
                feed.ended = True
                feed.watchers.clear()
                self._forget_if_unwatched(feed)
                return
            except Exception:  # a failed read is tried again at the next poll
                continue
            self._take(feed, record)
