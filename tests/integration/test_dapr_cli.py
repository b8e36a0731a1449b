"""`dapr run -f deploy/local/dapr.yaml` (Dapr CLI multi-app run) starts the embedded app (every
service) with the repo's components and configuration on the runtime binaries `make dapr` builds, without
`dapr init`, and Ctrl-C stops every process it started.

The CLI finds `daprd` in `$DAPR_RUNTIME_PATH/.dapr/bin` (a temporary folder of symlinks here,
so the real ~/.dapr is never touched). In multi-app run the placement and scheduler addresses
come only from the run file, which leaves them at the CLI's defaults (localhost:50005 and
localhost:50006, where `dapr init` puts them), so this test starts placement and scheduler on
those ports; the run file also pins the app's ports (app 8101, sidecar HTTP 3501). The
test skips when any of these ports is taken.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from agora.harness.processes import (
    ManagedProcess,
    PortAllocator,
    ProcessFailed,
    http_ok,
    processes_tagged,
)
from agora.harness.toolchain import MissingTool, Toolchain
from tests.integration.helpers import eventually

REPO = Path(__file__).resolve().parents[2]
RUN_FILE = Path("deploy/local/dapr.yaml")  # relative to REPO, as a user types it
PLACEMENT_PORT, SCHEDULER_PORT = 50005, 50006  # the CLI's defaults in multi-app run
APP_PORT, DAPR_HTTP_PORT = 8101, 3501  # fixed in the run file
SIDECAR = f"http://127.0.0.1:{DAPR_HTTP_PORT}"
REGISTRY = f"{SIDECAR}/v1.0/invoke/agora/method"  # the embedded app serves the registry


def _dapr_cli() -> Path | None:
    """The Dapr CLI: AGORA_DAPR_CLI, else `dapr` on PATH. It cannot be built here (the module
    proxy refuses github.com/dapr/cli sources), so the test runs where a user installed it."""
    found = os.environ.get("AGORA_DAPR_CLI") or shutil.which("dapr")
    return Path(found) if found else None


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        # As servers do (uvicorn, Go): connections in TIME_WAIT from an earlier run do not count.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _exe(pid: int) -> Path:
    try:
        return Path(os.readlink(f"/proc/{pid}/exe"))
    except OSError:  # exited meanwhile
        return Path("?")


def _run_file_components() -> set[str]:
    """Names of the Components in the run file's resource folders."""
    run_file = REPO / RUN_FILE
    common = yaml.safe_load(run_file.read_text())["common"]
    names = set()
    for folder in common["resourcesPaths"]:
        for path in sorted((run_file.parent / folder).glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc and doc.get("kind") == "Component":
                    names.add(doc["metadata"]["name"])
    return names


class _RepoLogs:
    """The CLI writes its app and daprd logs to `<appDirPath>/.dapr/logs`, i.e. into the
    clone; remember what was there so this run's files can be shown on failure and removed."""

    def __init__(self) -> None:
        self.dapr_dir = REPO / ".dapr"
        self.logs = self.dapr_dir / "logs"
        self._dapr_dir_existed = self.dapr_dir.exists()
        self._logs_existed = self.logs.exists()
        self._before = set(self.logs.glob("*")) if self._logs_existed else set()

    def new_files(self) -> list[Path]:
        return sorted(set(self.logs.glob("*")) - self._before) if self.logs.exists() else []

    def tails(self, lines: int = 30) -> str:
        out = []
        for path in self.new_files():
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.relative_to(REPO)} ---\n" + "\n".join(text))
        return "\n".join(out)

    def remove_new(self) -> None:
        for path in self.new_files():
            with contextlib.suppress(OSError):
                path.unlink()
        for folder, existed in ((self.logs, self._logs_existed), (self.dapr_dir, self._dapr_dir_existed)):
            if not existed:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only if empty


def _kill_tagged(run_id: str) -> None:
    for pid in processes_tagged(run_id):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@dataclass(frozen=True)
class CliSetup:
    cli: Path
    env: dict[str, str]
    run_id: str


@pytest.fixture
def dapr_cli(tmp_path: Path) -> Iterator[CliSetup]:
    """The CLI, placement and scheduler on the CLI's default ports, and the environment to run
    the CLI in: `DAPR_RUNTIME_PATH` names a folder whose `.dapr/bin/daprd` is the cached daprd."""
    cli = _dapr_cli()
    if cli is None or not cli.is_file():
        pytest.skip("no Dapr CLI: install it (dapr.io) or set AGORA_DAPR_CLI to run `dapr run -f` end to end")
    toolchain = Toolchain.from_environment()
    try:
        daprd, placement_bin, scheduler_bin = toolchain.daprd, toolchain.placement, toolchain.scheduler
    except MissingTool as exc:
        pytest.skip(str(exc))
    taken = [p for p in (PLACEMENT_PORT, SCHEDULER_PORT, APP_PORT, DAPR_HTTP_PORT) if _port_taken(p)]
    if taken:
        pytest.skip(f"ports fixed by the Dapr CLI defaults or {RUN_FILE} are in use: {taken}")

    runtime = tmp_path / "runtime"
    (runtime / ".dapr" / "bin").mkdir(parents=True)
    (runtime / ".dapr" / "bin" / "daprd").symlink_to(daprd)

    run_id = f"dapr-cli-{uuid.uuid4().hex[:8]}"
    infra_env = {**os.environ, "AGORA_RUN_ID": f"{run_id}-infra"}
    ports = PortAllocator()
    infra: list[ManagedProcess] = []
    try:
        healthz, raft = ports.take(), ports.take()
        placement = ManagedProcess(
            "placement",
            [
                str(placement_bin),
                "--id=placement-0",
                f"--initial-cluster=placement-0=127.0.0.1:{raft}",
                f"--port={PLACEMENT_PORT}",
                "--listen-address=127.0.0.1",
                f"--healthz-port={healthz}",
                "--healthz-listen-address=127.0.0.1",
                "--enable-metrics=false",
            ],
            tmp_path / "placement.log",
            env=infra_env,
        ).start()
        infra.append(placement)
        placement.wait_until(http_ok(f"http://127.0.0.1:{healthz}/healthz"), "placement healthy", 30)

        healthz, etcd_client, etcd_peer = ports.take(), ports.take(), ports.take()
        scheduler = ManagedProcess(
            "scheduler",
            [
                str(scheduler_bin),
                "--id=scheduler-0",
                f"--port={SCHEDULER_PORT}",
                "--listen-address=127.0.0.1",
                f"--healthz-port={healthz}",
                "--healthz-listen-address=127.0.0.1",
                "--enable-metrics=false",
                f"--etcd-data-dir={tmp_path / 'scheduler-etcd'}",
                f"--etcd-client-port={etcd_client}",
                "--etcd-client-listen-address=127.0.0.1",
                f"--etcd-initial-cluster=scheduler-0=http://127.0.0.1:{etcd_peer}",
            ],
            tmp_path / "scheduler.log",
            env=infra_env,
        ).start()
        infra.append(scheduler)
        scheduler.wait_until(http_ok(f"http://127.0.0.1:{healthz}/healthz"), "scheduler healthy", 60)

        env = {
            **os.environ,
            "AGORA_RUN_ID": run_id,  # inherited by the CLI's daprd and app: leftovers are findable
            "DAPR_RUNTIME_PATH": str(runtime),
        }
        yield CliSetup(cli, env, run_id)
    finally:
        for proc in reversed(infra):
            proc.stop()
        _kill_tagged(f"{run_id}-infra")


def test_dapr_run_file_starts_the_registry_and_ctrl_c_stops_everything(
    dapr_cli: CliSetup, tmp_path: Path
) -> None:
    run_id = dapr_cli.run_id
    repo_logs = _RepoLogs()
    cli = ManagedProcess(
        "dapr-cli",
        [str(dapr_cli.cli), "run", "-f", str(RUN_FILE)],
        tmp_path / "dapr-cli.log",
        env=dapr_cli.env,
        cwd=REPO,
    )

    def diagnostics() -> str:
        return f"CLI output:\n{cli.log_tail(60)}\n{repo_logs.tails()}"

    try:
        cli.start()
        agent = {"agent_id": "cli-agent", "agent_name": "Cli", "skill_tags": ["x"]}

        def registered() -> bool:
            try:
                return httpx.post(f"{REGISTRY}/v1/agents", json=agent, timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            # Readiness straight from the app first: polling through the sidecar while the app
            # warms up would trip the resiliency circuit breaker and cost its 15s timeout.
            cli.wait_until(http_ok(f"http://127.0.0.1:{APP_PORT}/readyz"), "the app ready", 120)
            cli.wait_until(http_ok(f"{SIDECAR}/v1.0/healthz"), "its sidecar healthy", 60)
            cli.wait_until(registered, "a registration through the sidecar answered 200", 60)
        except ProcessFailed as exc:
            pytest.fail(f"{exc}\n{repo_logs.tails()}")

        found = httpx.post(f"{REGISTRY}/v1/agents/filter", json={"required_skills": ["x"]}, timeout=10)
        assert found.status_code == 200, found.text
        assert "cli-agent" in [a["agent_id"] for a in found.json()["agents"]], found.text

        # The sidecar is the cached daprd (through the runtime folder's symlink) with the
        # run file's components loaded.
        started = set(processes_tagged(run_id)) - {cli.pid}
        exes = {_exe(pid) for pid in started}
        assert Toolchain.from_environment().daprd.resolve() in exes, (exes, diagnostics())
        assert any(exe.name.startswith("python") for exe in exes), (exes, diagnostics())
        metadata = httpx.get(f"{SIDECAR}/v1.0/metadata", timeout=5).json()
        assert metadata["id"] == "agora"
        loaded = {c["name"] for c in metadata.get("components", [])}
        assert _run_file_components() <= loaded, (loaded, diagnostics())

        # Ctrl-C: the CLI stops the app and its sidecar, then exits.
        assert cli.pid is not None
        os.kill(cli.pid, signal.SIGINT)
        deadline = time.monotonic() + 60
        while cli.running() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not cli.running(), "the CLI did not exit within 60s of Ctrl-C\n" + diagnostics()

        def nothing_left() -> bool:
            left = {pid: _exe(pid).name for pid in processes_tagged(run_id)}
            assert not left, f"left running after the CLI exited: {left}\n{diagnostics()}"
            return True

        eventually(nothing_left, timeout=20)
    finally:
        cli.stop()
        _kill_tagged(run_id)
        repo_logs.remove_new()
