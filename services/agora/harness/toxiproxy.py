"""Latency on the path to the store: Toxiproxy (Shopify's TCP proxy, built from the Go module
proxy by `make toxiproxy`) between every sidecar and the state store on its own host (Redis, or
PostgreSQL; `LocalCluster(store_host=True)`). It passes bytes through as they come until a test
adds its `latency` toxic: then what the store answers reaches the sidecars `latency ± jitter` ms
late.

The kernel's netem would delay packets; this machine's kernel has none (harness/netns.py), so
the delay is the proxy's, per chunk of bytes it relays, and packet loss and partitions stay the
namespace's iptables rules behind it.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

__all__ = ["POSTGRES_SSL_REQUEST", "REDIS_PING", "StoreProbe", "StoreProxy"]

PROXY_NAME = "store"
TOXIC_NAME = "latency"


@dataclass(frozen=True)
class StoreProbe:
    """The shortest exchange a store answers at once: what to send, how its answer begins."""

    name: str
    request: bytes
    answer: bytes


REDIS_PING = StoreProbe("PING", b"PING\r\n", b"+PONG")
POSTGRES_SSL_REQUEST = StoreProbe("SSLRequest", struct.pack("!II", 8, 80877103), b"N")
"""A PostgreSQL client's first message asking for TLS; a server without it answers `N` at once."""


class StoreProxy:
    """A proxy listening on the loopback at `listen_port`, relaying to `upstream` (`host:port`),
    steered through its API on `api_port`."""

    def __init__(self, api_port: int, listen_port: int, upstream: str, probe: StoreProbe) -> None:
        self.api_port = api_port
        self.listen_port = listen_port
        self.upstream = upstream
        self.probe = probe

    def config(self, folder: Path) -> Path:
        """The proxy's start-up configuration: the one proxy, enabled."""
        path = folder / "toxiproxy.json"
        proxy = {"name": PROXY_NAME, "listen": f"127.0.0.1:{self.listen_port}", "upstream": self.upstream,
                 "enabled": True}  # fmt: skip
        path.write_text(json.dumps([proxy]))
        return path

    def argv(self, server: Path, folder: Path) -> list[str]:
        return [
            str(server),
            "-host",
            "127.0.0.1",
            "-port",
            str(self.api_port),
            "-config",
            str(self.config(folder)),
        ]

    def delay(self, latency_ms: int, jitter_ms: int) -> None:
        """Every answer from the store `latency_ms ± jitter_ms` late (the requests go at once)."""
        self.clear()
        toxic = {
            "name": TOXIC_NAME,
            "type": "latency",
            "stream": "downstream",
            "toxicity": 1.0,
            "attributes": {"latency": latency_ms, "jitter": jitter_ms},
        }
        answer = httpx.post(f"{self._api}/proxies/{PROXY_NAME}/toxics", json=toxic, timeout=10)
        answer.raise_for_status()

    def clear(self) -> None:
        answer = httpx.delete(f"{self._api}/proxies/{PROXY_NAME}/toxics/{TOXIC_NAME}", timeout=10)
        if answer.status_code != 404:
            answer.raise_for_status()

    def delayed(self) -> bool:
        answer = httpx.get(f"{self._api}/proxies/{PROXY_NAME}/toxics", timeout=10)
        answer.raise_for_status()
        return any(t.get("name") == TOXIC_NAME for t in answer.json())

    def round_trip_ms(self) -> float:
        """One exchange with the store (its `probe`) through the proxy, in milliseconds: what a
        sidecar's call waits."""
        began = time.perf_counter()
        with socket.create_connection(("127.0.0.1", self.listen_port), timeout=10) as conn:
            conn.sendall(self.probe.request)
            answer = conn.recv(64)
        if not answer.startswith(self.probe.answer):
            raise RuntimeError(f"the store answered {self.probe.name} through the proxy with {answer!r}")
        return (time.perf_counter() - began) * 1000

    @property
    def _api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"
