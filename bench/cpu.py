"""CPU used by the processes of a benchmark's system, to report CPU per unit of work."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from agora.harness.processes import ManagedProcess


def cpu_seconds(processes: Iterable[ManagedProcess]) -> dict[str, float]:
    """CPU seconds (user + system) each process has used so far, by process name."""
    used = {}
    for process in processes:
        if process.pid is None:
            continue
        try:
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used[process.name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used
