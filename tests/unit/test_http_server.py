"""The apps' HTTP server answers each response in one socket write, and still answers right."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn

from agora.runtime.http_server import OneWriteHttpToolsProtocol, _OneWriteTransport


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name in ("sockname", "peername") else default


async def test_writes_made_in_one_turn_of_the_loop_go_as_one_write() -> None:
    inner = RecordingTransport()
    transport = _OneWriteTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]

    transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    transport.write(b"{}")
    assert inner.writes == [] and transport.get_write_buffer_size() == 40
    await asyncio.sleep(0)
    assert inner.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]

    transport.write(b"later")
    transport.close()
    assert inner.writes[-1] == b"later" and inner.closed, "what was held goes out before the close"
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b"x" * (int(scope["path"].strip("/") or "2"))
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def served() -> AsyncIterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=OneWriteHttpToolsProtocol, log_config=None, lifespan="off"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def test_the_server_answers_small_and_large_bodies_on_a_kept_connection(served: str) -> None:
    async with httpx.AsyncClient(base_url=served) as client:
        for size in (2, 0, 1_000_000, 5):
            response = await client.get(f"/{size}")
            assert response.status_code == 200 and len(response.content) == size
