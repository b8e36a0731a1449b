"""A small MCP server as its own Dapr app (app id `mcp-tools`), for the MCP tool tests.

It serves MCP's streamable HTTP transport at `/mcp` (the `mcp` package's FastMCP), plus the
`/healthz` and `/readyz` every Agora app serves. Its tools: `add`, `refuse` (always fails, so a
test sees a tool's error reach the model) and `stamp`, which sleeps before answering (time for a
test to kill the caller mid-call) and appends each call to the file named by MCP_TOOLS_CALLS, so
a test can count how often the tool really ran.

MCP_TOOLS_JSON_RESPONSE=1 answers each request with one JSON body instead of an SSE stream.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import uvicorn
from mcp.server.fastmcp import FastMCP
from starlette.requests import Request
from starlette.responses import JSONResponse

server = FastMCP(
    "agora-test-tools",
    json_response=os.environ.get("MCP_TOOLS_JSON_RESPONSE") == "1",
)


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool()
def refuse(reason: str) -> str:
    """Always fails with the given reason."""
    raise ValueError(f"refused: {reason}")


@server.tool()
async def stamp(label: str, seconds: float = 3.0) -> str:
    """Wait `seconds`, then answer `stamped <label>` (each call is recorded)."""
    calls = os.environ.get("MCP_TOOLS_CALLS")
    if calls:
        with Path(calls).open("a") as log:
            log.write(f"start {label}\n")
    await asyncio.sleep(seconds)
    if calls:
        with Path(calls).open("a") as log:
            log.write(f"end {label}\n")
    return f"stamped {label}"


async def healthy(_: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def main() -> None:
    app = server.streamable_http_app()
    app.add_route("/healthz", healthy)
    app.add_route("/readyz", healthy)
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ["APP_PORT"]), log_level="warning")


if __name__ == "__main__":
    main()
