"""A graph's overhead per node as a durable run (redis profile, an agent app beside its own
daprd, Dapr Workflow): a 10-node chain of trivial nodes, run one at a time, against the same
nodes called in the benchmark's own process in the same run. CPU per node is summed over every
process of the cluster (the agent app, its sidecar, placement, scheduler, Redis)."""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import httpx

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.sdk import GraphState
from bench.cpu import cpu_seconds
from bench.graph_app import NODES, chain

RUNS = 30
POLL_S = 0.1
RESULTS = Path(__file__).parent / "results" / "graph_run.json"
APP = ServiceSpec(
    "agents", "agora.sdk", env={"AGORA_AGENTS_FILE": str(Path(__file__).parent / "graph_app.py")}
)


def run_graph(http: httpx.Client, app: ServiceReplica, run_id: str) -> float:
    """Start a run and wait until it completed: seconds from its start to its last step, as the
    run's record states them (the app's clock), so the polling does not blur the figure."""
    url = app.invoke_url(f"v1/graphs/ten/runs/{run_id}", "agents")
    http.put(url, json={"input": "go"}).raise_for_status()
    while True:
        time.sleep(POLL_S)
        answer = http.get(url)
        record = answer.json() if answer.status_code == 200 else {}
        if record.get("status") == "COMPLETED":
            if len(record["path"]) != NODES:
                raise RuntimeError(f"run {run_id} ran {record['path']}")
            created, updated = (datetime.fromisoformat(record[k]) for k in ("created_at", "updated_at"))
            return (updated - created).total_seconds()
        if record.get("status") in ("FAILED", "ABORTED"):
            raise RuntimeError(f"run {run_id} ended {record['status']}: {record['reason']}")


async def in_process(runs: int) -> float:
    """Seconds per run of the same nodes in this process (the compiled graph's `execute`)."""
    graph = chain().compile()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await graph.run(GraphState(input="go"))
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="agora-bench-graph-"))
    with LocalCluster("redis", run_dir=run_dir) as cluster:
        [app] = cluster.add_service(APP)
        run = uuid.uuid4().hex[:6]
        with httpx.Client(timeout=30) as http:
            for i in range(3):
                run_graph(http, app, f"warm-{run}-{i}")
            processes = list(cluster.processes())
            cpu_before = cpu_seconds(processes)
            durations = [run_graph(http, app, f"bench-{run}-{i}") for i in range(RUNS)]
            cpu_after = cpu_seconds(processes)
    baseline_s = asyncio.run(in_process(RUNS))
    durable_s = statistics.median(durations)
    cpu_ms_per_node = {
        name: round((cpu_after[name] - cpu_before.get(name, 0.0)) * 1000 / (RUNS * NODES), 2)
        for name in cpu_after
    }
    result = {
        "benchmark": f"a {NODES}-node graph run as a Dapr workflow in an agent app, "
        f"{RUNS} runs one at a time (redis profile)",
        "run_ms_p50": round(durable_s * 1000, 1),
        "per_node_ms_p50": round(durable_s * 1000 / NODES, 2),
        "baseline_in_process_run_ms_p50": round(baseline_s * 1000, 3),
        "overhead_per_node_ms": round((durable_s - baseline_s) * 1000 / NODES, 2),
        "cpu_ms_per_node": round(sum(cpu_ms_per_node.values()), 2),
        "cpu_ms_per_node_by_process": dict(sorted(cpu_ms_per_node.items(), key=lambda kv: -kv[1])),
        "note": "a run's time is its record's, from the start request to its last step; the client "
        "polls the record every 100 ms (its CPU is in the figures)",
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['benchmark']}:")
    print(f"  a run p50 {result['run_ms_p50']} ms, {result['per_node_ms_p50']} ms a node")
    print(
        f"  in process the same nodes take {result['baseline_in_process_run_ms_p50']} ms a run: "
        f"{result['overhead_per_node_ms']} ms of overhead a node, "
        f"{result['cpu_ms_per_node']} ms of CPU a node"
    )
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
