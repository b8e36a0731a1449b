"""Runs a workflow function without Dapr: each yield completes the steps scheduled so far with
the test's answers, so a test sees which steps ran side by side and what each was given.

The tasks are the workflow engine's own (`CompletableTask`, `when_all`), so a workflow's
`when_all` and `when_any` compose as they do under Dapr; only the scheduling is the test's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dapr.ext.workflow._durabletask.task import CompletableTask, Task


@dataclass(frozen=True)
class Scheduled:
    kind: str
    """activity, child, event or timer"""
    name: str
    argument: Any


Answer = Callable[[Scheduled], Any]
NEVER = object()
"""An answer that leaves its step waiting for good (an event whose signal never arrives)."""


@dataclass
class ScriptedContext:
    """The part of `DaprWorkflowContext` the workflows use; `patched` answers `is_patched`: for
    every patch, or for the patches it names."""

    answer: Answer
    patched: bool | frozenset[str] = True
    instance_id: str = "run-1"
    now: datetime = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    waits: list[list[Scheduled]] = field(default_factory=list)
    """What each yield of the workflow waited on, in the order it was scheduled."""
    _outstanding: list[tuple[Scheduled, CompletableTask[Any]]] = field(default_factory=list)

    @property
    def current_utc_datetime(self) -> datetime:
        return self.now

    def is_patched(self, patch_name: str) -> bool:
        return self.patched if isinstance(self.patched, bool) else patch_name in self.patched

    def _schedule(self, kind: str, name: str, argument: Any) -> CompletableTask[Any]:
        task: CompletableTask[Any] = CompletableTask()  # type: ignore[no-untyped-call]
        # Dapr serializes an argument as it is scheduled: later changes to its objects are not sent.
        self._outstanding.append((Scheduled(kind, name, copy.deepcopy(argument)), task))
        return task

    def call_activity(self, name: str, *, input: Any = None, retry_policy: Any = None) -> Task[Any]:
        return self._schedule("activity", name, input)

    def call_child_workflow(
        self, name: str, *, input: Any = None, instance_id: str | None = None
    ) -> Task[Any]:
        return self._schedule("child", name, input)

    def wait_for_external_event(self, name: str) -> Task[Any]:
        return self._schedule("event", name, None)

    def create_timer(self, fire_at: timedelta | datetime) -> Task[Any]:
        return self._schedule("timer", str(fire_at), None)

    def run(self, workflow: Callable[[Any, Any], Generator[Any, Any, Any]], raw: Any) -> Any:
        """Run `workflow` to its end: its result."""
        steps = workflow(self, raw)
        sent: Any = None
        while True:
            try:
                waited = steps.send(sent)
            except StopIteration as end:
                return end.value
            outstanding, self._outstanding = self._outstanding, []
            self.waits.append([scheduled for scheduled, _ in outstanding])
            for scheduled, task in outstanding:
                answer = self.answer(scheduled)
                if answer is not NEVER:
                    task.complete(answer)
            self.now += timedelta(milliseconds=10)
            sent = waited.get_result()

    def activities(self, name: str) -> list[Any]:
        """The arguments of every `name` activity scheduled, in order."""
        return [s.argument for wait in self.waits for s in wait if s.kind == "activity" and s.name == name]
