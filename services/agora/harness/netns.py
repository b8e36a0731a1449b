"""A host of the test's own on the machine: a network namespace joined to the machine's by a veth
pair, for putting a process (the store, say) across a network whose faults a test controls.

The namespace has its loopback and its end of the pair, and no route out: the only address it
reaches is the machine's end of the pair, and the machine reaches it only at its own end. The
addresses are private ones of a /30 picked for the run (`10.213.<n>.0/30`), which nothing
outside the machine ever sees. Faults are `iptables` rules inside the namespace:

- `lose(percent)`: each packet in or out dropped at random with that chance;
- `partition()`: every packet in or out dropped;
- `heal()`: the rules removed.

Latency is not among them: it needs the kernel's `netem` queueing discipline, and this machine's
kernel answers `tc qdisc add ... netem` with "Error: Specified qdisc kind is unknown.". The
cluster puts a proxy that delays answers in front of the host instead (harness/toxiproxy.py).

Needs root (`ip netns`, `iptables`). `close` removes the namespace, and the pair with it.
"""

from __future__ import annotations

import subprocess
import zlib

__all__ = ["TestHost", "netns_available"]

SUBNET_PREFIX = "10.213"


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=check)


def netns_available() -> str | None:
    """None when a namespace of the test's own can be made here; else why not."""
    probe = "agora-probe"
    try:
        made = _run("ip", "netns", "add", probe, check=False)
    except FileNotFoundError:
        return "no `ip` command (Debian's iproute2)"
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    try:
        rules = _run("ip", "netns", "exec", probe, "iptables", "-L", "-n", check=False)
        if rules.returncode != 0:
            return f"`iptables` does not work in a namespace: {rules.stderr.strip()}"
    finally:
        _run("ip", "netns", "del", probe, check=False)
    return None


class TestHost:
    """A namespace `name` for one run, at `address`; the machine at `gateway`."""

    __test__ = False  # not a pytest test class

    def __init__(self, run_id: str, role: str) -> None:
        tag = f"{zlib.crc32(f'{run_id}-{role}'.encode()):08x}"
        self.name = f"agora-{tag}-{role}"[:40]
        self._host_link = f"ag{tag}h"
        self._ns_link = f"ag{tag}n"
        third = int(tag[:4], 16) % 250 + 1
        fourth = int(tag[4:6], 16) % 60 * 4  # a /30: .0 network, .1 machine, .2 host, .3 broadcast
        self.gateway = f"{SUBNET_PREFIX}.{third}.{fourth + 1}"
        self.address = f"{SUBNET_PREFIX}.{third}.{fourth + 2}"
        self._open = False
        self.dropped_by_last_fault = 0
        """Packets the last fault dropped, counted when it healed."""

    def open(self) -> TestHost:
        _run("ip", "netns", "del", self.name, check=False)  # left by a run that was killed
        _run("ip", "link", "del", self._host_link, check=False)
        _run("ip", "netns", "add", self.name)
        self._open = True
        _run("ip", "link", "add", self._host_link, "type", "veth", "peer", "name", self._ns_link)
        _run("ip", "link", "set", self._ns_link, "netns", self.name)
        _run("ip", "addr", "add", f"{self.gateway}/30", "dev", self._host_link)
        _run("ip", "link", "set", self._host_link, "up")
        inside = ("ip", "netns", "exec", self.name)
        _run(*inside, "ip", "addr", "add", f"{self.address}/30", "dev", self._ns_link)
        _run(*inside, "ip", "link", "set", self._ns_link, "up")
        _run(*inside, "ip", "link", "set", "lo", "up")
        return self

    def close(self) -> None:
        if self._open:
            _run("ip", "netns", "del", self.name, check=False)
            _run("ip", "link", "del", self._host_link, check=False)
            self._open = False

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def lose(self, percent: float) -> None:
        """Each packet into or out of the host dropped with `percent` % chance."""
        self.heal()
        chance = f"{percent / 100:.4f}"
        for chain in ("INPUT", "OUTPUT"):
            self._iptables("-A", chain, "!", "-i" if chain == "INPUT" else "-o", "lo", "-m", "statistic",
                           "--mode", "random", "--probability", chance, "-j", "DROP")  # fmt: skip

    def partition(self) -> None:
        """Nothing reaches the host, nothing leaves it (its own loopback aside)."""
        self.heal()
        self._iptables("-A", "INPUT", "!", "-i", "lo", "-j", "DROP")
        self._iptables("-A", "OUTPUT", "!", "-o", "lo", "-j", "DROP")

    def heal(self) -> None:
        """The fault rules removed; what they dropped is kept in `dropped_by_last_fault`."""
        if self._open:
            self.dropped_by_last_fault = self.dropped()
        for chain in ("INPUT", "OUTPUT"):
            self._iptables("-F", chain)

    def dropped(self) -> int:
        """Packets the fault rules have dropped so far."""
        listed = _run(*self.command(["iptables", "-L", "-n", "-v", "-x"])).stdout
        rows = [line.split() for line in listed.splitlines()]
        return sum(int(row[0]) for row in rows if len(row) > 2 and row[0].isdigit() and row[2] == "DROP")

    def _iptables(self, *rule: str) -> None:
        _run(*self.command(["iptables", "-w", *rule]))
