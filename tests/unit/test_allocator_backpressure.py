"""The allocator keeps a bounded number of allocations under way: intake waits for a free slot
before it acknowledges a task, so a flood stays in the broker."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Literal, cast

from agora.allocator.service import MarketAllocator
from agora.core.market import TaskSpec
from agora.core.task_lifecycle import TaskRecord
from agora.llm import ModelClient
from agora.runtime.service import ServiceContext
from tests.unit.helpers import until


class Context:
    """What the allocator takes from its app: the sidecar (unused here) and background work."""

    sidecar: Any = None

    def __init__(self) -> None:
        self.background: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(work, name=name)
        self.background.add(task)
        return task


class Board:
    """Every task's actor on the board, each answering a posting with nothing more to do."""

    def __call__(self, task_id: str) -> Board:
        return self

    async def post_task(self, spec: TaskSpec) -> TaskRecord | None:
        return None


class SlotWatch:
    """How many intakes are blocked waiting for one of the allocator's slots (its own
    semaphore, watched in place, so the bound stays the one `max_in_flight` set). An intake
    that takes a free slot counts in and out within one step, so no other task sees it."""

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self.waiting = 0
        self._acquire = slots.acquire
        slots.acquire = self._counted_acquire  # type: ignore[method-assign]

    async def _counted_acquire(self) -> Literal[True]:
        self.waiting += 1
        try:
            return await self._acquire()
        finally:
            self.waiting -= 1


def spec(task_id: str) -> TaskSpec:
    return TaskSpec.model_validate({"task_id": task_id, "description": "d", "required_skills": ["s"]})


async def test_intake_waits_for_a_free_allocation_slot() -> None:
    allocator = MarketAllocator(
        cast(ServiceContext, Context()),
        cast(ModelClient, None),
        registry_app_id="registry",
        taskboard_app_id="taskboard",
        bid_timeout_s=1,
        exploration_weight=1,
        reputation_max_age_s=1,
        max_in_flight=2,
    )
    allocator._tasks = Board()  # type: ignore[assignment]
    slots = SlotWatch(allocator._slots)
    release = asyncio.Event()
    running: list[str] = []

    async def run(task_id: str, known: TaskRecord | None = None) -> None:
        running.append(task_id)
        await release.wait()

    allocator.run = run  # type: ignore[method-assign]
    await allocator.on_task(spec("t1"))
    await allocator.on_task(spec("t2"))
    third = asyncio.create_task(allocator.on_task(spec("t3")))
    await until(lambda: slots.waiting == 1)  # the third intake got as far as it can
    assert running == ["t1", "t2"] and not third.done()  # the delivery is not acknowledged

    release.set()
    await asyncio.wait_for(third, timeout=1)
    await until(lambda: len(running) == 3)  # its allocation runs in the background
    assert running == ["t1", "t2", "t3"]
