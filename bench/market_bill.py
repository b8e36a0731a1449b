"""The market's model bill on a real model: the same burst decided twice in one run, side by side.

  per_candidate  the reference design: the market's model is asked once per candidate
                 (AGORA_ESTIMATES_PER_CALL=1, each candidate's call beside the others');
  joint          the candidates of a task rated together, in one call (the default).

Both run on the local model server (llama.cpp's server, SmolLM2-135M, two slots, one thread),
a fresh redis-profile cluster each, with the same five agents registered without apps of their
own (so every bid is the market's estimate) and the same burst of tasks. The bid deadline is
long (`BID_TIMEOUT_S`): the burst's calls queue at the server's two slots, and what is measured
is what the calls cost, not where a deadline cut them. The tasks' budget is
smaller than any bid's cost, so every task is decided REJECTED once its bids are in: the
figures are the decisions' own, with no agent's work on the same model server meanwhile.

Reported per mode: decisions per minute over the burst (first publish to last decision), the
model calls, prompt and completion tokens and model seconds per decision (the allocator's
`ModelBill` of each decision, from the server's own token counts), the bids that fell back
(and why), and the CPU seconds per decision of every process (the model server included).
Model seconds are the calls' wall time as the allocator saw it, queueing at the server included.
And the decision quality the cut keeps: per task, whether both modes rated the same candidate
highest, and the mean absolute difference of their success estimates (percentage points).

    python -m bench.market_bill                                   # 16 tasks per mode
    AGORA_BENCH_BILL_TASKS=4 AGORA_BENCH_RESULTS=/tmp/bill.json python -m bench.market_bill
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from agora.core.models import CapabilityProfile
from agora.harness import LocalCluster, ServiceSpec
from agora.harness.system import ALLOCATOR, CONSOLE, RECORDER, SERVICES
from bench.cpu import cpu_seconds
from bench.market_e2e import PUBLISHER, _arrivals, _burst, _summary, _wait_for

TASKS = int(os.environ.get("AGORA_BENCH_BILL_TASKS", "16"))
BID_TIMEOUT_S = 1800
"""The allocator's bid deadline in both modes: a burst queues at the server's two slots for
minutes, and a bid that timed out would cost the decision its deadline rather than its calls."""
RESULTS = Path(os.environ.get("AGORA_BENCH_RESULTS", Path(__file__).parent / "results" / "market_bill.json"))
MODES = {"per_candidate": 1, "joint": 8}
SKILL = "market_report"
AGENTS = [
    CapabilityProfile(
        agent_id=f"bill-{name}",
        agent_name=title,
        skill_tags=[SKILL, *extra],
        cost_per_step_usd=price,
        max_steps=10,
    )
    for name, title, extra, price in (
        ("analyst", "Market analyst", ["sql", "python"], 0.004),
        ("writer", "Report writer", ["write", "summarize"], 0.002),
        ("researcher", "Web researcher", ["web_search", "summarize"], 0.003),
        ("generalist", "Generalist assistant", [], 0.001),
        ("economist", "Energy economist", ["energy", "finance"], 0.006),
    )
]
DESCRIPTIONS = [
    "Write a market report on home solar batteries in Spain: prices, payback and subsidies",
    "Summarise last quarter's sales by region and explain the largest change",
    "Compare three cloud providers' GPU prices for a small training job",
    "Draft a one-page brief on heat pump adoption in Germany",
]
REJECTED = "agora.task.rejected"
DECISION_WAIT_S = 1800


def tasks(prefix: str, count: int) -> list[dict[str, Any]]:
    """Tasks every candidate is capable of, with a budget below any bid's cost."""
    return [
        {
            "task_id": f"{prefix}-{i:03d}",
            "description": DESCRIPTIONS[i % len(DESCRIPTIONS)],
            "required_skills": [SKILL],
            "budget_usd": 1e-9,
        }
        for i in range(count)
    ]


def run_mode(mode: str, per_call: int, count: int) -> dict[str, Any]:
    recorder_spec = ServiceSpec(
        RECORDER.app_id, RECORDER.module, env={"AGORA_RECORD_TOPICS": f"agora-pubsub/{REJECTED}"}
    )
    specs = [
        replace(
            s,
            env={
                **s.env,
                "AGORA_ESTIMATES_PER_CALL": str(per_call),
                "AGORA_BID_TIMEOUT_SECONDS": str(BID_TIMEOUT_S),
            },
        )
        if s.app_id == ALLOCATOR.app_id
        else s
        for s in SERVICES
    ]
    run_dir = Path(tempfile.mkdtemp(prefix=f"agora-bench-bill-{mode}-"))
    with LocalCluster("redis", run_dir=run_dir, model="local") as cluster:
        for spec in specs:
            cluster.add_service(spec)
        [recorder] = cluster.add_service(recorder_spec)
        [console] = cluster.add_service(CONSOLE)  # people's tools, registrations among them, speak through it
        allocator = next(r for r in cluster.replicas if r.spec.app_id == ALLOCATOR.app_id)
        register = f"{console.dapr_http}/v1.0/invoke/registry/method/v1/agents"
        for agent in AGENTS:
            PUBLISHER.post(register, json=agent.model_dump(mode="json")).raise_for_status()
        run = uuid.uuid4().hex[:6]
        warm = tasks(f"warm-{mode}-{run}", 1)
        _wait_for(recorder, (REJECTED,), "task_id", set(_burst(allocator, "agora.tasks", warm, "task_id")),
                  timeout_s=DECISION_WAIT_S)  # fmt: skip

        processes = list(cluster.processes())
        cpu_before = cpu_seconds(processes)
        burst = tasks(f"burst-{run}", count)
        sent = _burst(allocator, "agora.tasks", burst, "task_id")
        decided_at = _wait_for(recorder, (REJECTED,), "task_id", set(sent), timeout_s=DECISION_WAIT_S)
        cpu_after = cpu_seconds(processes)
        results: dict[str, dict[str, Any]] = {}
        for arrival in _arrivals(recorder, REJECTED):
            payload = arrival["payload"]
            if payload["task_id"] in sent:
                results.setdefault(payload["task_id"], payload["result"])
    summary = _summary(sent, decided_at)
    described = {task["task_id"]: task["description"] for task in burst}
    estimates: dict[str, dict[str, float]] = {}  # the first task of each description's
    for task_id, result in sorted(results.items()):
        estimated = {
            b["agent_id"]: b["self_reported_success_prob"] for b in result["all_bids"] if not b["fallback"]
        }
        estimates.setdefault(described[task_id], estimated)
    bills = [r["model_bill"] for r in results.values()]
    bids = [bid for r in results.values() for bid in r["all_bids"]]
    fallbacks = [bid for bid in bids if bid["fallback"]]
    cpu_s = sum(cpu_after[name] - cpu_before.get(name, 0.0) for name in cpu_after)
    model_cpu_s = sum(
        cpu_after[n] - cpu_before.get(n, 0.0) for n in cpu_after if n.startswith("model-server")
    )
    return {
        "tasks": count,
        "decisions_per_minute": round(count * 60 / (max(decided_at.values()) - min(sent.values())), 2),
        "publish_to_decision": summary,
        "per_decision": {
            key: round(statistics.fmean(b[key] for b in bills), 2)
            for key in ("model_calls", "prompt_tokens", "completion_tokens", "model_seconds")
        },
        "bids": len(bids),
        "fallback_bids": len(fallbacks),
        "fallback_reasons": sorted({str(b["fallback_reason"])[:200] for b in fallbacks})[:5],
        "cpu_s_per_decision_total": round(cpu_s / count, 2),
        "cpu_s_per_decision_model_server": round(model_cpu_s / count, 2),
        "tasks_lost": len(set(sent) - set(results)),
        "estimates": estimates,
    }


def quality(per_candidate: dict[str, Any], joint: dict[str, Any]) -> dict[str, Any]:
    """How far the joint estimates are from the per-candidate ones, task by task (a task's
    estimates are the same for every copy of it at temperature 0, so one per description). A
    task whose candidates got the same estimate in both modes says nothing about which one is
    rated highest: it is counted apart."""
    same_top, differences, compared, all_equal = 0, [], 0, 0
    for description in DESCRIPTIONS:
        alone = per_candidate["estimates"].get(description, {})
        together = joint["estimates"].get(description, {})
        shared = sorted(set(alone) & set(together))
        if len(shared) < 2:
            continue
        differences += [abs(alone[a] - together[a]) * 100 for a in shared]
        if len({alone[a] for a in shared}) == 1 and len({together[a] for a in shared}) == 1:
            all_equal += 1
            continue
        compared += 1
        same_top += max(shared, key=lambda a: (alone[a], a)) == max(shared, key=lambda a: (together[a], a))
    return {
        "tasks_with_every_candidate_rated_alike_in_both_modes": all_equal,
        "tasks_compared_for_their_top_candidate": compared,
        "same_top_candidate": same_top,
        "mean_abs_difference_points": round(statistics.fmean(differences), 1) if differences else None,
    }


def main() -> None:
    results = {mode: run_mode(mode, per_call, TASKS) for mode, per_call in MODES.items()}
    compared = quality(results["per_candidate"], results["joint"])
    result = {
        "benchmark": "the market's model bill on the local model server (SmolLM2-135M, llama.cpp, "
        "2 slots, 1 thread): per-candidate estimates against one joint call per decision",
        "candidates_per_task": len(AGENTS),
        **results,
        "quality": compared,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"the market's model bill: {TASKS} tasks of {len(AGENTS)} candidates per mode, on the local model")
    header = ("dec/min", "calls", "prompt", "compl.", "model s", "CPU s", "fallb.")
    print(f"{'':<14} " + " ".join(f"{h:>7}" for h in header))
    for mode in MODES:
        row, per = results[mode], results[mode]["per_decision"]
        print(
            f"{mode:<14} {row['decisions_per_minute']:>7} {per['model_calls']:>7} {per['prompt_tokens']:>7} "
            f"{per['completion_tokens']:>7} {per['model_seconds']:>7} {row['cpu_s_per_decision_total']:>7} "
            f"{row['fallback_bids']:>7}"
        )
    print(f"quality: {compared}")
    print(f"written to {RESULTS}")
    lost = {mode: row["tasks_lost"] for mode, row in results.items() if row["tasks_lost"]}
    if lost:
        raise SystemExit(f"tasks not decided: {lost}")


if __name__ == "__main__":
    main()
