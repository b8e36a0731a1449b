"""Debates per second through the debate service (redis profile, every service its own app,
real sidecars): 3 debaters, 3 rounds each (the offline debaters split three ways and never
converge; escalation is off so every debate runs its three rounds and completes), 60 debates
started 20 at a time; and the service's overhead per round beyond the model calls.

The baseline, in the same run: the same debates run in the benchmark's own process with the
same model calls (`agora.debate.steps.answer` on the offline model, a round's answers
gathered concurrently) and the same rules: what a debate costs without a service around it.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from agora.core.debate.config import DebateConfig, DebaterConfig
from agora.core.debate.rounds import DebateRound, debate_round
from agora.debate import steps
from agora.harness import LocalCluster, ServiceReplica
from agora.harness.system import CONSOLE, SERVICES
from agora.llm import OfflineModelClient

DEBATES = 60
CONCURRENCY = 20
QUESTION = "Which region should host the new cluster? Options: eu-west | us-east | ap-south"
CONFIG = DebateConfig(
    debaters=[DebaterConfig(debater_id=f"d{i}") for i in range(3)],
    max_rounds=3,
    adaptive_routing=False,
    escalate_threshold=0.0,
)
RESULTS = Path(__file__).parent / "results" / "debate_run.json"


def run_debate(http: httpx.Client, console: ServiceReplica, debate_id: str) -> dict[str, Any]:
    body = {"question": QUESTION, "config": CONFIG.model_dump(mode="json")}
    http.put(console.invoke_url(f"v1/debates/{debate_id}", "debate"), json=body).raise_for_status()
    while True:
        response = http.get(console.invoke_url(f"v1/debates/{debate_id}", "debate"))
        if response.status_code == 200 and response.json()["state"] in ("COMPLETED", "ABORTED"):
            record: dict[str, Any] = response.json()
            if record["result"]["total_rounds_run"] != 3:
                raise RuntimeError(f"debate {debate_id} ran {record['result']['total_rounds_run']} rounds")
            return record
        time.sleep(0.05)


async def baseline_debate(model: OfflineModelClient) -> float:
    """One debate in process: seconds per round."""
    started = time.perf_counter()
    previous: DebateRound | None = None
    for number in range(1, CONFIG.max_rounds + 1):
        positions = await asyncio.gather(
            *(steps.answer(model, d, QUESTION, previous) for d in CONFIG.debaters)
        )
        previous = debate_round(number, list(positions))
    return (time.perf_counter() - started) / CONFIG.max_rounds


async def baseline(n: int) -> tuple[float, float]:
    """(debates per second at the same concurrency, seconds per round) in process."""
    model = OfflineModelClient(overrides=steps.offline_answers)
    semaphore = asyncio.Semaphore(CONCURRENCY)

    async def one() -> float:
        async with semaphore:
            return await baseline_debate(model)

    started = time.perf_counter()
    rounds = await asyncio.gather(*(one() for _ in range(n)))
    return n / (time.perf_counter() - started), statistics.median(rounds)


def main() -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="agora-bench-debate-"))
    with LocalCluster("redis", run_dir=run_dir) as cluster:
        for spec in SERVICES:
            cluster.add_service(spec)
        [console] = cluster.add_service(CONSOLE)
        run = uuid.uuid4().hex[:6]
        with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=CONCURRENCY)) as http:
            run_debate(http, console, f"warm-{run}")
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
                records = list(
                    pool.map(lambda i: run_debate(http, console, f"bench-{run}-{i}"), range(DEBATES))
                )
            wall = time.perf_counter() - started
            one_at_a_time = [run_debate(http, console, f"solo-{run}-{i}") for i in range(5)]
    base_rate, base_round_s = asyncio.run(baseline(DEBATES))
    busy_round_s = statistics.median(r["result"]["duration_seconds"] / 3 for r in records)
    idle_round_s = statistics.median(r["result"]["duration_seconds"] / 3 for r in one_at_a_time)
    result = {
        "benchmark": f"{DEBATES} debates of 3 debaters x 3 rounds, {CONCURRENCY} at a time (redis profile)",
        "debates_per_s": round(DEBATES / wall, 2),
        "round_ms_p50_under_load": round(busy_round_s * 1000, 1),
        "round_ms_p50_one_at_a_time": round(idle_round_s * 1000, 1),
        "baseline_in_process_debates_per_s": round(base_rate, 1),
        "baseline_round_ms_p50": round(base_round_s * 1000, 2),
        "service_overhead_per_round_ms": round((idle_round_s - base_round_s) * 1000, 1),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['benchmark']}: {result['debates_per_s']} debates/s")
    print(
        f"  a round: p50 {result['round_ms_p50_one_at_a_time']} ms one at a time, "
        f"{result['round_ms_p50_under_load']} ms under load"
    )
    print(
        f"  baseline in process: {result['baseline_in_process_debates_per_s']} debates/s, "
        f"a round {result['baseline_round_ms_p50']} ms; the service adds "
        f"{result['service_overhead_per_round_ms']} ms per round"
    )
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
