"""The allocator's shared calls: concurrent requests for one key make one call."""

from __future__ import annotations

import asyncio

import pytest

from agora.runtime.shared_calls import SharedCalls
from tests.unit.helpers import until


async def test_concurrent_calls_for_one_key_share_one_call_and_the_next_makes_a_new_one() -> None:
    calls: list[str] = []
    gate = asyncio.Event()

    async def read(key: str) -> str:
        calls.append(key)
        await gate.wait()
        return f"{key} #{calls.count(key)}"

    shared: SharedCalls[str, str] = SharedCalls()
    waiting = [asyncio.ensure_future(shared.call("a", lambda: read("a"))) for _ in range(5)]
    other = asyncio.ensure_future(shared.call("b", lambda: read("b")))
    await until(lambda: {"a", "b"} <= set(calls))  # every caller has asked; the reads are held
    gate.set()
    assert await asyncio.gather(*waiting) == ["a #1"] * 5
    assert await other == "b #1" and sorted(calls) == ["a", "b"]
    assert await shared.call("a", lambda: read("a")) == "a #2"  # nothing kept once it returned


async def test_an_error_reaches_every_waiter_and_a_caller_giving_up_cancels_nothing() -> None:
    gate = asyncio.Event()
    started = 0

    async def failing() -> str:
        nonlocal started
        started += 1
        await gate.wait()
        raise ConnectionError("registry unreachable")

    shared: SharedCalls[str, str] = SharedCalls()
    impatient = asyncio.ensure_future(shared.call("q", failing))
    patient = asyncio.ensure_future(shared.call("q", failing))
    await until(lambda: started == 1)  # the impatient caller's call is under way; both wait on it
    impatient.cancel()
    gate.set()
    with pytest.raises(ConnectionError):
        await patient
    assert started == 1  # one call served both
