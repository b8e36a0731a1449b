"""Checked sums on the real local model (llama.cpp's server, SmolLM2-135M), redis profile, every
service its own app beside its own daprd.

Two pairs of agents for sums (bench/checked_sums_apps/sum_agents.py), each agent's runs on the
local model: in each pair one agent has an `add` tool (an SDK tool) and one has none, and both
bid alike. 40 sums "What is A + B?" (3-digit operands, a fixed seed; AGORA_BENCH_TASKS to
change the count) are published one at a time twice, in the same run: to the first pair with
an acceptance check of kind `checker_app` naming the bench's checker app
(bench/checked_sums_apps/sum_checker.py, app id `checker`), and the same sums to the second
pair with no check. The two arms take turns, task by task, so both see the machine alike.
Every task takes `min_success_threshold` 0, so every sum is awarded and where the market sends
it is what is measured.

Reported per arm: the answers that were right (worked out here from the operands: the
answer's last number is the sum; also, more leniently, the sum anywhere in the answer), what
each agent claimed, the verdicts, each agent's share of the last 20 tasks, the reputation each
agent's record shows afterwards, wall time per task (publish until the task's end is on the
board and its outcome counted by the reputation), and the CPU each task cost, summed over every
process of the system (every app and sidecar, placement, scheduler, sentry, Redis and the model
server) over that window.

A quick check of the code: AGORA_BENCH_TASKS=2 AGORA_BENCH_RESULTS=/tmp/checked_sums.json
python -m bench.checked_sums (AGORA_BENCH_RESULTS: where the figures go; default
bench/results/checked_sums.json).
"""

from __future__ import annotations

import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.cluster import LOCAL_MODEL
from agora.harness.system import CONSOLE, SERVICES
from bench.checked_sums_apps.sum_agents import ARMS, skill, with_tool, without_tool
from bench.cpu import cpu_seconds

TASKS = int(os.environ.get("AGORA_BENCH_TASKS", "40"))
LAST = min(20, TASKS)
SEED = 52
RESULTS = Path(
    os.environ.get("AGORA_BENCH_RESULTS") or Path(__file__).parent / "results" / "checked_sums.json"
)
APPS = Path(__file__).resolve().parent / "checked_sums_apps"
AGENTS = ServiceSpec("agents", "agora.sdk", env={"AGORA_AGENTS_FILE": str(APPS / "sum_agents.py")})
CHECKER = ServiceSpec("checker", None, command=[sys.executable, str(APPS / "sum_checker.py")])
CHECK = {"kind": "checker_app", "app_id": CHECKER.app_id, "method": "check"}
TERMINAL = ("COMPLETED", "FAILED", "PARTIAL", "REJECTED")
TASK_DEADLINE_MS = 600_000
"""The task's own deadline: a run still going 10 minutes after its award is stopped by the
market (a run is at most 4 model calls of up to 2 minutes each)."""
TASK_WAIT_S = 900.0
POLL_S = 0.25
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def numbers_in(text: str) -> list[float]:
    return [float(n.rstrip(",").replace(",", "")) for n in NUMBER.findall(text)]


def right(a: int, b: int, answer: str) -> bool:
    """The answer's last number is the sum."""
    found = numbers_in(answer)
    return bool(found) and found[-1] == a + b


def holds_the_sum(a: int, b: int, answer: str) -> bool:
    """The sum is somewhere in the answer (3-digit operands are never their own sum)."""
    return (a + b) in numbers_in(answer)


def pair_of(arm: str) -> tuple[str, str]:
    return with_tool(arm), without_tool(arm)


def sums() -> list[tuple[int, int]]:
    draw = random.Random(SEED)
    return [(draw.randint(100, 999), draw.randint(100, 999)) for _ in range(TASKS)]


@dataclass
class Market:
    http: httpx.Client
    console: ServiceReplica

    def board(self, task_id: str) -> dict[str, Any] | None:
        answer = self.http.get(self.console.invoke_url(f"v1/tasks/{task_id}", "taskboard"))
        return answer.json() if answer.status_code == 200 else None

    def reputation(self, agent_id: str) -> dict[str, Any]:
        answer = self.http.get(self.console.invoke_url(f"v1/reputation/{agent_id}", "reputation"))
        answer.raise_for_status()
        record: dict[str, Any] = answer.json()
        return record

    def counted(self, agents: tuple[str, str]) -> int:
        return sum(int(self.reputation(agent_id)["total_tasks"]) for agent_id in agents)

    def publish(self, spec: dict[str, Any]) -> None:
        url = f"{self.console.dapr_http}/v1.0/publish/agora-pubsub/agora.tasks"
        self.http.post(url, json=spec).raise_for_status()

    def cancel(self, task_id: str) -> None:
        self.http.post(
            self.console.invoke_url(f"v1/tasks/{task_id}/cancel", "taskboard"),
            json={"cancelled_by": "bench", "reason": f"no end within {TASK_WAIT_S:.0f} s"},
        )


def run_sum(market: Market, arm: str, index: int, a: int, b: int, run: str) -> dict[str, Any]:
    """One sum published and followed to its end on the board and its outcome counted."""
    task_id = f"sum-{run}-{arm}-{index:02d}"
    spec: dict[str, Any] = {
        "task_id": task_id,
        "description": f"What is {a} + {b}?",
        "required_skills": [skill(arm)],
        "min_success_threshold": 0.0,
        "deadline_ms": TASK_DEADLINE_MS,
    }
    if arm == "checked":
        spec["acceptance"] = {"check": CHECK}
    pair = pair_of(arm)
    before = market.counted(pair)
    started = time.perf_counter()
    market.publish(spec)
    deadline = time.monotonic() + TASK_WAIT_S
    record: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        record = market.board(task_id)
        if record is not None and record["status"] in TERMINAL:
            break
        time.sleep(POLL_S)
    else:
        market.cancel(task_id)
        return {"task_id": task_id, "status": "TIMED_OUT", "record": record, "wall_s": TASK_WAIT_S}
    assert record is not None
    if record["outcome"] is not None:
        counted_by = time.monotonic() + 60
        while market.counted(pair) < before + 1 and time.monotonic() < counted_by:
            time.sleep(POLL_S)
    return {"task_id": task_id, "status": record["status"], "record": record,
            "wall_s": time.perf_counter() - started}  # fmt: skip


def task_row(arm: str, index: int, a: int, b: int, ran: dict[str, Any], cpu_ms: float) -> dict[str, Any]:
    record = ran["record"] or {}
    outcome = record.get("outcome") or {}
    verdict = record.get("verdict")
    summary = str(outcome.get("summary", ""))
    return {
        "arm": arm,
        "index": index,
        "a": a,
        "b": b,
        "sum": a + b,
        "task_id": ran["task_id"],
        "winner": (record.get("allocation") or {}).get("winning_agent_id"),
        "status": ran["status"],
        "answer": summary[:300],
        "claimed_success": outcome.get("actual_success") if outcome else None,
        "tools_called": list(outcome.get("tools_called", [])),
        "steps": outcome.get("actual_steps"),
        "tokens": int(outcome.get("input_tokens", 0)) + int(outcome.get("output_tokens", 0)),
        "right": right(a, b, summary) if outcome else False,
        "holds_the_sum": holds_the_sum(a, b, summary) if outcome else False,
        "verdict": verdict["status"] if verdict else None,
        "verdict_reason": verdict["reason"] if verdict else None,
        "failure_reason": record.get("failure_reason"),
        "wall_s": round(ran["wall_s"], 2),
        "cpu_ms": round(cpu_ms, 1),
    }


def progress(row: dict[str, Any]) -> str:
    claim = {True: "claimed success", False: "claimed failure", None: "no outcome"}[row["claimed_success"]]
    tools = ",".join(row["tools_called"]) or "no tool"
    verdict = row["verdict"] or ("no check" if row["arm"] == "unchecked" else "no verdict")
    return (
        f"  [{row['arm']:<9} {row['index'] + 1:>2}/{TASKS}] {row['a']} + {row['b']} = {row['sum']}: "
        f"{row['winner'] or '-'} answered {row['answer'][:60]!r}, {claim}, {tools}; verdict {verdict}; "
        f"{row['status']}; {'right' if row['right'] else 'wrong'}; "
        f"{row['wall_s']:.1f} s, {row['cpu_ms'] / 1000:.1f} s CPU"
    )


REPUTATION_FIELDS = (
    "total_tasks",
    "successful_tasks",
    "success_rate",
    "calibration_factor",
    "overclaims",
    "evidence",
    "evidence_of_success",
)


def agent_figures(rows: list[dict[str, Any]], agent_id: str, reputation: dict[str, Any]) -> dict[str, Any]:
    won = [r for r in rows if r["winner"] == agent_id]
    return {
        "tasks_won": len(won),
        "last_tasks_won": sum(r["winner"] == agent_id for r in rows[-LAST:]),
        "right": sum(r["right"] for r in won),
        "holding_the_sum": sum(r["holds_the_sum"] for r in won),
        "claimed_success": sum(r["claimed_success"] is True for r in won),
        "claimed_success_and_wrong": sum(r["claimed_success"] is True and not r["right"] for r in won),
        "called_add": sum("add" in r["tools_called"] for r in won),
        "verdicts": dict(Counter(r["verdict"] or "none" for r in won)),
        "statuses": dict(Counter(r["status"] for r in won)),
        "answers": [r["answer"][:80] for r in won[:5]],
        "reputation": {key: reputation.get(key) for key in REPUTATION_FIELDS},
    }


def arm_figures(
    arm: str, rows: list[dict[str, Any]], cpu: dict[str, float], reputations: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    walls = [r["wall_s"] for r in rows]
    answered = [r for r in rows if r["claimed_success"] is not None]
    checked = [r for r in rows if r["verdict"] in ("passed", "failed")]
    per_process = {name: round(ms / len(rows), 1) for name, ms in sorted(cpu.items(), key=lambda i: -i[1])}
    return {
        "check": CHECK if arm == "checked" else None,
        "skill": skill(arm),
        "tasks": len(rows),
        "answered": len(answered),
        "right": sum(r["right"] for r in rows),
        "holding_the_sum": sum(r["holds_the_sum"] for r in rows),
        "claimed_success": sum(r["claimed_success"] is True for r in rows),
        "claimed_success_and_wrong": sum(r["claimed_success"] is True and not r["right"] for r in rows),
        "verdicts": dict(Counter(r["verdict"] or "none" for r in rows)),
        "verdicts_agreeing_with_the_sum": sum((r["verdict"] == "passed") == r["right"] for r in checked),
        "statuses": dict(Counter(r["status"] for r in rows)),
        "last_tasks": LAST,
        "agents": {
            agent_id: agent_figures(rows, agent_id, reputations[agent_id]) for agent_id in pair_of(arm)
        },
        "wall_s_total": round(sum(walls), 1),
        "wall_s_per_task_p50": round(statistics.median(walls), 1),
        "wall_s_per_task_mean": round(statistics.mean(walls), 1),
        "model_tokens_per_task_mean": round(statistics.mean(r["tokens"] for r in rows), 1),
        "cpu_ms_per_task_total": round(sum(cpu.values()) / len(rows), 1),
        "cpu_ms_per_task_model_server": per_process.get("model-server", 0.0),
        "cpu_ms_per_task": per_process,
    }


def main() -> None:
    started = time.perf_counter()
    run = uuid.uuid4().hex[:6]
    operands = sums()
    rows: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    cpu: dict[str, defaultdict[str, float]] = {arm: defaultdict(float) for arm in ARMS}
    print(f"checked sums on the local model ({LOCAL_MODEL}): {TASKS} tasks an arm, arms {', '.join(ARMS)}")
    with LocalCluster(
        "redis", run_dir=Path(tempfile.mkdtemp(prefix="agora-bench-sums-")), model="local"
    ) as cluster:
        for spec in [*SERVICES, AGENTS, CHECKER]:
            cluster.add_service(spec)
        [console] = cluster.add_service(CONSOLE)
        system_up_s = time.perf_counter() - started
        print(f"  system up in {system_up_s:.1f} s (run folder {cluster.run_dir})")
        processes = list(cluster.processes())
        with httpx.Client(timeout=30) as http:
            market = Market(http, console)
            for index, (a, b) in enumerate(operands):
                for arm in ARMS:
                    before = cpu_seconds(processes)
                    ran = run_sum(market, arm, index, a, b, run)
                    after = cpu_seconds(processes)
                    used = {name: (after[name] - before.get(name, 0.0)) * 1000 for name in after}
                    for name, ms in used.items():
                        cpu[arm][name] += ms
                    row = task_row(arm, index, a, b, ran, sum(used.values()))
                    rows[arm].append(row)
                    print(progress(row), flush=True)
            reputations = {agent_id: market.reputation(agent_id) for arm in ARMS for agent_id in pair_of(arm)}
    total_s = time.perf_counter() - started

    arms = {arm: arm_figures(arm, rows[arm], dict(cpu[arm]), reputations) for arm in ARMS}
    result = {
        "benchmark": "sums on the local model, checked by a checker app and unchecked "
        "(redis profile, every service its own app, real sidecars)",
        "model": f"{LOCAL_MODEL} (llama.cpp server, xllamacpp wheel)",
        "tasks_per_arm": TASKS,
        "seed": SEED,
        "operands": "3-digit, the same sums in both arms, the arms taking turns task by task",
        "agents": "per arm: one agent with an SDK `add` tool, one without; the same default bid",
        "min_success_threshold": 0.0,
        "system_up_s": round(system_up_s, 1),
        "run_wall_s": round(total_s, 1),
        "arms": arms,
        "tasks": [row for arm in ARMS for row in rows[arm]],
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['benchmark']}, {TASKS} tasks an arm, {total_s / 60:.1f} min in all:")
    for arm, figures in arms.items():
        print(
            f"  {arm}: {figures['right']} of {TASKS} right ({figures['holding_the_sum']} holding the sum), "
            f"{figures['claimed_success']} claimed success, verdicts {figures['verdicts']}; "
            f"{figures['wall_s_per_task_p50']} s a task (p50), "
            f"{figures['cpu_ms_per_task_total']} ms CPU a task"
        )
        for agent_id, agent in figures["agents"].items():
            rep = agent["reputation"]
            print(
                f"    {agent_id}: won {agent['tasks_won']} ({agent['last_tasks_won']} of the last {LAST}), "
                f"right {agent['right']}, claimed success {agent['claimed_success']}, "
                f"called add {agent['called_add']}; record {rep['successful_tasks']}/{rep['total_tasks']} "
                f"success {rep['success_rate']}, calibration {rep['calibration_factor']}, "
                f"overclaims {rep['overclaims']}"
            )
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
