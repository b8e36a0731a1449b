"""`agora ... | head`: a command whose reader closed the pipe stops quietly, as Unix tools do
(no traceback, exit 141), in a real process writing to a real pipe."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agora.cli.parser import EXIT_READER_GONE
from agora.core.market import AllocationStatus, TaskOutcome, TaskSpec
from agora.core.task_lifecycle import StatusChange, TaskRecord

SERVICES = Path(__file__).resolve().parents[2] / "services"

RECORD = TaskRecord(
    spec=TaskSpec(task_id="t-1", description="Do it", required_skills=["sql"]),
    status=AllocationStatus.COMPLETED,
    outcome=TaskOutcome(
        task_id="t-1", agent_id="a1", actual_success=True, actual_cost_usd=0.002, actual_steps=2
    ),
    history=[StatusChange(status=s) for s in ("PENDING", "BIDDING", "ALLOCATED", "COMPLETED")],
)


class _Sidecar(BaseHTTPRequestHandler):
    """Answers every request as the task board would answer `GET v1/tasks/t-1`."""

    def do_GET(self) -> None:
        body = RECORD.model_dump_json().encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        return


@pytest.fixture
def sidecar_port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sidecar)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def agora_into_a_closed_pipe(*argv: str, buffered: bool) -> subprocess.CompletedProcess[str]:
    """`agora argv...` with its stdout a pipe whose reader is gone before it writes a byte;
    `buffered`: its output waits in stdout's buffer (the broken pipe is found when it is
    flushed), else each print is written at once (and fails at once)."""
    reader, writer = os.pipe()
    os.close(reader)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    try:
        return subprocess.run(
            [sys.executable, "-m", "agora.cli", *argv],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**env, "PYTHONPATH": str(SERVICES), **({} if buffered else {"PYTHONUNBUFFERED": "1"})},
        )
    finally:
        os.close(writer)


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_a_task_shown_into_a_pipe_closed_early_ends_quietly(sidecar_port: int, buffered: bool) -> None:
    done = agora_into_a_closed_pipe(
        "--dapr-http-port", str(sidecar_port), "task", "show", "t-1", buffered=buffered
    )
    assert done.stderr == ""
    assert done.returncode == EXIT_READER_GONE == 141
