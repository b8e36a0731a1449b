"""End-to-end market latency through real sidecars (redis profile, every service its own app).

200 tasks are published to `agora.tasks` from 8 client threads; the latency of a task is from
its publish call to the moment its `agora.task.awarded` / `agora.task.rejected` event reaches a
subscriber (the topic recorder app), and throughput is tasks decided per second over the
burst. For scale, the same run measures a bare Dapr publish → subscribe round trip: 200 events
published through the same sidecar to a topic the recorder subscribes to.
"""

from __future__ import annotations

import concurrent.futures
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.system import RECORDER, SERVICES

TASKS = 200
ECHOES = 200
CLIENT_THREADS = 8
ECHO_TOPIC = "agora.bench.echo"
RESULTS = Path(__file__).parent / "results" / "market_e2e.json"
DECISION_TOPICS = ("agora.task.awarded", "agora.task.rejected")


def _publish(replica: ServiceReplica, topic: str, data: dict[str, Any]) -> float:
    sent_at = time.time()
    url = f"{replica.dapr_http}/v1.0/publish/agora-pubsub/{topic}"
    httpx.post(url, json=data, timeout=30).raise_for_status()
    return sent_at


def _arrivals(recorder: ServiceReplica, topic: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{recorder.app_url}/v1/arrivals/{topic}", timeout=30).json()["arrivals"])


def _burst(replica: ServiceReplica, topic: str, payloads: list[dict[str, Any]], key: str) -> dict[str, float]:
    with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
        sent = pool.map(lambda p: (p[key], _publish(replica, topic, p)), payloads)
        return dict(sent)


def _wait_for(recorder: ServiceReplica, topics: tuple[str, ...], key: str, ids: set[str]) -> dict[str, float]:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        seen = {
            a["payload"][key]: a["received_at"]
            for topic in topics
            for a in _arrivals(recorder, topic)
            if a["payload"].get(key) in ids
        }
        if len(seen) == len(ids):
            return seen
        time.sleep(0.5)
    raise TimeoutError(f"only {len(seen)} of {len(ids)} arrived")


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

        def tasks(prefix: str, count: int) -> list[dict[str, Any]]:
            return [
                {
                    "task_id": f"{prefix}-{run}-{i:04d}",
                    "description": "Summarise this week's papers on agent coordination",
                    "required_skills": ["web_search"],
                    "preferred_skills": ["summarize"],
                    "min_success_threshold": 0.0,
                }
                for i in range(count)
            ]

        warm = tasks("warm", 10)
        warmed = set(_burst(allocator, "agora.tasks", warm, "task_id"))
        _wait_for(recorder, DECISION_TOPICS, "task_id", warmed)

        echoes = [{"echo_id": f"echo-{run}-{i:04d}"} for i in range(ECHOES)]
        echo_sent = _burst(allocator, ECHO_TOPIC, echoes, "echo_id")
        echo = _summary(echo_sent, _wait_for(recorder, (ECHO_TOPIC,), "echo_id", set(echo_sent)))

        burst = tasks("bench", TASKS)
        task_sent = _burst(allocator, "agora.tasks", burst, "task_id")
        market = _summary(task_sent, _wait_for(recorder, DECISION_TOPICS, "task_id", set(task_sent)))

    result = {
        "benchmark": "market end to end (redis profile, real sidecars)",
        "client_threads": CLIENT_THREADS,
        "publish_to_decision": market,
        "bare_publish_to_subscribe": echo,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"market end to end, {TASKS} tasks from {CLIENT_THREADS} client threads (redis profile)")
    print(f"{'':<28} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'per s':>7}")
    for name, row in (("publish → award/reject", market), ("bare publish → subscribe", echo)):
        print(f"{name:<28} {row['p50_ms']:>8} {row['p99_ms']:>8} {row['max_ms']:>8} {row['per_second']:>7}")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
