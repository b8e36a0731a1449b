"""Shared calls: concurrent calls for one key share one call (a burst of tasks asking the
registry the same question, runs of one agent reading its history), and nothing is kept once
it returns, so the next call sees what changed since."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["SharedCalls"]

K = TypeVar("K")
V = TypeVar("V")


class SharedCalls(Generic[K, V]):
    """Concurrent calls for one key share one call: the first starts it, the others wait for
    its answer (or its error). Nothing is kept once it returns."""

    def __init__(self) -> None:
        self._running: dict[K, asyncio.Task[V]] = {}

    async def call(self, key: K, start: Callable[[], Awaitable[V]]) -> V:
        running = self._running.get(key)
        if running is None:
            running = self._running[key] = asyncio.ensure_future(start())
            running.add_done_callback(lambda _: self._running.pop(key, None))
        # A caller that gives up does not cancel the call the others wait for.
        return await asyncio.shield(running)
