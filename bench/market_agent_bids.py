"""What agent-side bidding costs: the same market burst decided twice in one run, side by side.

  in_process  the reference worker's agents, whose bids the allocator makes itself (its model's
              estimate, no call out);
  agent_app   the same worker, the same agents, runs and work, but each agent bids for itself
              (AGORA_BIDS=self): the allocator asks the worker's app over service invocation
              (`POST /v1/bids`, with the bid deadline) for each capable agent's bid, which the
              SDK's default estimate writes.

The two modes differ only in who writes the bids, so the difference is the cost of agent-side
bidding. Each mode is a fresh redis-profile cluster (every service its own app with its own
daprd, a Redis of its own) measured the way `bench/market_e2e.py` measures: a warm-up, then a
burst published from 16 client threads through one pooled client; the decision rate is tasks
decided per second from the first publish to the last decision, and the CPU per task is the CPU
seconds every process of the cluster (apps, sidecars, placement, scheduler, Redis) used while
the burst was decided, divided by the burst's size, also summed per app (the app and its
sidecar). The work of the awarded tasks (the worker's runs, a workflow each) runs meanwhile in
both modes and is counted. The question it answers: what agent-side bidding costs per task,
and whether it costs at most 25 % of the decision rate.

    python -m bench.market_agent_bids                                  # 1,000 tasks per mode
    AGORA_BENCH_AGENT_BIDS_TASKS=100 python -m bench.market_agent_bids # a quick check

Results: bench/results/market_agent_bids.json. The agents' winning bids are counted by origin: a
bid the market had to estimate itself because the app did not answer within the deadline
(`fallback`) is not an agent-side bid, so a run with fallbacks says so.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.system import ALLOCATOR, RECORDER, SERVICES, WORKER
from bench.cpu import cpu_seconds
from bench.market_e2e import (
    CLIENT_THREADS,
    DECISION_TOPICS,
    PUBLISHER,
    _burst,
    _decisions,
    _summary,
    _wait_for,
    task_payloads,
)

TASKS = int(os.environ.get("AGORA_BENCH_AGENT_BIDS_TASKS", "1000"))
"""Tasks in each mode's burst (AGORA_BENCH_AGENT_BIDS_TASKS)."""
WARM_UP_TASKS = 20
MAX_RATE_COST = 0.25
"""The decision rate agent-side bidding may cost: at most a quarter of today's."""
RESULTS = Path(__file__).parent / "results" / "market_agent_bids.json"
MODES = ("in_process", "agent_app")


BID_DEADLINE_MS = int(os.environ.get("AGORA_BENCH_AGENT_BID_MS", "2000"))
"""The allocator's bid deadline in the agent_app mode (AGORA_BENCH_AGENT_BID_MS). A burst
saturates the system (its tasks wait seconds in queues), so at the default 300 ms a quarter of
the agents' answers came late and their bids were the market's fallback: the figures would not
be about agent-side bids."""


def _specs(mode: str) -> list[ServiceSpec]:
    if mode == "in_process":
        return list(SERVICES)
    changed = {
        WORKER.app_id: {"AGORA_BIDS": "self"},
        ALLOCATOR.app_id: {"AGORA_AGENT_BID_MS": str(BID_DEADLINE_MS)},
    }
    return [
        replace(spec, env={**spec.env, **changed[spec.app_id]}) if spec.app_id in changed else spec
        for spec in SERVICES
    ]


def _awards(recorder: ServiceReplica, task_ids: set[str]) -> list[dict[str, Any]]:
    """The award events of these tasks, one per task (the first seen)."""
    found: dict[str, dict[str, Any]] = {}
    url = f"{recorder.app_url}/v1/arrivals/agora.task.awarded"
    for arrival in PUBLISHER.get(url).json()["arrivals"]:
        payload = arrival["payload"]
        if payload.get("task_id") in task_ids:
            found.setdefault(payload["task_id"], payload)
    return list(found.values())


def run_mode(mode: str, tasks: int) -> dict[str, Any]:
    """One fresh cluster for `mode`; its burst's decision rate, latency and CPU per task."""
    recorder_spec = ServiceSpec(
        RECORDER.app_id,
        RECORDER.module,
        env={"AGORA_RECORD_TOPICS": ",".join(f"agora-pubsub/{t}" for t in DECISION_TOPICS)},
    )
    with LocalCluster("redis", run_dir=Path(tempfile.mkdtemp(prefix=f"agora-bench-{mode}-"))) as cluster:
        for spec in _specs(mode):
            cluster.add_service(spec)
        [recorder] = cluster.add_service(recorder_spec)
        allocator = next(r for r in cluster.replicas if r.spec.app_id == "allocator")
        run = uuid.uuid4().hex[:6]

        warm = task_payloads(f"warm-{mode}-{run}", WARM_UP_TASKS)
        _wait_for(
            recorder, DECISION_TOPICS, "task_id", set(_burst(allocator, "agora.tasks", warm, "task_id"))
        )

        processes = list(cluster.processes())
        cpu_before = cpu_seconds(processes)
        burst = task_payloads(f"burst-{mode}-{run}", tasks)
        sent = _burst(allocator, "agora.tasks", burst, "task_id")
        decided_at = _wait_for(recorder, DECISION_TOPICS, "task_id", set(sent))
        cpu_after = cpu_seconds(processes)
        summary = _summary(sent, decided_at)
        decisions = _decisions(recorder, set(sent))
        awards = _awards(recorder, set(sent))

    cpu_ms_per_task = {
        name: round((cpu_after[name] - cpu_before.get(name, 0.0)) * 1000 / tasks, 1) for name in cpu_after
    }
    by_app: dict[str, float] = {}
    for name, ms in cpu_ms_per_task.items():
        app = name.rsplit("-", 2)[0] if name.endswith(("-app", "-daprd")) else name
        by_app[app] = round(by_app.get(app, 0.0) + ms, 1)
    fallbacks = [a for a in awards if a["bid"].get("fallback")]
    return {
        "services": [spec.app_id for spec in _specs(mode)],
        "tasks": tasks,
        "decision_rate_per_s": summary["per_second"],
        "publish_to_decision": summary,
        "awarded": len(awards),
        "rejected": len(decisions) - len(awards),
        "winning_bids_by_fallback": len(fallbacks),
        "fallback_reasons": sorted({str(a["bid"].get("fallback_reason")) for a in fallbacks})[:5],
        "tasks_lost": len(set(sent) - set(decisions)),
        "tasks_decided_twice": sum(1 for d in decisions.values() if len(d) > 1),
        "cpu_ms_per_task_total": round(sum(cpu_ms_per_task.values()), 1),
        "cpu_ms_per_task_by_app": dict(sorted(by_app.items(), key=lambda item: -item[1])),
        "cpu_ms_per_task": dict(sorted(cpu_ms_per_task.items(), key=lambda item: -item[1])),
    }


def compare(in_process: dict[str, Any], agent_app: dict[str, Any]) -> dict[str, Any]:
    """What the agent app's bids cost against the in-process ones."""
    rate_ratio = agent_app["decision_rate_per_s"] / in_process["decision_rate_per_s"]
    rate_cost = 1.0 - rate_ratio
    return {
        "decision_rate_ratio": round(rate_ratio, 3),
        "decision_rate_cost_percent": round(rate_cost * 100, 1),
        "cpu_ms_per_task_added": round(
            agent_app["cpu_ms_per_task_total"] - in_process["cpu_ms_per_task_total"], 1
        ),
        "rate_cost_within_25_percent": rate_cost <= MAX_RATE_COST,
        "every_winning_bid_was_the_agents_own": agent_app["winning_bids_by_fallback"] == 0,
    }


def main() -> None:
    results = {mode: run_mode(mode, TASKS) for mode in MODES}
    comparison = compare(results["in_process"], results["agent_app"])
    result = {
        "benchmark": "agent-side bidding: the same burst with in-process bids and with an agent app's "
        "own bids (redis profile, every service its own app, real sidecars)",
        "client_threads": CLIENT_THREADS,
        "agent_bid_deadline_ms": BID_DEADLINE_MS,
        "tasks_per_burst": TASKS,
        **results,
        "comparison": comparison,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"agent-side bidding: a burst of {TASKS} tasks per mode from {CLIENT_THREADS} client threads")
    print(f"{'':<12} {'tasks/s':>8} {'p50 ms':>9} {'p99 ms':>9} {'CPU ms/task':>12} {'fallbacks':>10}")
    for mode in MODES:
        row = results[mode]
        latency = row["publish_to_decision"]
        print(
            f"{mode:<12} {row['decision_rate_per_s']:>8} {latency['p50_ms']:>9} {latency['p99_ms']:>9} "
            f"{row['cpu_ms_per_task_total']:>12} {row['winning_bids_by_fallback']:>10}"
        )
    print(
        f"agent app / in process: {comparison['decision_rate_ratio']} times the decision rate "
        f"(cost {comparison['decision_rate_cost_percent']} %, within 25 %: "
        f"{comparison['rate_cost_within_25_percent']}); "
        f"{comparison['cpu_ms_per_task_added']:+} ms CPU per task"
    )
    for mode in MODES:
        busiest = ", ".join(
            f"{app} {ms}" for app, ms in list(results[mode]["cpu_ms_per_task_by_app"].items())[:6]
        )
        print(f"CPU per task by app (app + its sidecar), {mode}: {busiest}")
    print(f"written to {RESULTS}")
    broken = {mode: row for mode, row in results.items() if row["tasks_lost"] or row["tasks_decided_twice"]}
    if broken:
        raise SystemExit(
            "; ".join(
                f"{mode}: lost {row['tasks_lost']}, decided twice {row['tasks_decided_twice']}"
                for mode, row in broken.items()
            )
        )


if __name__ == "__main__":
    main()
