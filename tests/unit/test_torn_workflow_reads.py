"""A read of a workflow instance's state that overlaps a save of it: daprd 1.18 answers it with
`UNKNOWN ... (transient store read failure or partial save?)`, and it is asked again; any other
error goes to the caller at once, and a read torn every time fails with the engine's error."""

from __future__ import annotations

import grpc  # type: ignore[import-untyped]
import pytest

from agora.runtime.workflows import TORN_READ_ATTEMPTS, read_again_if_torn

TORN = (
    "workflow 'reuse-6761da': inbox key 'inbox-000000' declared in metadata (inboxLength=1) but missing "
    "from state store (transient store read failure or partial save?)"
)


def rpc_error(details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        grpc.StatusCode.UNKNOWN, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details
    )


class Engine:
    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.reads = 0

    async def read(self) -> object:
        self.reads += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_a_torn_read_is_asked_again_and_gets_the_whole_state() -> None:
    engine = Engine(rpc_error(TORN), rpc_error(TORN), "the state")
    assert await read_again_if_torn(engine.read) == "the state"
    assert engine.reads == 3


async def test_another_error_or_a_read_torn_every_time_reaches_the_caller() -> None:
    other = Engine(rpc_error("no connection"))
    with pytest.raises(grpc.aio.AioRpcError, match="no connection"):
        await read_again_if_torn(other.read)
    assert other.reads == 1
    always = Engine(*[rpc_error(TORN)] * TORN_READ_ATTEMPTS)
    with pytest.raises(grpc.aio.AioRpcError):
        await read_again_if_torn(always.read)
    assert always.reads == TORN_READ_ATTEMPTS
