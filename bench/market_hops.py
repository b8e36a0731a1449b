"""Where a task's time goes: single tasks on an idle system (redis profile, every service its own
app), one at a time, each traced end to end; the latency from the publish call to the award
reaching a subscriber, and from the traces the time of each hop (the median duration of each
span name over the tasks, by service), the slowest first. The baseline, in the same run and at
the same pace: one bare Dapr publish → subscribe round trip at a time, through the same sidecar
to the same subscriber.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from agora.harness import LocalCluster, ServiceSpec
from agora.harness.system import RECORDER, SERVICES
from bench.market_e2e import DECISION_TOPICS, ECHO_TOPIC, _publish, _wait_for

TASKS = 30
PAUSE_S = 0.5
HOPS_SHOWN = 15
RESULTS = Path(__file__).parent / "results" / "market_hops.json"


def _traces(jaeger: str, task_ids: set[str]) -> list[list[dict[str, Any]]]:
    """The spans of each task's trace (found by the allocator's intake span for the task)."""
    found: dict[str, list[dict[str, Any]]] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(found) < len(task_ids):
        answer = httpx.get(
            f"{jaeger}/api/traces",
            params={"service": "allocator", "operation": "market.allocate", "limit": str(TASKS * 4)},
            timeout=30,
        ).json()
        for trace in answer.get("data") or []:
            processes = {key: p["serviceName"] for key, p in trace["processes"].items()}
            spans = [{**span, "service": processes[span["processID"]]} for span in trace["spans"]]
            for span in spans:
                tags = {tag["key"]: tag["value"] for tag in span.get("tags", [])}
                if span["operationName"] == "market.allocate" and tags.get("task_id") in task_ids:
                    found[str(tags["task_id"])] = spans
        time.sleep(2)
    return list(found.values())


def _hops(traces: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Median duration (ms) of each (service, span name) over the traces; a name that occurs
    several times in a trace counts its total."""
    per_trace: dict[tuple[str, str], list[float]] = defaultdict(list)
    for spans in traces:
        totals: dict[tuple[str, str], float] = defaultdict(float)
        for span in spans:
            totals[(span["service"], span["operationName"])] += span["duration"] / 1000
        for key, total in totals.items():
            per_trace[key].append(total)
    rows = [
        {
            "service": service,
            "span": name,
            "median_ms": round(statistics.median(values), 2),
            "traces": len(values),
        }
        for (service, name), values in per_trace.items()
        if len(values) >= len(traces) // 2
    ]
    return sorted(rows, key=lambda row: -float(row["median_ms"]))


def main() -> None:
    recorder_spec = ServiceSpec(
        RECORDER.app_id,
        RECORDER.module,
        env={"AGORA_RECORD_TOPICS": ",".join(f"agora-pubsub/{t}" for t in (*DECISION_TOPICS, ECHO_TOPIC))},
    )
    run_dir = Path(tempfile.mkdtemp(prefix="agora-bench-hops-"))
    with LocalCluster(
        "redis", run_dir=run_dir, jaeger=True, extra_env={"OTEL_BSP_SCHEDULE_DELAY": "200"}
    ) as cluster:
        for spec in SERVICES:
            cluster.add_service(spec)
        [recorder] = cluster.add_service(recorder_spec)
        allocator = next(r for r in cluster.replicas if r.spec.app_id == "allocator")
        run = uuid.uuid4().hex[:6]
        latencies: list[float] = []
        task_ids: set[str] = set()
        for i in range(TASKS + 3):
            task_id = f"hop-{run}-{i:03d}"
            task = {
                "task_id": task_id,
                "description": "Summarise this week's papers on agent coordination",
                "required_skills": ["web_search"],
                "preferred_skills": ["summarize"],
                "min_success_threshold": 0.0,
            }
            sent = _publish(allocator, "agora.tasks", task)
            arrived = _wait_for(recorder, DECISION_TOPICS, "task_id", {task_id})[task_id]
            if i >= 3:  # the first few warm the connections and caches
                latencies.append((arrived - sent) * 1000)
                task_ids.add(task_id)
            time.sleep(PAUSE_S)
        echoes: list[float] = []
        for i in range(TASKS + 3):
            echo_id = f"echo-{run}-{i:03d}"
            sent = _publish(allocator, ECHO_TOPIC, {"echo_id": echo_id})
            arrived = _wait_for(recorder, (ECHO_TOPIC,), "echo_id", {echo_id})[echo_id]
            if i >= 3:
                echoes.append((arrived - sent) * 1000)
            time.sleep(PAUSE_S)
        hops = _hops(_traces(cluster.jaeger_query_url, task_ids))

    result = {
        "benchmark": "one task at a time on an idle system (redis profile, real sidecars, traced)",
        "tasks": len(latencies),
        "publish_to_award_p50_ms": round(statistics.median(latencies), 1),
        "publish_to_award_max_ms": round(max(latencies), 1),
        "bare_publish_to_subscribe_p50_ms": round(statistics.median(echoes), 1),
        "hops": hops,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    p50 = result["publish_to_award_p50_ms"]
    bare = result["bare_publish_to_subscribe_p50_ms"]
    print(f"one task at a time, {len(latencies)} tasks: publish → award p50 {p50} ms")
    print(f"bare publish → subscribe, one at a time: p50 {bare} ms")
    print(f"{'service':<12} {'span':<60} {'median ms':>10}")
    for row in hops[:HOPS_SHOWN]:
        print(f"{row['service']:<12} {row['span'][:60]:<60} {row['median_ms']:>10}")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
