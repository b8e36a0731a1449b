"""Micro-batching: items submitted one by one, each by its own caller, go to a batch call
together, so a hundred concurrent submissions cost a call or two rather than a hundred.

Each submitter waits for the call that holds its items, gets its own items' answers from it
(the call answers each item in its place), and sees that call's failure. A submitter that gives
up (cancelled) does not cancel the call its items are part of.

Calls go one at a time: an idle batcher calls at the next turn of the event loop with what was
submitted until then, and whatever is submitted while a call is under way goes together in the
next call. Two variants of that: `wait_a_turn` lets the first call wait one turn more, for
submitters that are a few awaits behind (the other deliveries a sidecar hands over at once);
`overlapping` calls each turn's submissions at once, beside any call still under way, for a
callee that may submit in turn and wait for that while its own call waits for it (a broker
that delivers inside the publish call).

`KeyedMicroBatcher` is a batcher per key (an agent's record, a topic): keys never wait for each
other. `group_commit` and `group_commits` build the batchers of writes that answer nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["KeyedMicroBatcher", "MicroBatcher", "group_commit", "group_commits"]

In = TypeVar("In")
Out = TypeVar("Out")
K = TypeVar("K")
T = TypeVar("T")

_Waiter = tuple["asyncio.Future[Any]", int, int | None]
"""A submitter's answer, the place of its first item in the batch, and the end of its items'
places for a submission of several (None: one item, answered alone)."""


class MicroBatcher(Generic[In, Out]):
    """Batches submitted items into calls of `call`, which answers each item of a batch in its
    place (an answer per item, in order)."""

    def __init__(
        self,
        call: Callable[[list[In]], Awaitable[Sequence[Out]]],
        name: str,
        *,
        wait_a_turn: bool = False,
        overlapping: bool = False,
    ) -> None:
        self._call = call
        self._name = name
        self._wait_a_turn = wait_a_turn
        self._overlapping = overlapping
        self._items: list[In] = []
        self._waiters: list[_Waiter] = []
        self._taker: asyncio.Task[None] | None = None
        """The call task that takes what is queued next, while it is not done (one at a time:
        the task that calls until the queue is empty; overlapping: until it took the queue)."""
        self._overlapping_calls: set[asyncio.Task[None]] = set()
        """Overlapping: every call not done yet (held here, as the loop holds tasks weakly)."""

    async def submit(self, item: In) -> Out:
        """Queue `item` and wait for its answer from the call that holds it."""
        answer: asyncio.Future[Out] = asyncio.get_running_loop().create_future()
        self._waiters.append((answer, len(self._items), None))
        self._items.append(item)
        self._start_taker()
        return await asyncio.shield(answer)

    async def submit_all(self, items: Sequence[In]) -> list[Out]:
        """Queue `items` (all in one call) and wait for their answers, in order."""
        if not items:
            return []
        answers: asyncio.Future[list[Out]] = asyncio.get_running_loop().create_future()
        start = len(self._items)
        self._items.extend(items)
        self._waiters.append((answers, start, len(self._items)))
        self._start_taker()
        return await asyncio.shield(answers)

    def hand_over(self, item: In) -> None:
        """Queue `item` without waiting for it: nobody sees its answer or its call's failure, so
        `call` reports what went wrong with it."""
        self._items.append(item)
        self._start_taker()

    @property
    def calls_under_way(self) -> set[asyncio.Task[None]]:
        """The call tasks not done yet (the one about to take what is queued included)."""
        under_way = set(self._overlapping_calls)
        if self._taker is not None and not self._taker.done():
            under_way.add(self._taker)
        return under_way

    async def drain(self, timeout_seconds: float) -> None:
        """Wait for what is queued and the calls under way, up to a time."""
        under_way = self.calls_under_way
        if under_way:
            await asyncio.wait(under_way, timeout=timeout_seconds)

    def _start_taker(self) -> None:
        if self._taker is not None and not self._taker.done():
            return
        if not self._overlapping:
            self._taker = asyncio.create_task(self._call_in_turn(), name=self._name)
            return
        self._taker = task = asyncio.create_task(self._call_once(), name=self._name)
        self._overlapping_calls.add(task)
        task.add_done_callback(self._overlapping_calls.discard)

    async def _call_in_turn(self) -> None:
        if self._wait_a_turn:
            await asyncio.sleep(0)  # the submitters a few awaits behind add theirs meanwhile
        while self._items:
            await self._call_batch(*self._take())

    async def _call_once(self) -> None:
        if self._wait_a_turn:
            await asyncio.sleep(0)
        self._taker = None  # from here on, a submission starts a call of its own
        items, waiters = self._take()
        if items:
            await self._call_batch(items, waiters)

    def _take(self) -> tuple[list[In], list[_Waiter]]:
        batch = self._items, self._waiters
        self._items, self._waiters = [], []
        return batch

    async def _call_batch(self, items: list[In], waiters: list[_Waiter]) -> None:
        try:
            answers = await self._call(items)
            if len(answers) != len(items):
                raise RuntimeError(f"{self._name}: {len(answers)} answers to {len(items)} items")
        except Exception as exc:
            for answer, _, _ in waiters:
                if not answer.done():
                    answer.set_exception(exc)
            return
        for answer, start, end in waiters:
            if not answer.done():
                answer.set_result(answers[start] if end is None else list(answers[start:end]))


class KeyedMicroBatcher(Generic[K, In, Out]):
    """A micro-batcher per key: the items submitted for one key are batched into calls of
    `call` for that key; keys never wait for each other."""

    def __init__(
        self,
        call: Callable[[K, list[In]], Awaitable[Sequence[Out]]],
        name: str,
        *,
        wait_a_turn: bool = False,
        overlapping: bool = False,
    ) -> None:
        self._call = call
        self._name = name
        self._wait_a_turn = wait_a_turn
        self._overlapping = overlapping
        self._by_key: dict[K, MicroBatcher[In, Out]] = {}

    def _batcher(self, key: K) -> MicroBatcher[In, Out]:
        batcher = self._by_key.get(key)
        if batcher is None:
            batcher = self._by_key[key] = MicroBatcher(
                lambda items: self._call(key, items),
                f"{self._name} {key}",
                wait_a_turn=self._wait_a_turn,
                overlapping=self._overlapping,
            )
        return batcher

    async def submit(self, key: K, item: In) -> Out:
        return await self._batcher(key).submit(item)

    async def submit_all(self, key: K, items: Sequence[In]) -> list[Out]:
        return await self._batcher(key).submit_all(items)

    def hand_over(self, key: K, item: In) -> None:
        self._batcher(key).hand_over(item)

    async def drain(self, timeout_seconds: float) -> None:
        """Wait for what is queued and the calls under way, for every key, up to a time."""
        calls = {call for batcher in self._by_key.values() for call in batcher.calls_under_way}
        if calls:
            await asyncio.wait(calls, timeout=timeout_seconds)


def group_commit(write: Callable[[list[T]], Awaitable[None]], name: str) -> MicroBatcher[T, None]:
    """A group commit: what is submitted while a write is under way is written together by the
    next one; each item's answer is None once its write is done."""
    return MicroBatcher(_answering_none(write), name)


def group_commits(write: Callable[[K, list[T]], Awaitable[None]], name: str) -> KeyedMicroBatcher[K, T, None]:
    """A group commit per key (an agent's record, say): items submitted for one key while its
    write is under way are written together by its next one; keys never wait for each other."""

    async def call(key: K, items: list[T]) -> list[None]:
        await write(key, items)
        return [None] * len(items)

    return KeyedMicroBatcher(call, name)


def _answering_none(
    write: Callable[[list[T]], Awaitable[None]],
) -> Callable[[list[T]], Awaitable[list[None]]]:
    async def call(items: list[T]) -> list[None]:
        await write(items)
        return [None] * len(items)

    return call
