"""Flood: 5,000 tasks published at once (16 client threads, one pooled client) into the whole
system (redis profile, every service its own app). Shows that overload is absorbed where it is
meant to be, in the broker and the board, not in the services' memory: the allocator keeps at
most AGORA_MAX_IN_FLIGHT allocations under way, the worker AGORA_MAX_RUNS_IN_FLIGHT runs; the
rest waits unacknowledged in Redis (PENDING on the board) or as run reminders (ALLOCATED).

Figures: how long publishing took and how long until every task was decided and ended; the
largest number of tasks PENDING and ALLOCATED at once; resident memory of the allocator, the
task board and the worker (app and sidecar) idle, at their peak and at the end.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from agora.harness import LocalCluster, ServiceReplica
from agora.harness.system import CONSOLE, RECORDER, SERVICES
from bench.soak import with_retries

TASKS = int(os.environ.get("AGORA_FLOOD_TASKS", "5000"))
CLIENT_THREADS = 16
SAMPLE_EVERY_S = 2.0
WATCHED = ("allocator-0-app", "allocator-0-daprd", "taskboard-0-app", "worker-0-app", "worker-0-daprd")
RESULTS = Path(__file__).parent / "results" / "flood.json"
CLIENT = httpx.Client(limits=httpx.Limits(max_connections=CLIENT_THREADS), timeout=60)


def _rss_mb(cluster: LocalCluster) -> dict[str, float]:
    found = {}
    for process in cluster.processes():
        if process.name not in WATCHED or process.pid is None:
            continue
        status = Path(f"/proc/{process.pid}/status").read_text()
        kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        found[process.name] = round(kb / 1024, 1)
    return found


def _count(console: ServiceReplica, status: str, ids: set[str]) -> int:
    url = console.invoke_url(f"v1/tasks?status={status}", "taskboard")
    return len(set(CLIENT.get(url).json()["task_ids"]) & ids)


def main() -> None:
    print(f"flood: {TASKS} tasks at once")
    with LocalCluster("redis", run_dir=Path(tempfile.mkdtemp(prefix="agora-flood-"))) as cluster:
        for spec in [*SERVICES, RECORDER, CONSOLE]:
            cluster.add_service(spec)
        console = next(r for r in cluster.replicas if r.spec.app_id == "console")
        idle = _rss_mb(cluster)
        batch = uuid.uuid4().hex[:6]
        ids = [f"flood-{batch}-{i:05d}" for i in range(TASKS)]
        samples: list[dict[str, Any]] = []
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(SAMPLE_EVERY_S):
                try:
                    samples.append(
                        {
                            "rss_mb": _rss_mb(cluster),
                            "pending": _count(console, "PENDING", set(ids)),
                            "allocated": _count(console, "ALLOCATED", set(ids)),
                        }
                    )
                except (httpx.HTTPError, KeyError, ValueError):
                    continue  # a busy board: the next sample counts

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        started = time.monotonic()
        url = f"{console.dapr_http}/v1.0/publish/agora-pubsub/agora.tasks"

        def publish(task_id: str) -> None:
            spec = {
                "task_id": task_id,
                "description": "Summarise the report",
                "required_skills": ["web_search"],
            }
            with_retries(lambda: CLIENT.post(url, json=spec))

        with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
            list(pool.map(publish, ids))
        published_in = time.monotonic() - started
        print(f"  flood: published in {published_in:.1f} s", flush=True)
        deadline = time.monotonic() + 1800
        unfinished = TASKS
        while time.monotonic() < deadline:
            try:
                unfinished = sum(_count(console, s, set(ids)) for s in ("PENDING", "BIDDING", "ALLOCATED"))
            except (httpx.HTTPError, KeyError, ValueError):
                unfinished = TASKS
            if unfinished == 0:
                break
            time.sleep(5)
        ended_in = time.monotonic() - started
        stop.set()
        watcher.join()
        end = _rss_mb(cluster)
    peak = {name: max(s["rss_mb"].get(name, 0.0) for s in samples) for name in WATCHED}
    memory = {name: {"idle": idle.get(name), "peak": peak[name], "end": end.get(name)} for name in WATCHED}
    figures: dict[str, Any] = {
        "tasks": TASKS,
        "published_in_s": round(published_in, 1),
        "all_ended_in_s": round(ended_in, 1),
        "unfinished": unfinished,
        "tasks_per_s": round(TASKS / ended_in, 1),
        "max_pending": max((s["pending"] for s in samples), default=0),
        "max_allocated": max((s["allocated"] for s in samples), default=0),
        "rss_mb": {
            name: {"idle": idle.get(name), "peak": peak[name], "end": end.get(name)} for name in WATCHED
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(
        f"flood: {TASKS} tasks published in {figures['published_in_s']} s, all ended after "
        f"{figures['all_ended_in_s']} s ({figures['tasks_per_s']}/s, {unfinished} unfinished); at most "
        f"{figures['max_pending']} PENDING and {figures['max_allocated']} ALLOCATED at once"
    )
    for name, m in memory.items():
        print(f"  {name:20s} idle {m['idle']} MB, peak {m['peak']} MB, end {m['end']} MB")


if __name__ == "__main__":
    main()
