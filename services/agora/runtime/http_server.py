"""The apps' HTTP server protocol: uvicorn's httptools protocol, answering each response in one
socket write.

uvicorn writes a response's status line and headers, then its body, as two writes, so every
answer to the sidecar (a delivery's status, an actor call's result) costs two `send` calls and
two packets on the loopback, each waking the sidecar. Writes made in one turn of the event loop
are held and sent together at the end of that turn: one write per response."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["OneWriteHttpToolsProtocol"]


class _OneWriteTransport:
    """A transport that sends what was written in one turn of the loop as one write."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._held:
            self._loop.call_soon(self._flush)
        self._held.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def _flush(self) -> None:
        if not self._held:
            return
        held, self._held = self._held, []
        if not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = []
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(h) for h in self._held)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` over a transport that answers each response in one write."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # uvloop's transports are not `asyncio.Transport` subclasses: wrapped as they are.
        one_write = _OneWriteTransport(transport, asyncio.get_running_loop())
        super().connection_made(one_write)  # type: ignore[arg-type]
