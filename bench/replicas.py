"""Throughput of two replicas of every service beside one, in the same run (redis profile, real
sidecars).

The same burst (2,000 tasks, AGORA_BENCH_REPLICA_TASKS to change it) from the same 16 client
threads, first on a system with one replica of every service (the baseline), then on a fresh
system with two of each: tasks decided per second, publish → decision latency, how long after
the last decision the board holds every task's end, and the CPU a task costs summed over every
process of its system (each replica's app and sidecar, placement, scheduler, Redis). Every task
must be decided, and none twice.

Both systems share the machine's cores: on a 2-core machine a second replica adds processes to
schedule, not cores to run them on, so what this measures there is the cost of running two
(coordination through placement, consumer groups, the sweeps every replica runs), not the
headroom two would have on two machines.

A quick check of the code: AGORA_BENCH_REPLICA_TASKS=20 AGORA_BENCH_RESULTS=/tmp/replicas.json
python -m bench.replicas
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

from agora.harness import LocalCluster
from bench.market_e2e import CLIENT_THREADS, MarketBurst, market_burst, start_market

TASKS = int(os.environ.get("AGORA_BENCH_REPLICA_TASKS", "2000"))
RESULTS = Path(os.environ.get("AGORA_BENCH_RESULTS") or Path(__file__).parent / "results" / "replicas.json")


def _burst_on(replicas: int, run: str) -> MarketBurst:
    with LocalCluster("redis", run_dir=Path(tempfile.mkdtemp(prefix=f"agora-bench-x{replicas}-"))) as cluster:
        allocator, recorder = start_market(cluster, f"warm-x{replicas}-{run}", replicas)
        return market_burst(cluster, allocator, recorder, f"x{replicas}-{run}", TASKS)


def _figures(burst: MarketBurst) -> dict[str, Any]:
    decided = burst.decided
    return {
        "publish_to_decision": decided,
        "last_end_after_last_decision_s": round(burst.ends_after_s, 1),
        "cpu_ms_per_task_whole_life_total": round(sum(burst.whole_life.values()), 1),
        "cpu_ms_per_task_to_decision_total": round(sum(burst.to_decision.values()), 1),
        "tasks_lost": len(burst.lost),
        "tasks_decided_twice": len(burst.decided_twice),
        "cpu_ms_per_task_whole_life": burst.whole_life,
    }


def main() -> None:
    run = uuid.uuid4().hex[:6]
    one = _burst_on(1, run)
    two = _burst_on(2, run)
    result = {
        "benchmark": "two replicas of every service beside one (redis profile, real sidecars)",
        "tasks": TASKS,
        "client_threads": CLIENT_THREADS,
        "cores": os.cpu_count(),
        "one_replica": _figures(one),
        "two_replicas": _figures(two),
        "rate_two_to_one": round(two.decided["per_second"] / one.decided["per_second"], 3),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"replicas: a burst of {TASKS} tasks from {CLIENT_THREADS} client threads, {os.cpu_count()} cores")
    print(f"{'':<24} {'p50 ms':>8} {'p99 ms':>8} {'per s':>7} {'CPU ms each':>12} {'ends after s':>13}")
    for name, burst in (("one of every service", one), ("two of every service", two)):
        d, figures = burst.decided, _figures(burst)
        cpu, ends = figures["cpu_ms_per_task_whole_life_total"], figures["last_end_after_last_decision_s"]
        print(f"{name:<24} {d['p50_ms']:>8} {d['p99_ms']:>8} {d['per_second']:>7} {cpu:>12} {ends:>13}")
    print(f"rate of two / rate of one: {result['rate_two_to_one']}; written to {RESULTS}")
    problems = [
        f"{name}: lost {burst.lost[:10]}, decided twice {burst.decided_twice[:10]}"
        for name, burst in (("one", one), ("two", two))
        if burst.lost or burst.decided_twice
    ]
    if problems:
        raise SystemExit("; ".join(problems))


if __name__ == "__main__":
    main()
