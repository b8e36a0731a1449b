"""The live events of the runs going on in an agent app (`GET /v1/runs/{task_id}/events`): each
model step, each tool's result, the model's text as it streams, and the run's end.

A run's events exist only where the run goes on: each run (an award's, by task id) keeps its
newest `MAX_EVENTS_KEPT` events in this process, numbered from 1, while it runs and for
`KEPT_AFTER_END_SECONDS` after it ended, at most `MAX_RUNS_KEPT` runs (the oldest ended one
goes first). The app's event streams read them every `POLL_SECONDS` for all of a run's
watchers, bounded per watcher as every stream of Agora's (`runtime/event_streams.py`). The
record that lasts is elsewhere: the task's own events on the task board, and the run's saved
state in the store.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from pydantic import TypeAdapter

from agora.core.errors import NotFound
from agora.runtime.event_streams import EventStreams
from agora.sdk._runner import RunEnded, RunEvent, RunEventSink, RunStatus

__all__ = [
    "KEPT_AFTER_END_SECONDS",
    "MAX_EVENTS_KEPT",
    "MAX_RUNS_KEPT",
    "POLL_SECONDS",
    "RunFeeds",
    "RunLog",
    "event_name",
    "run_event_streams",
]

MAX_EVENTS_KEPT = 2_000
"""Events of one run kept for watchers: one that resumes further behind misses the oldest."""
MAX_RUNS_KEPT = 1_000
KEPT_AFTER_END_SECONDS = 300.0
POLL_SECONDS = 0.1
"""How often a watched run's events are looked at: a model's text reaches watchers within it."""
ENDED = frozenset({RunStatus.COMPLETED, RunStatus.FAILED})

_EVENT = TypeAdapter(RunEvent)


@dataclass
class RunLog:
    """One run's newest events, each with its number, and whether the run ended."""

    task_id: str
    events: deque[tuple[int, RunEvent]] = field(default_factory=lambda: deque(maxlen=MAX_EVENTS_KEPT))
    count: int = 0
    ended_at: float | None = None

    @property
    def ended(self) -> bool:
        return self.ended_at is not None


class RunFeeds:
    """The events of this process's runs, by task id, for their event streams."""

    def __init__(self) -> None:
        self._logs: dict[str, RunLog] = {}
        self._now = time.monotonic

    def sink(self, task_id: str) -> RunEventSink:
        """Where a run of the task puts its events (a run resumed after a pause goes on with
        the same numbers)."""
        log = self._logs.get(task_id)
        if log is None or log.ended:
            self._make_room()
            log = self._logs[task_id] = RunLog(task_id)

        async def keep(event: RunEvent) -> None:
            log.count += 1
            log.events.append((log.count, event))
            if isinstance(event, RunEnded) and event.status in ENDED:
                log.ended_at = self._now()

        return keep

    def log_of(self, task_id: str) -> RunLog:
        log = self._logs.get(task_id)
        if log is None:
            raise NotFound(
                f"no run of task {task_id!r} goes on in this app (a run's events are where it runs, and "
                f"kept {KEPT_AFTER_END_SECONDS:.0f} s after it ends)",
                task_id=task_id,
            )
        return log

    def _make_room(self) -> None:
        now = self._now()
        for task_id, log in list(self._logs.items()):
            if log.ended_at is not None and now - log.ended_at > KEPT_AFTER_END_SECONDS:
                del self._logs[task_id]
        while len(self._logs) >= MAX_RUNS_KEPT:
            ended = [log for log in self._logs.values() if log.ended_at is not None]
            oldest = min(ended or self._logs.values(), key=lambda log: log.ended_at or 0.0)
            del self._logs[oldest.task_id]


def event_name(event: RunEvent) -> str:
    """A run's event in its stream: named by its `kind` (`text`, `step`, `tool_result`...), a
    turn's end (`RunEnded`) as `run_ended`, so the stream's own `end` event is never mistaken
    for it."""
    return "run_ended" if isinstance(event, RunEnded) else event.kind


def run_event_streams(feeds: RunFeeds) -> EventStreams[RunLog, tuple[int, RunEvent]]:
    """The streams of this process's runs: each event named by `event_name`, its number the
    event id, until the run ended."""

    async def read(task_id: str) -> RunLog:
        return feeds.log_of(task_id)

    return EventStreams(
        "run",
        read,
        events_of=lambda log: list(log.events),
        seq_of=lambda numbered: numbered[0],
        render=lambda numbered: (event_name(numbered[1]), _EVENT.dump_json(numbered[1]).decode()),
        ended=lambda log: log.ended,
        backlog=True,
        poll_seconds=POLL_SECONDS,
        max_backlog=MAX_EVENTS_KEPT,
    )
