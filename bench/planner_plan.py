"""A 12-subgoal plan in 4 waves of 3 through the planner (redis profile, every service its own
app, real sidecars): its wall time against the sum of its subgoals' times (the parallelism the
waves achieve), and the planner's overhead per subgoal (time not spent in the market or the
agent).

The baseline, in the same run: the same 12 tasks in the same 4 waves, posted to the market by
a plain client that publishes a wave, polls the task board (every 20 ms, pooled connection)
until each of its tasks has ended, then publishes the next: the same market, the same
concurrency, without the planner. The planner's model is a local endpoint that passes every
verification at once (the agents' results are not judged; only the planner's machinery is
measured).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.scripted_model import model_env, serve_scripted_model
from agora.harness.system import CONSOLE, PLANNER, SERVICES

RUNS = 5
WAVES = 4
PER_WAVE = 3
SKILLS = ["web_search", "summarize", "write", "sql"]
RESULTS = Path(__file__).parent / "results" / "planner_plan.json"
POLL_S = 0.02


def subgoals() -> list[dict[str, Any]]:
    """Four waves of three; each subgoal depends on every subgoal of the wave before."""
    plan = []
    for wave in range(WAVES):
        for index in range(PER_WAVE):
            plan.append(
                {
                    "id": f"w{wave}_s{index}",
                    "description": f"Step {index} of stage {wave} of the market report",
                    "success_criterion": "the step is done",
                    "dependencies": [f"w{wave - 1}_s{i}" for i in range(PER_WAVE)] if wave else [],
                    "tool_hints": [SKILLS[(wave + index) % len(SKILLS)]],
                }
            )
    return plan


def _ms(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() * 1000


def run_plan(http: httpx.Client, console: ServiceReplica, plan_id: str) -> dict[str, Any]:
    body = {
        "task": "Write a market report in four stages",
        "skills": SKILLS,
        "subgoals": subgoals(),
        "min_success_threshold": 0.0,
        "escalate": False,
    }
    started = time.perf_counter()
    http.put(console.invoke_url(f"v1/plans/{plan_id}", "planner"), json=body).raise_for_status()
    url = console.invoke_url(f"v1/plans/{plan_id}", "planner")
    while True:
        response = http.get(url)
        if response.status_code == 200 and response.json()["state"] in ("COMPLETED", "FAILED", "ABORTED"):
            record: dict[str, Any] = response.json()
            break
        time.sleep(POLL_S)
    wall_ms = (time.perf_counter() - started) * 1000
    if record["state"] != "COMPLETED" or len(record["attempts"]) != WAVES * PER_WAVE:
        raise RuntimeError(f"plan {plan_id} ended {record['state']}: {record['reason']}")
    subgoal_ms, market_ms = [], []
    for attempt in record["attempts"]:
        subgoal_ms.append(_ms(attempt["started_at"], attempt["finished_at"]))
        task = http.get(console.invoke_url(f"v1/tasks/{attempt['task_id']}", "taskboard")).json()
        market_ms.append(_ms(task["history"][0]["at"], task["history"][-1]["at"]))
    return {
        "wall_ms": wall_ms,
        "sum_subgoal_ms": sum(subgoal_ms),
        "overhead_per_subgoal_ms": statistics.mean(s - m for s, m in zip(subgoal_ms, market_ms, strict=True)),
        "market_per_subgoal_ms": statistics.mean(market_ms),
    }


def run_baseline(http: httpx.Client, console: ServiceReplica, batch: str) -> float:
    """The same waves of tasks, published and awaited by a plain client: wall time in ms."""
    publish = f"{console.dapr_http}/v1.0/publish/agora-pubsub/agora.tasks"
    started = time.perf_counter()
    for wave in range(WAVES):
        ids = []
        for item in subgoals()[wave * PER_WAVE : (wave + 1) * PER_WAVE]:
            task_id = f"{batch}.{item['id']}"
            spec = {
                "task_id": task_id,
                "description": f"{item['description']}\nSuccess criterion: {item['success_criterion']}",
                "required_skills": item["tool_hints"],
                "min_success_threshold": 0.0,
                "allow_partial": True,
            }
            http.post(publish, json=spec).raise_for_status()
            ids.append(task_id)
        pending = set(ids)
        while pending:
            for task_id in list(pending):
                response = http.get(console.invoke_url(f"v1/tasks/{task_id}", "taskboard"))
                if response.status_code == 200 and response.json()["status"] in (
                    "COMPLETED", "FAILED", "PARTIAL", "REJECTED"
                ):  # fmt: skip
                    pending.discard(task_id)
            time.sleep(POLL_S)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="agora-bench-planner-"))
    with serve_scripted_model() as (_, base_url):
        planner = ServiceSpec(PLANNER.app_id, PLANNER.module, env=model_env(base_url))
        with LocalCluster("redis", run_dir=run_dir) as cluster:
            for spec in SERVICES:
                cluster.add_service(planner if spec is PLANNER else spec)
            [console] = cluster.add_service(CONSOLE)
            run = uuid.uuid4().hex[:6]
            plans: list[dict[str, Any]] = []
            baselines: list[float] = []
            with httpx.Client(timeout=30) as http:
                run_plan(http, console, f"warm-{run}")  # connections, caches, the workflow engine
                run_baseline(http, console, f"warm-base-{run}")
                for i in range(RUNS):
                    plans.append(run_plan(http, console, f"bench-{run}-{i}"))
                    baselines.append(run_baseline(http, console, f"base-{run}-{i}"))

    def median(key: str) -> float:
        return round(float(statistics.median(p[key] for p in plans)), 1)

    wall, summed, baseline = (
        median("wall_ms"),
        median("sum_subgoal_ms"),
        round(statistics.median(baselines), 1),
    )
    result = {
        "benchmark": f"a {WAVES * PER_WAVE}-subgoal plan in {WAVES} waves of {PER_WAVE} "
        "(redis profile, real sidecars)",
        "runs": RUNS,
        "plan_wall_ms_p50": wall,
        "sum_of_subgoal_times_ms_p50": summed,
        "parallelism": round(summed / wall, 2),
        "planner_overhead_per_subgoal_ms_p50": median("overhead_per_subgoal_ms"),
        "market_and_agent_per_subgoal_ms_p50": median("market_per_subgoal_ms"),
        "baseline_same_waves_plain_client_wall_ms_p50": baseline,
        "planner_extra_wall_per_subgoal_ms": round((wall - baseline) / (WAVES * PER_WAVE), 1),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['benchmark']}, {RUNS} runs (medians):")
    print(f"  plan wall {wall} ms; sum of subgoal times {summed} ms; parallelism {result['parallelism']}x")
    print(
        f"  per subgoal: market and agent {result['market_and_agent_per_subgoal_ms_p50']} ms, "
        f"planner overhead {result['planner_overhead_per_subgoal_ms_p50']} ms"
    )
    print(
        f"  baseline (same waves, plain client): {baseline} ms; "
        f"the planner adds {result['planner_extra_wall_per_subgoal_ms']} ms per subgoal"
    )
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
