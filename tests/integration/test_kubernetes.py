"""The Helm chart (deploy/helm/agora) on a real Kubernetes control plane with Dapr's own sidecar
injector: tests/integration/kubernetes/scenario.py, run under `unshare --net` (a network
namespace with only loopback, so nothing can leave the machine), starts etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok (fake nodes: no container runs), installs Dapr's
chart with sentry, operator and injector running for real, then installs, upgrades, rolls back
and uninstalls the chart, writing every finding to report.json. Each check is asserted here.

Skipped only when a binary (or Dapr's chart, kwok's stages) that `make kube` provides is missing.
The scenario runs once for the module (about two minutes) under a time limit; when it is over,
however it ended, no process it started is left (they are tagged with AGORA_RUN_ID)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agora.harness.processes import processes_tagged
from tests.integration.kubernetes.control_plane import KubeTools
from tests.integration.kubernetes.scenario import CHECKS

REPO = Path(__file__).resolve().parents[2]
# The scenario is done in about two minutes on two cores; the limit leaves room for a slow machine.
TIMEOUT_SECONDS = float(os.environ.get("AGORA_KUBE_TEST_TIMEOUT", "900"))
MISSING = KubeTools.from_environment().missing()

pytestmark = [
    pytest.mark.integration,
    # A whole cluster of its own: it runs first, before the shared local clusters start.
    pytest.mark.whole_system,
    pytest.mark.skipif(
        bool(MISSING), reason=f"not built yet: {', '.join(MISSING)} (`make kube` builds them)"
    ),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("kubernetes")
    run_id = f"kube-{uuid.uuid4().hex[:10]}"
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    argv = [
        unshare,
        "--net",
        "--",
        sys.executable,
        "-m",
        "tests.integration.kubernetes.scenario",
        str(workdir),
    ]
    output = workdir / "scenario.out"
    started = time.monotonic()
    timed_out = False
    with output.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env={**os.environ, "AGORA_RUN_ID": run_id},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            proc.wait(TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # The scenario's own group (helm, ip, openssl); its long-lived children are in
            # sessions of their own and get SIGTERM from the kernel when it dies.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    leftovers = _wait_for_no_processes(run_id, timeout=60)
    report_path = workdir / "report.json"
    report: dict[str, Any] = json.loads(report_path.read_text()) if report_path.exists() else {}
    yield {
        "report": report,
        "workdir": workdir,
        "returncode": proc.returncode,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - started, 1),
        "leftovers": leftovers,
        "output": output.read_text(errors="replace")[-4000:],
    }


def _wait_for_no_processes(run_id: str, timeout: float) -> list[str]:
    """Waits for every process tagged with run_id to end; SIGKILLs and names what is still there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not list(processes_tagged(run_id)):
            return []
        time.sleep(0.5)
    names: list[str] = []
    for pid in processes_tagged(run_id):
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            names.append(f"{pid} {command.strip()}")
            os.kill(pid, signal.SIGKILL)
    return names


def _context(run: dict[str, Any]) -> str:
    report = run["report"]
    lines = [f"workdir {run['workdir']} (logs/, report.json)"]
    if report.get("error"):
        lines.append(f"scenario error: {report['error']}")
        lines += [f"--- {name}\n{tail}" for name, tail in (report.get("log_tails") or {}).items()]
    if run["timed_out"]:
        lines.append(f"the scenario did not finish within {TIMEOUT_SECONDS:.0f}s and was killed")
    lines.append(f"scenario output (tail):\n{run['output']}")
    return "\n".join(lines)


def test_the_scenario_ran_in_a_loopback_only_network_namespace(run: dict[str, Any]) -> None:
    report = run["report"]
    assert report, f"no report.json was written (exit {run['returncode']}).\n{_context(run)}"
    assert not run["timed_out"], _context(run)
    namespace = report.get("network_namespace") or {}
    assert namespace.get("interfaces") == ["lo"], (
        f"interfaces: {namespace.get('interfaces')}\n{_context(run)}"
    )
    assert report.get("dapr", {}).get("webhook_ca_bundle_is_sentry_root"), (
        f"Dapr's injector did not come up with sentry's trust anchors.\n{_context(run)}"
    )
    assert report.get("not_covered"), "the report must say what this proof does not cover"


@pytest.mark.parametrize(
    "check", CHECKS, ids=[re.sub(r"[^a-z0-9]+", "-", c.lower())[:60].strip("-") for c in CHECKS]
)
def test_check(run: dict[str, Any], check: str) -> None:
    checks = {c["name"]: c for c in run["report"].get("checks", [])}
    assert check in checks, f"the scenario did not get to {check!r}.\n{_context(run)}"
    found = checks[check]
    if found["status"] == "skipped":
        pytest.fail(f"{check}: not run, {found['reason']}")
    assert found["status"] == "passed", (
        f"{check}: FAILED\n{found.get('error')}\n{found.get('traceback', '')}\n"
        f"(report: {run['workdir'] / 'report.json'}, logs: {run['workdir'] / 'logs'})"
    )


def test_no_process_is_left_behind(run: dict[str, Any]) -> None:
    assert not run["leftovers"], f"processes of the scenario outlived it (killed now): {run['leftovers']}"
    assert run["returncode"] is not None
