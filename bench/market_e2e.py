"""End-to-end market throughput and latency through real sidecars (redis profile, every service
its own app).

Burst: 1,000 tasks are published to `agora.tasks` from 16 client threads sharing one pooled
HTTP client; a task's latency runs from its publish call to the moment its
`agora.task.awarded` / `agora.task.rejected` event reaches a subscriber (the topic recorder
app), and throughput is tasks decided per second over the burst. Every task must be decided,
and none twice (two different decisions for one task).

Idle: single tasks, one at a time, from publish to decision.

Where the burst's time goes: the CPU seconds each process of the system (every app, every
sidecar, placement, scheduler, Redis) used while the burst was decided, per task.

Baseline, in the same run and the same way: a bare Dapr publish → subscribe through the same
sidecar to the same subscriber, as a burst of 1,000 events from the same 16 threads and pooled
client, and one event at a time. The market's rate is reported as a ratio to it.
"""

from __future__ import annotations

import concurrent.futures
import json
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.system import RECORDER, SERVICES
from bench.cpu import cpu_seconds

TASKS = 1000
ECHOES = 1000
IDLE_SAMPLES = 30
IDLE_PAUSE_S = 0.3
CLIENT_THREADS = 16
ECHO_TOPIC = "agora.bench.echo"
RESULTS = Path(__file__).parent / "results" / "market_e2e.json"
DECISION_TOPICS = ("agora.task.awarded", "agora.task.rejected")
PUBLISHER = httpx.Client(limits=httpx.Limits(max_connections=CLIENT_THREADS), timeout=30)
"""One pooled client for every publish: connections are reused, as a real producer would."""


def _publish(replica: ServiceReplica, topic: str, data: dict[str, Any]) -> float:
    sent_at = time.time()
    url = f"{replica.dapr_http}/v1.0/publish/agora-pubsub/{topic}"
    PUBLISHER.post(url, json=data).raise_for_status()
    return sent_at


def _arrivals(recorder: ServiceReplica, topic: str) -> list[dict[str, Any]]:
    return list(PUBLISHER.get(f"{recorder.app_url}/v1/arrivals/{topic}").json()["arrivals"])


def _burst(replica: ServiceReplica, topic: str, payloads: list[dict[str, Any]], key: str) -> dict[str, float]:
    with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
        sent = pool.map(lambda p: (p[key], _publish(replica, topic, p)), payloads)
        return dict(sent)


def _wait_for(
    recorder: ServiceReplica, topics: tuple[str, ...], key: str, ids: set[str], timeout_s: float = 300
) -> dict[str, float]:
    """When each id first arrived on any of `topics`."""
    deadline = time.monotonic() + timeout_s
    seen: dict[str, float] = {}
    while time.monotonic() < deadline:
        seen = {}
        for topic in topics:
            for arrival in _arrivals(recorder, topic):
                item = arrival["payload"].get(key)
                if item in ids:
                    seen[item] = min(seen.get(item, arrival["received_at"]), arrival["received_at"])
        if len(seen) == len(ids):
            return seen
        time.sleep(0.2)
    raise TimeoutError(f"only {len(seen)} of {len(ids)} arrived")


def _decisions(recorder: ServiceReplica, task_ids: set[str]) -> dict[str, set[tuple[str, str]]]:
    """The distinct decisions announced per task: (topic, winning agent or '')."""
    decided: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for topic in DECISION_TOPICS:
        for arrival in _arrivals(recorder, topic):
            payload = arrival["payload"]
            if payload.get("task_id") in task_ids:
                decided[payload["task_id"]].add((topic, str(payload.get("agent_id", ""))))
    return decided


def _summary(sent: dict[str, float], arrived: dict[str, float]) -> dict[str, float]:
    latencies = sorted((arrived[k] - sent[k]) * 1000 for k in sent)
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    span = max(arrived.values()) - min(sent.values())
    return {
        "count": len(latencies),
        "p50_ms": round(cuts[49], 1),
        "p99_ms": round(cuts[98], 1),
        "max_ms": round(latencies[-1], 1),
        "per_second": round(len(latencies) / span, 1),
    }


def _one_at_a_time(
    replica: ServiceReplica,
    recorder: ServiceReplica,
    topic: str,
    payloads: list[dict[str, Any]],
    key: str,
    answer_topics: tuple[str, ...],
) -> float:
    """p50 (ms) from publish to arrival, one message at a time on an otherwise idle system."""
    latencies = []
    for payload in payloads:
        sent = _publish(replica, topic, payload)
        arrived = _wait_for(recorder, answer_topics, key, {payload[key]})[payload[key]]
        latencies.append((arrived - sent) * 1000)
        time.sleep(IDLE_PAUSE_S)
    return round(statistics.median(latencies), 1)


def task_payloads(prefix: str, count: int) -> list[dict[str, Any]]:
    return [
        {
            "task_id": f"{prefix}-{i:04d}",
            "description": "Summarise this week's papers on agent coordination",
            "required_skills": ["web_search"],
            "preferred_skills": ["summarize"],
            "min_success_threshold": 0.0,
        }
        for i in range(count)
    ]


def main() -> None:
    recorder_spec = ServiceSpec(
        RECORDER.app_id,
        RECORDER.module,
        env={"AGORA_RECORD_TOPICS": ",".join(f"agora-pubsub/{t}" for t in (*DECISION_TOPICS, ECHO_TOPIC))},
    )
    with LocalCluster("redis", run_dir=Path(tempfile.mkdtemp(prefix="agora-bench-"))) as cluster:
        for spec in SERVICES:
            cluster.add_service(spec)
        [recorder] = cluster.add_service(recorder_spec)
        allocator = next(r for r in cluster.replicas if r.spec.app_id == "allocator")
        run = uuid.uuid4().hex[:6]

        warm = task_payloads(f"warm-{run}", 20)
        _wait_for(
            recorder, DECISION_TOPICS, "task_id", set(_burst(allocator, "agora.tasks", warm, "task_id"))
        )

        # One at a time first, while the system is idle (after a burst, its tasks' executions
        # and outcomes keep the services busy for a while).
        idle_tasks = task_payloads(f"idle-{run}", IDLE_SAMPLES)
        idle_p50 = _one_at_a_time(allocator, recorder, "agora.tasks", idle_tasks, "task_id", DECISION_TOPICS)
        idle_echoes = [{"echo_id": f"idle-echo-{run}-{i:03d}"} for i in range(IDLE_SAMPLES)]
        idle_echo_p50 = _one_at_a_time(allocator, recorder, ECHO_TOPIC, idle_echoes, "echo_id", (ECHO_TOPIC,))

        echoes = [{"echo_id": f"echo-{run}-{i:04d}"} for i in range(ECHOES)]
        echo_sent = _burst(allocator, ECHO_TOPIC, echoes, "echo_id")
        echo = _summary(echo_sent, _wait_for(recorder, (ECHO_TOPIC,), "echo_id", set(echo_sent)))

        processes = list(cluster.processes())
        cpu_before = cpu_seconds(processes)
        burst = task_payloads(f"burst-{run}", TASKS)
        task_sent = _burst(allocator, "agora.tasks", burst, "task_id")
        market = _summary(task_sent, _wait_for(recorder, DECISION_TOPICS, "task_id", set(task_sent)))
        cpu_after = cpu_seconds(processes)
        cpu_ms_per_task = {
            name: round((cpu_after[name] - cpu_before.get(name, 0.0)) * 1000 / TASKS, 1) for name in cpu_after
        }
        decided = _decisions(recorder, set(task_sent))
        decided_twice = sorted(task for task, decisions in decided.items() if len(decisions) > 1)
        lost = sorted(set(task_sent) - set(decided))

    market_to_bare = round(market["per_second"] / echo["per_second"], 2)
    result = {
        "benchmark": "market end to end (redis profile, every service its own app, real sidecars)",
        "client_threads": CLIENT_THREADS,
        "burst": {
            "publish_to_decision": market,
            "bare_publish_to_subscribe": echo,
            "market_to_bare_rate": market_to_bare,
            "tasks_lost": len(lost),
            "tasks_decided_twice": len(decided_twice),
            "cpu_ms_per_task": dict(sorted(cpu_ms_per_task.items(), key=lambda item: -item[1])),
            "cpu_ms_per_task_total": round(sum(cpu_ms_per_task.values()), 1),
        },
        "one_at_a_time": {
            "samples": IDLE_SAMPLES,
            "publish_to_decision_p50_ms": idle_p50,
            "bare_publish_to_subscribe_p50_ms": idle_echo_p50,
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"market end to end: a burst of {TASKS} tasks from {CLIENT_THREADS} client threads (redis profile)")
    print(f"{'':<28} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'per s':>7}")
    for name, row in (("publish → award/reject", market), ("bare publish → subscribe", echo)):
        print(f"{name:<28} {row['p50_ms']:>8} {row['p99_ms']:>8} {row['max_ms']:>8} {row['per_second']:>7}")
    print(
        f"market rate / bare rate: {market_to_bare}; lost: {len(lost)}, decided twice: {len(decided_twice)}"
    )
    print(
        f"one at a time ({IDLE_SAMPLES}): publish → decision p50 {idle_p50} ms, "
        f"bare publish → subscribe p50 {idle_echo_p50} ms"
    )
    ranked = sorted(cpu_ms_per_task.items(), key=lambda item: -item[1])
    busiest = ", ".join(f"{name} {ms}" for name, ms in ranked[:6])
    print(f"CPU per task during the burst: {sum(cpu_ms_per_task.values()):.1f} ms (busiest: {busiest})")
    print(f"written to {RESULTS}")
    if lost or decided_twice:
        raise SystemExit(f"tasks lost: {lost[:10]}; decided twice: {decided_twice[:10]}")


if __name__ == "__main__":
    main()
