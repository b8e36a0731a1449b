"""Child processes that cannot outlive their owner.

Each child runs in its own session (so a terminal's Ctrl-C reaches only the owner, which then
stops children in order), logs to a file, is tagged with `AGORA_RUN_ID` in its environment
(so leftovers can be found), and asks the kernel to SIGTERM it if the owner dies abruptly
(PR_SET_PDEATHSIG), so not even a SIGKILLed owner leaves orphans.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import httpx

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None


def _die_with_parent() -> None:
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ProcessFailed(RuntimeError):
    """A child exited or never became healthy; the message ends with its log's tail."""


class ManagedProcess:
    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = self.log_path.open("ab")
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            log_file.close()
        return self

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the child's process group, then SIGKILL what is left after `timeout`."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        # Whatever the child itself spawned into its group goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL, no grace: for crash tests."""
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(5)

    def pause(self) -> None:
        """SIGSTOP the child's process group: alive, holding its sockets, answering nothing."""
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGCONT)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def wait_until(self, check: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise ProcessFailed(
                    f"{self.name} exited ({self._proc and self._proc.returncode}) before {what}:\n"
                    f"{self.log_tail()}"
                )
            if check():
                return
            time.sleep(0.1)
        raise ProcessFailed(f"{self.name}: {what} not reached in {timeout:.0f}s:\n{self.log_tail()}")


def http_ok(url: str, timeout: float = 1.0) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return httpx.get(url, timeout=timeout).status_code < 300
        except httpx.HTTPError:
            return False

    return check


def port_open(port: int, host: str = "127.0.0.1") -> Callable[[], bool]:
    def check() -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex((host, port)) == 0

    return check


PORT_RANGE_ENV = "AGORA_PORT_RANGE"
"""`<first>-<last>`: take ports from this range only. Two test processes side by side (pytest's
workers) each get a range of their own below the kernel's ephemeral ports, so a port one of them
found free is never handed to the other in the moment before its process binds it."""


class PortAllocator:
    """Hands out free loopback ports, never the same one twice in a run: any free port the
    kernel offers, or the free ports of `AGORA_PORT_RANGE` in turn (never the same one twice in
    this process, whichever allocator gave it)."""

    _given_from_range: set[int] = set()

    def __init__(self) -> None:
        self._given: set[int] = set()
        bounds = os.environ.get(PORT_RANGE_ENV)
        if bounds:
            first, _, last = bounds.partition("-")
            self._range: range | None = range(int(first), int(last) + 1)
        else:
            self._range = None

    def take(self) -> int:
        if self._range is not None:
            return self._take_from(self._range)
        for _ in range(100):
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
            if port not in self._given:
                self._given.add(port)
                return port
        raise RuntimeError("no free port")

    def _take_from(self, ports: range) -> int:
        for port in ports:
            if port in self._given_from_range:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            self._given_from_range.add(port)
            return port
        raise RuntimeError(f"no free port in {PORT_RANGE_ENV}={ports.start}-{ports.stop - 1}")


def processes_tagged(run_id: str) -> Iterator[int]:
    """PIDs of live processes whose environment carries AGORA_RUN_ID=<run_id>."""
    marker = f"AGORA_RUN_ID={run_id}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                stat = (entry / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    yield int(entry.name)
        except (OSError, IndexError):
            continue
