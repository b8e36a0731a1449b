"""Soak: a steady stream of tasks through the whole system (redis profile, every service its
own app), every task run to its outcome; beside it, one escalation parked for every
`ESCALATE_EVERY` tasks (as an agent's runtime parks one) and a person deciding them as they
come. Sampled every few seconds: the resident memory of every app and sidecar (and placement,
scheduler, Redis) and the number of keys in Redis.

Retention is short here (AGORA_SOAK_RETENTION_SECONDS, 120 s by default) so the run reaches
the steady state a deployment reaches after its own retention (7 days by default): finished
tasks, decided escalations and idle sessions are dropped, idempotency markers expire, and the
number of keys levels off instead of growing with every task. Likewise actors go idle sooner
(AGORA_SOAK_ACTOR_IDLE_SECONDS, 60 s; 300 s by default).

Figures: memory per process at start, after warm-up and at the end (growth after warm-up; the
largest among apps and sidecars, as Redis and the scheduler hold what they are configured to),
Redis keys after warm-up, at most and at the end, and tasks per second. Sizes:
AGORA_SOAK_TASKS (10,000), AGORA_SOAK_RATE (tasks/s, 15: below what this 2-core machine
decides per second, so the run is steady rather than a growing backlog).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agora.core.escalation.context import EscalationContext
from agora.core.escalation.record import ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.limits import MAX_PAGE_SIZE
from agora.harness import LocalCluster, ServiceReplica
from agora.harness.processes import ManagedProcess
from agora.harness.system import CONSOLE, RECORDER, SERVICES

TASKS = int(os.environ.get("AGORA_SOAK_TASKS", "10000"))
RATE = float(os.environ.get("AGORA_SOAK_RATE", "15"))
ESCALATE_EVERY = 20
RETENTION_S = int(os.environ.get("AGORA_SOAK_RETENTION_SECONDS", "120"))
ACTOR_IDLE_S = int(os.environ.get("AGORA_SOAK_ACTOR_IDLE_SECONDS", "60"))
SAMPLE_EVERY_S = 5.0
WARM_UP_S = RETENTION_S + 2 * ACTOR_IDLE_S + 30
"""Memory and keys "after warm-up": from this long after the first task. By then the first
tasks' records have expired, and their actors (and those of escalations, woken once more by
their expiry) have gone idle and been deactivated (idle time, plus Dapr's scan every 30 s):
every kind of record and in-memory actor is being dropped as fast as new ones come."""
RESULTS = Path(__file__).parent / "results" / "soak.json"
TERMINAL = ("COMPLETED", "FAILED", "PARTIAL", "REJECTED")
CLIENT = httpx.Client(limits=httpx.Limits(max_connections=8), timeout=30)


@dataclass
class Sample:
    at_s: float
    published: int
    rss_mb: dict[str, float]
    redis_keys: int


@dataclass
class Soak:
    cluster: LocalCluster
    console: ServiceReplica
    samples: list[Sample] = field(default_factory=list)
    decided: int = 0
    started: float = field(default_factory=time.monotonic)
    published: int = 0


def _rss_mb(processes: list[ManagedProcess]) -> dict[str, float]:
    found = {}
    for process in processes:
        if process.pid is None or process.name.startswith(("recorder", "jaeger")):
            continue
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
        except OSError:
            continue
        kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        found[process.name] = round(kb / 1024, 1)
    return found


def _redis_keys(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"DBSIZE\r\n")
        answer = sock.recv(64).decode()
    assert answer.startswith(":"), answer
    return int(answer[1:].strip())


def _key_kinds(port: int) -> dict[str, int]:
    """Keys in Redis by kind: an actor type's state (`<app>||<type>||<id>||state`), or the
    app and namespace of a plain key (`<app>||<namespace>:...`), or a stream (topic)."""
    listed = subprocess.run(
        [shutil.which("redis-cli") or "redis-cli", "-h", "127.0.0.1", "-p", str(port), "--scan"],
        capture_output=True, text=True, check=False, timeout=120,
    ).stdout.split()  # fmt: skip
    kinds: Counter[str] = Counter()
    for key in listed:
        parts = key.split("||")
        if len(parts) >= 4:
            kinds[f"actor {parts[1]}"] += 1
        elif len(parts) == 2:
            kinds[f"{parts[0]} {parts[1].split(':')[0]}"] += 1
        else:
            kinds["topic streams and other"] += 1
    return dict(kinds.most_common())


def _sample(soak: Soak) -> None:
    assert soak.cluster.redis_port is not None
    soak.samples.append(
        Sample(
            at_s=round(time.monotonic() - soak.started, 1),
            published=soak.published,
            rss_mb=_rss_mb(list(soak.cluster.processes())),
            redis_keys=_redis_keys(soak.cluster.redis_port),
        )
    )


def _decide_waiting(soak: Soak) -> None:
    """A person skips every escalation that waits."""
    url = soak.console.invoke_url(
        f"v1/escalations?status=WAITING_FOR_HUMAN&limit={MAX_PAGE_SIZE}", "escalation"
    )
    for record in CLIENT.get(url).json()["escalations"]:
        resume = soak.console.invoke_url(f"v1/escalations/{record['escalation_id']}/resume", "escalation")
        answer = CLIENT.post(
            resume, json={"decision": {"kind": "escalation", "action": "skip"}, "who": "soak"}
        )
        soak.decided += answer.status_code == 200


def _park(soak: Soak, escalation_id: str) -> None:
    request = ParkRequest(
        waiting_party=WaitingParty(kind=WaitingPartyKind.SESSION, id=escalation_id),
        context=EscalationContext(
            job_id=escalation_id,
            step=1,
            validation_results=[],
            confidence=0.3,
            retry_count=0,
            error_history=[],
            prompt_used="Reconcile the ledger against the bank statement",
            output_summary="Two entries do not match; not sure which one is right",
        ),
        who="soak",
        why="low confidence",
    )
    url = soak.console.invoke_url(f"v1/escalations/{escalation_id}", "escalation")
    with_retries(lambda: CLIENT.put(url, json=request.model_dump(mode="json")))


def with_retries(send: Callable[[], httpx.Response], attempts: int = 6) -> None:
    """As a client should: a transient failure (a 5xx, a dropped connection) is tried again
    with backoff; parking and publishing with the same id are idempotent."""
    for attempt in range(attempts):
        try:
            send().raise_for_status()
            return
        except httpx.HTTPError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * 2**attempt)


def _listed(soak: Soak, status: str) -> set[str] | None:
    """The task ids in `status`; None when the board did not answer this time (busy)."""
    url = soak.console.invoke_url(f"v1/tasks?status={status}", "taskboard")
    try:
        return set(CLIENT.get(url).json()["task_ids"])
    except (httpx.HTTPError, KeyError, ValueError):
        return None


def _watch(soak: Soak, stop: threading.Event) -> None:
    while not stop.wait(SAMPLE_EVERY_S):
        _sample(soak)
        try:
            _decide_waiting(soak)
        except (httpx.HTTPError, KeyError, ValueError) as exc:  # busy: the person tries again
            print(f"  soak: deciding escalations failed this time ({exc!r:.200})", flush=True)


def _publish(soak: Soak, task_id: str) -> None:
    spec = {
        "task_id": task_id,
        "description": f"Reconcile ledger {task_id} against the bank statement",
        "required_skills": ["web_search"],
        "min_success_threshold": 0.0,
    }
    url = f"{soak.console.dapr_http}/v1.0/publish/agora-pubsub/agora.tasks"
    with_retries(lambda: CLIENT.post(url, json=spec))


def run(soak: Soak) -> dict[str, Any]:
    batch = uuid.uuid4().hex[:6]
    ids = [f"soak-{batch}-{i:05d}" for i in range(TASKS)]
    _sample(soak)
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(soak, stop), daemon=True)
    watcher.start()
    began = time.monotonic()
    warm_index = 0
    for i, task_id in enumerate(ids):
        # Steady: task i leaves at i / RATE seconds after the start, however long a publish took.
        time.sleep(max(0.0, began + i / RATE - time.monotonic()))
        _publish(soak, task_id)
        if i % ESCALATE_EVERY == 0:
            _park(soak, f"esc-{task_id}")
        soak.published = i + 1
        if not warm_index and time.monotonic() - began >= WARM_UP_S:
            warm_index = len(soak.samples)
        if (i + 1) % 1000 == 0:
            print(f"  soak: {i + 1} of {TASKS} tasks published", flush=True)
    published_in = time.monotonic() - began
    # Every task ends: the last ones finish, parked ones are decided. Tasks past their
    # retention are already gone from the listings, so count what is still unfinished.
    deadline = time.monotonic() + 600
    unfinished: set[str] = set(ids)
    while time.monotonic() < deadline:
        listings = [_listed(soak, status) for status in ("PENDING", "BIDDING", "ALLOCATED")]
        if all(listing is not None for listing in listings):
            unfinished = set().union(*(listing or set() for listing in listings)) & set(ids)
            if not unfinished:
                break
        time.sleep(2)
    settled_in = time.monotonic() - began
    _sample(soak)
    stop.set()
    watcher.join()
    figures = _figures(soak, warm_index, published_in, settled_in, len(unfinished))
    assert soak.cluster.redis_port is not None
    figures["redis_keys"]["end_by_kind"] = _key_kinds(soak.cluster.redis_port)
    return figures


def _figures(
    soak: Soak, warm_index: int, published_in: float, settled_in: float, unfinished: int
) -> dict[str, Any]:
    start, warm, end = soak.samples[0], soak.samples[warm_index], soak.samples[-1]
    memory = {
        name: {
            "start_mb": start.rss_mb.get(name),
            "warm_mb": warm.rss_mb.get(name),
            "end_mb": end.rss_mb.get(name),
            "growth_after_warm_up_pct": round((end.rss_mb[name] / warm.rss_mb[name] - 1) * 100, 1)
            if name in warm.rss_mb and name in end.rss_mb
            else None,
        }
        for name in sorted(end.rss_mb)
    }
    after_warm = [s.redis_keys for s in soak.samples[warm_index:]]
    return {
        "tasks": TASKS,
        "rate_per_s": RATE,
        "retention_s": RETENTION_S,
        "actor_idle_s": ACTOR_IDLE_S,
        "warm_up_s": WARM_UP_S,
        "published_in_s": round(published_in, 1),
        "settled_in_s": round(settled_in, 1),
        "tasks_per_s": round(TASKS / settled_in, 1),
        "unfinished": unfinished,
        "escalations_decided": soak.decided,
        "memory": memory,
        "largest_growth_after_warm_up_pct": max(
            (
                m["growth_after_warm_up_pct"]
                for name, m in memory.items()
                if name.endswith(("-app", "-daprd")) and m["growth_after_warm_up_pct"] is not None
            ),
            default=None,
        ),
        "redis_keys": {
            "start": start.redis_keys,
            "warm": warm.redis_keys,
            "max_after_warm_up": max(after_warm),
            "median_after_warm_up": statistics.median(after_warm),
            "end": end.redis_keys,
        },
        "samples": [s.__dict__ for s in soak.samples],
    }


def main() -> None:
    print(f"soak: {TASKS} tasks at {RATE:g}/s, retention {RETENTION_S} s")
    env = {
        "AGORA_RETENTION_SECONDS": str(RETENTION_S),
        "AGORA_DEDUPE_TTL_SECONDS": str(RETENTION_S),
        "AGORA_ACTOR_IDLE_SECONDS": str(ACTOR_IDLE_S),
    }
    with LocalCluster(
        "redis", run_dir=Path(tempfile.mkdtemp(prefix="agora-soak-")), extra_env=env
    ) as cluster:
        for spec in [*SERVICES, RECORDER, CONSOLE]:
            cluster.add_service(spec)
        soak = Soak(cluster, next(r for r in cluster.replicas if r.spec.app_id == "console"))
        figures = run(soak)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    keys = figures["redis_keys"]
    print(
        f"soak: {figures['tasks_per_s']} tasks/s, {figures['unfinished']} unfinished, "
        f"{figures['escalations_decided']} escalations decided"
    )
    print(
        f"  redis keys: warm {keys['warm']}, max after warm-up {keys['max_after_warm_up']}, end {keys['end']}"
    )
    largest = figures["largest_growth_after_warm_up_pct"]
    print(f"  largest memory growth after warm-up (apps, sidecars): {largest} %")
    for name, m in figures["memory"].items():
        print(
            f"  {name:24s} {m['start_mb']} → {m['warm_mb']} → {m['end_mb']} MB "
            f"({m['growth_after_warm_up_pct']} %)"
        )


if __name__ == "__main__":
    main()
