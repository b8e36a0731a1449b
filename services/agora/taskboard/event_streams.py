"""A task's live event stream (`GET /v1/tasks/{id}/events`): the task's events
(`agora.core.task_events`) as a log, every event once, until the task's final status."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agora.core.task_events import FINAL_TASK_STATUSES, TaskEvent, task_events
from agora.core.task_lifecycle import TaskRecord
from agora.runtime.event_streams import (
    DEFAULT_BUFFER_EVENTS,
    DEFAULT_MAX_WATCHERS,
    DEFAULT_POLL_SECONDS,
    EventStreams,
)

__all__ = ["TaskEventStreams"]


class TaskEventStreams(EventStreams[TaskRecord, TaskEvent]):
    def __init__(
        self,
        read: Callable[[str], Awaitable[TaskRecord]],
        *,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        buffer_events: int = DEFAULT_BUFFER_EVENTS,
        max_watchers: int = DEFAULT_MAX_WATCHERS,
    ) -> None:
        super().__init__(
            "task",
            read,
            events_of=task_events,
            seq_of=lambda event: event.seq,
            render=lambda event: (event.kind, event.model_dump_json()),
            ended=lambda record: record.status in FINAL_TASK_STATUSES,
            backlog=True,
            poll_seconds=poll_seconds,
            buffer_events=buffer_events,
            max_watchers=max_watchers,
        )
