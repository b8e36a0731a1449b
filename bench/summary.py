"""What `make bench` ends with: the market, plans, debates and escalations side by side with the
baselines measured in the same runs, read from bench/results/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def rows() -> list[tuple[str, str, str]]:
    """(measure, Agora, baseline in the same run)."""
    table: list[tuple[str, str, str]] = []
    market = _load("market_e2e")
    if market:
        burst = market["burst"]
        decided = burst["publish_to_decision"]
        single = burst["bare_publish_to_subscribe"]
        bulk = burst["bare_bulk_publish_to_subscribe"]
        table += [
            (
                f"market, burst of {burst['tasks']}: tasks decided per s",
                f"{decided['per_second']}",
                f"bare publish → subscribe {single['per_second']}/s single, {bulk['per_second']}/s bulk",
            ),
            (
                "market: CPU per task, whole life (ms, every process)",
                f"{burst['cpu_ms_per_task_whole_life_total']}",
                f"bare event {burst['cpu_ms_per_bare_event_total']} single, "
                f"{burst['cpu_ms_per_bare_bulk_event_total']} bulk",
            ),
            (
                "market: CPU per task until the last decision (ms)",
                f"{burst['cpu_ms_per_task_to_decision_total']}",
                "",
            ),
        ]
        traced = market.get("traced_burst")
        if traced:
            table += [
                (
                    f"market, burst of {traced['tasks']} traced as the chart ships it "
                    f"(sampling {traced['sampling_rate']}): tasks decided per s",
                    f"{traced['publish_to_decision']['per_second']}",
                    f"untraced {decided['per_second']}/s",
                ),
                (
                    "market traced: CPU per task, whole life (ms, every process, Jaeger too)",
                    f"{traced['cpu_ms_per_task_whole_life_total']}",
                    f"untraced {burst['cpu_ms_per_task_whole_life_total']}; "
                    f"Jaeger alone {traced['cpu_ms_per_task_whole_life_jaeger']}",
                ),
            ]
        table += [
            (
                "market: one task on an idle system, publish → decision p50 (ms)",
                f"{market['one_at_a_time']['publish_to_decision_p50_ms']}",
                f"bare {market['one_at_a_time']['bare_publish_to_subscribe_p50_ms']}",
            ),
        ]
    scaled = _load("replicas")
    if scaled:
        one, two = scaled["one_replica"], scaled["two_replicas"]
        table.append(
            (
                f"market, burst of {scaled['tasks']}, two replicas of every service: tasks decided per s",
                f"{two['publish_to_decision']['per_second']}",
                f"one replica {one['publish_to_decision']['per_second']}/s; CPU a task (ms) "
                f"{two['cpu_ms_per_task_whole_life_total']}, "
                f"one replica {one['cpu_ms_per_task_whole_life_total']}",
            )
        )
    plan = _load("planner_plan")
    if plan:
        table.append(
            (
                "plans: planner overhead per subgoal (ms)",
                f"{plan['planner_extra_wall_per_subgoal_ms']}",
                f"plain client: {plan['baseline_same_waves_plain_client_wall_ms_p50']} ms a plan",
            )
        )
    debate = _load("debate_run")
    if debate:
        table += [
            (
                "debates: round overhead, one at a time (ms)",
                f"{debate['service_overhead_per_round_ms']}",
                f"in process {debate['baseline_round_ms_p50']} ms a round",
            ),
            (
                "debates: debates per s, 20 at a time",
                f"{debate['debates_per_s']}",
                f"in process {debate['baseline_in_process_debates_per_s']}",
            ),
        ]
    parks = _load("escalations")
    if parks:
        api = parks["park_through_the_http_api"]
        table.append(
            (
                "escalations: parks per s",
                f"{api['per_second']}",
                f"{api['cpu_ms_per_park_total']} ms CPU a park",
            )
        )
    streams = _load("event_streams")
    if streams:
        agora, bare, batched = streams["agora"], streams["bare"], streams["bare_batched"]
        table.append(
            (
                f"{agora['watchers']} watchers of one busy task's events: CPU us per event delivered",
                f"{agora['server_cpu_us_per_delivered_event']}",
                f"bare SSE server {bare['server_cpu_us_per_delivered_event']} (an event a write), "
                f"{batched['server_cpu_us_per_delivered_event']} (at the board's cadence)",
            )
        )
    sums = _load("checked_sums")
    if sums:
        checked, unchecked = sums["arms"]["checked"], sums["arms"]["unchecked"]

        def last(arm: dict[str, Any]) -> str:
            return " / ".join(str(agent["last_tasks_won"]) for agent in arm["agents"].values())

        table.append(
            (
                f"{sums['tasks_per_arm']} sums on the local model, checker app: right; "
                f"last {checked['last_tasks']} (tool / none)",
                f"{checked['right']}; {last(checked)}",
                f"no check: {unchecked['right']} right; last {unchecked['last_tasks']} {last(unchecked)}; "
                f"CPU a task {checked['cpu_ms_per_task_total'] / 1000:.1f} s vs "
                f"{unchecked['cpu_ms_per_task_total'] / 1000:.1f} s",
            )
        )
    return table


def main() -> None:
    table = rows()
    if not table:
        return
    width = max(len(measure) for measure, _, _ in table)
    print("\nside by side (bench/results/):")
    print(f"{'':<{width}}  {'Agora':>10}  baseline, same run")
    for measure, value, baseline in table:
        print(f"{measure:<{width}}  {value:>10}  {baseline}")


if __name__ == "__main__":
    main()
