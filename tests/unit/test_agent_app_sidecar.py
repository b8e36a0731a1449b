"""`agora-agent run FILE` loads the file only once the app's sidecar is ready (a dapr-agents
`DurableAgent` reads the sidecar's metadata when the file constructs it), and without a sidecar
stops at once saying how an agent app joins a system."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agora.sdk import __main__ as agent_app_command
from agora.sdk.__main__ import HOW_TO_JOIN, main, sidecar_problem
from agora.sdk._app import AgentAppSettings


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Sidecar(BaseHTTPRequestHandler):
    """Not ready for its first `not_ready` health checks, then ready."""

    not_ready = 0
    asked: list[str] = []

    def do_GET(self) -> None:
        type(self).asked.append(self.path)
        ready = len(self.asked) > self.not_ready
        self.send_response(204 if ready and self.path == "/v1.0/healthz/outbound" else 500)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        return


@pytest.fixture
def starting_sidecar() -> Iterator[int]:
    _Sidecar.not_ready, _Sidecar.asked = 3, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sidecar)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_without_a_sidecar_named_or_answering_it_says_at_once_how_to_join() -> None:
    started = time.monotonic()
    problem = sidecar_problem(AgentAppSettings(dapr_http_port=closed_port()), environ={})
    assert time.monotonic() - started < 5
    assert problem is not None and problem.startswith(
        "no Dapr sidecar for this app: DAPR_HTTP_PORT is not set"
    )
    assert problem.endswith(HOW_TO_JOIN) and "make run PROFILE=redis AGENTS=FILE" in problem


def test_a_sidecar_named_is_waited_for_until_it_is_ready(starting_sidecar: int) -> None:
    settings = AgentAppSettings(dapr_http_port=starting_sidecar, sidecar_wait_seconds=30)
    assert sidecar_problem(settings, environ={"DAPR_HTTP_PORT": str(starting_sidecar)}) is None
    assert _Sidecar.asked == ["/v1.0/healthz/outbound"] * 4


def test_a_sidecar_named_that_never_gets_ready_is_reported() -> None:
    port = closed_port()
    settings = AgentAppSettings(dapr_http_port=port, sidecar_wait_seconds=0.5)
    problem = sidecar_problem(settings, environ={"DAPR_HTTP_PORT": str(port)})
    assert problem == (
        f"the app's Dapr sidecar at http://127.0.0.1:{port} was not ready within 0.5 s. {HOW_TO_JOIN}"
    )


def test_the_file_is_not_loaded_before_the_sidecar_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded: list[Path] = []

    def load(paths: list[Path]) -> None:
        loaded.extend(paths)
        raise AssertionError("the files were loaded")

    monkeypatch.setattr(agent_app_command, "load_apps", load)
    monkeypatch.setenv("DAPR_HTTP_PORT", str(closed_port()))
    monkeypatch.setenv("AGORA_SIDECAR_WAIT_SECONDS", "0.3")
    agents = tmp_path / "agents.py"
    agents.write_text("agents = []\n")
    assert main(["run", str(agents)]) == 2
    assert loaded == []
    err = capsys.readouterr().err
    assert err.startswith("error: the app's Dapr sidecar at http://127.0.0.1:") and "Traceback" not in err
