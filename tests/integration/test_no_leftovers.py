"""`agora run` (what `make run` starts) leaves no process behind: not on Ctrl-C, not even when
it is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agora.harness.processes import processes_tagged
from tests.integration.helpers import eventually


def _start_system(tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    run_id = f"leftover-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "AGORA_RUN_ID": run_id}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agora.cli", "run"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    output = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line)
        if line.startswith("Running."):
            return proc, run_id
    proc.kill()
    pytest.fail("system did not come up:\n" + "".join(output))


def _children(run_id: str, owner: int) -> set[int]:
    return set(processes_tagged(run_id)) - {owner}


@pytest.mark.whole_system
@pytest.mark.parametrize(
    "stop_signal", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["ctrl-c", "term", "kill"]
)
def test_stopping_the_system_leaves_no_process(tmp_path: Path, stop_signal: signal.Signals) -> None:
    proc, run_id = _start_system(tmp_path)
    started = _children(run_id, proc.pid)
    names = {Path(os.readlink(f"/proc/{pid}/exe")).name for pid in started}
    assert {"daprd", "placement", "scheduler", "jaeger"} <= names, names
    assert any(name.startswith("python") for name in names), names

    proc.send_signal(stop_signal)
    code = proc.wait(timeout=60)
    expected_exit = {signal.SIGINT: 0, signal.SIGTERM: 128 + signal.SIGTERM, signal.SIGKILL: -signal.SIGKILL}
    assert code == expected_exit[stop_signal], proc.stdout.read() if proc.stdout else ""
    eventually(lambda: not _children(run_id, proc.pid), timeout=30)
