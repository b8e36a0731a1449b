"""A real Kubernetes node: tests/integration/kubernetes/node_scenario.py, run under
`unshare --net --mount --pid --fork --mount-proc` (a network namespace with only loopback, a mount
namespace and a PID namespace of its own), starts the control plane without kwok, then containerd
(Debian's, with runc and the CNI bridge + host-local plugins), the kubelet and kube-proxy built
from the pinned k8s.io/kubernetes, imports images written here as OCI archives, and runs a
Deployment's pod with HTTP and exec probes behind a Service, CoreDNS from Kubernetes' DNS addon,
daprd, Redis, and Dapr's control plane from Dapr's chart with an injected daprd, then the Agora
chart itself from the Agora image (agora_on_node.py: install, `helm test`, the CLI, a trace in
Jaeger, pods' containers killed with SIGKILL mid-burst, a rolling upgrade, uninstall and
reinstall); every finding goes to report.json and each check is asserted here.

Skipped only when something `make kube-node` builds or installs is missing, or when not run as
root (containerd and the kubelet need it). The scenario takes seven to eight minutes with everything
built. When it is over, however it ended: no process of it is left (the PID namespace dies with
its first process; its processes are also tagged with AGORA_RUN_ID), its cgroups are removed, no
mount of it is visible here, none of the host paths the kubelet and containerd write to exists
unless it did before, and the machine-wide kernel settings the kubelet and kube-proxy may set are
unchanged."""

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
from tests.integration.kubernetes.agora_on_node import image_archive
from tests.integration.kubernetes.control_plane import KubeTools
from tests.integration.kubernetes.node import (
    NodeTools,
    cgroup_hierarchies,
    cgroup_root,
    host_paths_present,
    kernel_settings,
    remove_cgroups,
)
from tests.integration.kubernetes.node_scenario import CHECKS
from tests.required import cannot_run

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = float(os.environ.get("AGORA_KUBE_NODE_TEST_TIMEOUT", "1500"))
_TOOLS = KubeTools.from_environment()
MISSING = _TOOLS.missing() + NodeTools.from_environment(_TOOLS).missing()
_ARCHIVE, _ = image_archive()
if not _ARCHIVE.is_file():
    MISSING.append(f"the Agora image's OCI archive {_ARCHIVE}")

pytestmark = [pytest.mark.integration, pytest.mark.whole_system]


@pytest.fixture(scope="module", autouse=True)
def _the_node_can_run() -> None:
    if MISSING:
        cannot_run(f"not built or installed yet: {', '.join(MISSING)} (`make kube-node`)")
    if os.geteuid() != 0:
        cannot_run("containerd and the kubelet need root")


def _mounts_mentioning(folder: Path) -> list[str]:
    text = Path("/proc/self/mountinfo").read_text()
    return [line for line in text.splitlines() if str(folder) in line]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("kubernetes-node")
    run_id = f"node-{uuid.uuid4().hex[:10]}"
    host_paths_before = host_paths_present()
    settings_before = kernel_settings()
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    argv = [
        unshare, "--net", "--mount", "--pid", "--fork", "--mount-proc", "--",
        sys.executable, "-m", "tests.integration.kubernetes.node_scenario", str(workdir),
    ]  # fmt: skip
    env = {
        **os.environ,
        "AGORA_RUN_ID": run_id,
        "AGORA_HOST_MOUNT_NAMESPACE": str(os.stat("/proc/self/ns/mnt").st_ino),
    }
    output = workdir / "scenario.out"
    started = time.monotonic()
    timed_out = False
    proc: subprocess.Popen[bytes] | None = None
    try:
        with output.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                cwd=REPO,
                env=env,
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
        # unshare and the scenario (PID 1 of its namespace) are this group; when the scenario
        # dies the kernel kills every other process of the namespace.
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        leftovers = _wait_for_no_processes(run_id, timeout=60)
        cgroups_left = remove_cgroups(cgroup_root(run_id), timeout=30)
        # The node's /var/lib (containerd's images and snapshots, about a gigabyte with Dapr's)
        # is plain files once the mount namespace is gone; logs and the report stay.
        if not leftovers:
            shutil.rmtree(workdir / "node" / "host" / "var-lib", ignore_errors=True)
    report_path = workdir / "report.json"
    report: dict[str, Any] = json.loads(report_path.read_text()) if report_path.exists() else {}
    yield {
        "report": report,
        "workdir": workdir,
        "returncode": proc.returncode if proc else None,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - started, 1),
        "leftovers": leftovers,
        "cgroups_left": cgroups_left,
        "cgroup_root": cgroup_root(run_id),
        "host_paths_before": host_paths_before,
        "host_paths_after": host_paths_present(),
        "kernel_settings_before": settings_before,
        "kernel_settings_after": kernel_settings(),
        "mounts_left": _mounts_mentioning(workdir),
        "output": output.read_text(errors="replace")[-4000:],
    }


def _wait_for_no_processes(run_id: str, timeout: float) -> list[str]:
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
        lines.append(f"scenario error: {report['error']}\n{report.get('traceback', '')}")
    lines += [f"--- {name}\n{tail}" for name, tail in (report.get("log_tails") or {}).items()]
    if run["timed_out"]:
        lines.append(f"the scenario did not finish within {TIMEOUT_SECONDS:.0f}s and was killed")
    lines.append(f"scenario output (tail):\n{run['output']}")
    return "\n".join(lines)


def test_the_node_ran_in_namespaces_of_its_own(run: dict[str, Any]) -> None:
    report = run["report"]
    assert report, f"no report.json was written (exit {run['returncode']}).\n{_context(run)}"
    assert not run["timed_out"], _context(run)
    namespace = report.get("network_namespace") or {}
    assert namespace.get("interfaces_at_start") == ["lo"], f"{namespace}\n{_context(run)}"
    assert report.get("private_mounts"), f"the host paths were not made private.\n{_context(run)}"
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
        f"{check}: FAILED: {found.get('error')}\n{found.get('traceback', '')}\n{_context(run)}"
    )


def test_nothing_is_left_behind(run: dict[str, Any]) -> None:
    assert not run["leftovers"], f"processes of the scenario outlived it (killed now): {run['leftovers']}"
    assert not run["cgroups_left"], (
        f"cgroups under {run['cgroup_root']} could not be removed: {run['cgroups_left']}"
    )
    assert not [h for h in cgroup_hierarchies() if (h / run["cgroup_root"].lstrip("/")).exists()], (
        "the run's cgroup root is still there"
    )
    assert not run["mounts_left"], f"mounts of the scenario are visible on the host: {run['mounts_left']}"
    appeared = sorted(set(run["host_paths_after"]) - set(run["host_paths_before"]))
    assert not appeared, f"host paths appeared: {appeared}"
    assert run["kernel_settings_after"] == run["kernel_settings_before"], (
        f"kernel settings changed: {run['kernel_settings_before']} -> {run['kernel_settings_after']}"
    )
