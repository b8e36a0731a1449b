"""The micro-batcher: what is submitted while a call is under way goes in the next call (per key
for the keyed one), each submitter gets its own items' answers or the call's failure, and a
submitter that gives up does not cancel the call."""

from __future__ import annotations

import asyncio

import pytest

from agora.runtime.batching import KeyedMicroBatcher, MicroBatcher, group_commit, group_commits


class Recorder:
    """A batch call that notes each batch, answers each item doubled, and holds its calls until
    released (when `held`)."""

    def __init__(self, *, held: bool = False) -> None:
        self.batches: list[list[int]] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        if not held:
            self.release.set()

    async def __call__(self, items: list[int]) -> list[int]:
        self.batches.append(items)
        self.started.set()
        await self.release.wait()
        return [item * 2 for item in items]


async def test_items_submitted_together_are_one_call_and_each_submitter_gets_its_own_answers() -> None:
    call = Recorder()
    batcher: MicroBatcher[int, int] = MicroBatcher(call, "test")

    one, several, other = await asyncio.gather(
        batcher.submit(1), batcher.submit_all([2, 3]), batcher.submit(4)
    )

    assert call.batches == [[1, 2, 3, 4]]
    assert (one, several, other) == (2, [4, 6], 8)
    assert await batcher.submit_all([]) == [] and call.batches == [[1, 2, 3, 4]]


async def test_items_submitted_during_a_write_are_written_together_by_the_next() -> None:
    writes: list[list[int]] = []
    first_started = asyncio.Event()
    release = asyncio.Event()

    async def write(batch: list[int]) -> None:
        writes.append(batch)
        first_started.set()
        await release.wait()

    commits = group_commit(write, "test")
    first = asyncio.ensure_future(commits.submit(1))
    await first_started.wait()
    rest = [asyncio.ensure_future(commits.submit(n)) for n in (2, 3, 4)]
    await asyncio.sleep(0)
    release.set()
    answers = await asyncio.gather(first, *rest)

    assert writes == [[1], [2, 3, 4]]
    assert answers == [None] * 4


async def test_a_failed_write_fails_the_submitters_of_its_items_only() -> None:
    async def write(batch: list[int]) -> None:
        if 2 in batch:
            raise ConnectionError("store away")

    commits = group_commit(write, "test")
    with pytest.raises(ConnectionError):
        await commits.submit(2)
    await commits.submit(3)  # the next write goes on


async def test_a_cancelled_submitter_does_not_cancel_the_call_the_others_wait_for() -> None:
    call = Recorder(held=True)
    batcher: MicroBatcher[int, int] = MicroBatcher(call, "test")
    leaving = asyncio.ensure_future(batcher.submit(1))
    staying = asyncio.ensure_future(batcher.submit(2))
    await call.started.wait()

    leaving.cancel()
    await asyncio.sleep(0)
    call.release.set()

    assert await staying == 4
    assert leaving.cancelled()
    assert call.batches == [[1, 2]]


async def test_a_call_that_answers_another_number_of_items_fails_its_submitters() -> None:
    async def short(items: list[int]) -> list[int]:
        return items[1:]

    batcher: MicroBatcher[int, int] = MicroBatcher(short, "short")
    results = await asyncio.gather(batcher.submit(1), batcher.submit(2), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) and "1 answers to 2 items" in str(r) for r in results)


async def submitted_after(awaits: int, batcher: MicroBatcher[int, int], item: int) -> int:
    for _ in range(awaits):
        await asyncio.sleep(0)
    return await batcher.submit(item)


@pytest.mark.parametrize(("wait_a_turn", "batches"), [(False, [[1], [2]]), (True, [[1, 2]])])
async def test_waiting_a_turn_lets_a_submitter_an_await_behind_join_the_first_call(
    wait_a_turn: bool, batches: list[list[int]]
) -> None:
    call = Recorder()
    batcher: MicroBatcher[int, int] = MicroBatcher(call, "test", wait_a_turn=wait_a_turn)

    await asyncio.gather(submitted_after(0, batcher, 1), submitted_after(1, batcher, 2))

    assert call.batches == batches


async def test_overlapping_calls_send_what_comes_during_a_call_at_once_beside_it() -> None:
    """A callee that submits in turn, and waits for that, while its own call waits for it."""
    batches: list[list[int]] = []
    batcher: MicroBatcher[int, int] = MicroBatcher(
        lambda items: calling_back(items), "test", overlapping=True
    )

    async def calling_back(items: list[int]) -> list[int]:
        batches.append(items)
        if 1 in items:
            await batcher.submit(10)
        return items

    answers = await asyncio.wait_for(asyncio.gather(batcher.submit(1), batcher.submit(2)), timeout=5)
    assert list(answers) == [1, 2]
    assert batches == [[1, 2], [10]]


async def test_one_at_a_time_a_submission_made_by_the_call_waits_behind_that_call() -> None:
    """What `overlapping` is for: here the call and the submission it waits for are stuck."""
    batches: list[list[int]] = []
    batcher: MicroBatcher[int, int] = MicroBatcher(lambda items: calling_back(items), "test")

    async def calling_back(items: list[int]) -> list[int]:
        batches.append(items)
        if 1 in items:
            await batcher.submit(10)
        return items

    first = asyncio.ensure_future(batcher.submit(1))
    done, _ = await asyncio.wait({first}, timeout=0.05)
    assert not done and batches == [[1]]
    for stuck in (*batcher.calls_under_way, first):
        stuck.cancel()


async def test_an_item_handed_over_is_not_waited_for_and_drain_waits_for_its_call() -> None:
    call = Recorder(held=True)
    batcher: MicroBatcher[int, int] = MicroBatcher(call, "test", overlapping=True)

    batcher.hand_over(1)
    await call.started.wait()
    await batcher.drain(timeout_seconds=0.01)
    assert batcher.calls_under_way, "drain waits no longer than it was given"

    call.release.set()
    await batcher.drain(timeout_seconds=5)
    assert call.batches == [[1]] and not batcher.calls_under_way


async def test_a_failed_call_of_handed_over_items_leaves_the_next_call_going() -> None:
    async def failing_once(items: list[int]) -> list[int]:
        if 1 in items:
            raise ConnectionError("broker away")
        return items

    batcher: MicroBatcher[int, int] = MicroBatcher(failing_once, "test")
    batcher.hand_over(1)
    await batcher.drain(timeout_seconds=5)
    assert await batcher.submit(2) == 2


async def test_keys_are_written_apart_and_never_wait_for_each_other() -> None:
    writes: list[tuple[str, list[int]]] = []
    held = asyncio.Event()

    async def write(key: str, batch: list[int]) -> None:
        writes.append((key, batch))
        if key == "slow":
            await held.wait()

    commits = group_commits(write, "test")
    slow = asyncio.ensure_future(commits.submit("slow", 1))
    await asyncio.sleep(0)
    await asyncio.gather(commits.submit("a", 1), commits.submit("a", 2), commits.submit("b", 3))
    assert not slow.done()
    held.set()
    await slow

    assert ("slow", [1]) in writes and ("b", [3]) in writes
    assert sorted(item for key, batch in writes if key == "a" for item in batch) == [1, 2]


async def test_a_keyed_batcher_answers_per_key_and_drains_every_key() -> None:
    release = asyncio.Event()
    calls: list[tuple[str, list[int]]] = []

    async def call(key: str, items: list[int]) -> list[str]:
        calls.append((key, items))
        await release.wait()
        return [f"{key}{item}" for item in items]

    batcher: KeyedMicroBatcher[str, int, str] = KeyedMicroBatcher(call, "test", overlapping=True)
    batcher.hand_over("a", 1)
    several = asyncio.ensure_future(batcher.submit_all("b", [2, 3]))
    draining = asyncio.ensure_future(batcher.drain(timeout_seconds=5))
    await asyncio.sleep(0.01)
    assert not draining.done(), "both keys' calls are under way"

    release.set()
    await draining
    assert await several == ["b2", "b3"]
    assert sorted(calls) == [("a", [1]), ("b", [2, 3])]
