"""`agora run` (what `make run` starts) leaves no process behind: not on Ctrl-C, not even when
it is SIGKILLed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from agora.harness.processes import processes_tagged
from tests.integration.helpers import eventually, start_agora_run


def _start_system(tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    run_id = f"leftover-{uuid.uuid4().hex[:8]}"
    proc, _ = start_agora_run(tmp_path, {**os.environ, "AGORA_RUN_ID": run_id}, timeout=120)
    return proc, run_id


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

    try:
        proc.send_signal(stop_signal)
        code = proc.wait(timeout=60)
        expected_exit = {
            signal.SIGINT: 0,
            signal.SIGTERM: 128 + signal.SIGTERM,
            signal.SIGKILL: -signal.SIGKILL,
        }
        assert code == expected_exit[stop_signal], proc.stdout.read() if proc.stdout else ""
        eventually(lambda: not _children(run_id, proc.pid), timeout=30)
    finally:  # a system that did not stop as it should is not left running by its test
        if proc.poll() is None:
            proc.kill()
        for pid in _children(run_id, proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
