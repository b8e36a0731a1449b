"""Redis with replicas and Sentinel, as a store that fails over (`LocalCluster(redis_failover=True)`).

A primary and two replicas, each its own `redis-server` on a loopback port of the run, and three
Sentinels (`redis-server --sentinel`) watching them under the name `SENTINEL_MASTER`. Dapr's Redis
components reach them in their failover mode: `redisHost` lists the Sentinels, and the component
asks them where the primary is, again after a failover.

Redis replicates asynchronously: a write the primary acknowledged and had not yet sent to a
replica is lost when that replica is promoted. The primary refuses writes while fewer than
`MIN_REPLICAS_TO_WRITE` replicas have answered within `MIN_REPLICAS_MAX_LAG` seconds, so what
can be lost is at most that window of writes (docs/guarantees.md has what was measured).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "DOWN_AFTER_MS",
    "MIN_REPLICAS_MAX_LAG",
    "MIN_REPLICAS_TO_WRITE",
    "REPLICAS",
    "SENTINELS",
    "SENTINEL_MASTER",
    "master_port",
    "names_a_primary",
    "replica_safety_args",
    "sentinel_config",
]

SENTINEL_MASTER = "agora"
REPLICAS = 2
SENTINELS = 3
QUORUM = 2
DOWN_AFTER_MS = 5_000
"""How long a primary stays unanswering before the Sentinels agree it is down and promote a
replica. It also bounds which replica may be promoted: one whose link to the primary has been
down longer than ten times this (plus the time since the primary was found down) is too stale.
A Sentinel stalled for over 2 s on a busy machine goes into TILT for 30 s and acts on nothing;
with 2 s here, every replica was too stale once it came out, and no failover happened
("-failover-abort-no-good-slave"). With 5 s they stay eligible for 50 s."""
FAILOVER_TIMEOUT_MS = 10_000
MIN_REPLICAS_TO_WRITE = 1
MIN_REPLICAS_MAX_LAG = 2
"""Seconds: a replica that has not acknowledged the replication stream for longer does not
count towards `MIN_REPLICAS_TO_WRITE`."""


def replica_safety_args() -> list[str]:
    """What every Redis of the set runs with (a replica may become the primary)."""
    return [
        "--min-replicas-to-write", str(MIN_REPLICAS_TO_WRITE),
        "--min-replicas-max-lag", str(MIN_REPLICAS_MAX_LAG),
        "--replica-announce-ip", "127.0.0.1",
    ]  # fmt: skip


def sentinel_config(folder: Path, port: int, primary_port: int) -> Path:
    """A Sentinel's configuration file (Sentinel rewrites it as it learns the set's state)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "sentinel.conf"
    config.write_text(
        "\n".join(
            [
                f"port {port}",
                "bind 127.0.0.1",
                f"dir {folder}",
                "sentinel resolve-hostnames no",
                "sentinel announce-ip 127.0.0.1",
                f"sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {primary_port} {QUORUM}",
                f"sentinel down-after-milliseconds {SENTINEL_MASTER} {DOWN_AFTER_MS}",
                f"sentinel failover-timeout {SENTINEL_MASTER} {FAILOVER_TIMEOUT_MS}",
                f"sentinel parallel-syncs {SENTINEL_MASTER} 1",
                "",
            ]
        )
    )
    return config


def names_a_primary(sentinel_port: int) -> Callable[[], bool]:
    """Whether the Sentinel names a primary yet (it is up and watching the set)."""
    return lambda: master_port(sentinel_port) is not None


def master_port(sentinel_port: int, timeout: float = 2.0) -> int | None:
    """The port of the primary a Sentinel names now (None when it cannot say)."""
    reply = _ask(sentinel_port, f"SENTINEL get-master-addr-by-name {SENTINEL_MASTER}", timeout)
    # An array of two bulk strings: *2 $9 127.0.0.1 $<n> <port>
    lines = reply.split(b"\r\n")
    if not lines or not lines[0].startswith(b"*2"):
        return None
    return int(lines[4])


def _ask(port: int, command: str, timeout: float) -> bytes:
    """One inline command to a Redis or Sentinel on the loopback, and its whole reply."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            conn.sendall(command.encode() + b"\r\n")
            reply = b""
            while not _whole(reply):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                reply += chunk
            return reply
    except OSError:
        return b""


def _whole(reply: bytes) -> bool:
    # Only two shapes are read here: one line, or an array of two bulk strings (five lines).
    if not reply.endswith(b"\r\n"):
        return False
    return reply.count(b"\r\n") >= 5 if reply.startswith(b"*2") else True
