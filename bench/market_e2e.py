"""End-to-end market throughput, latency and CPU through real sidecars (redis profile, every
service its own app).

Burst: 5,000 tasks (AGORA_BENCH_TASKS to change it) are published to `agora.tasks` from 16
client threads sharing one pooled HTTP client; a task's latency runs from its publish call to
the moment its `agora.task.awarded` / `agora.task.rejected` event reaches a subscriber (the
topic recorder app), and throughput is tasks decided per second over the burst. Every task must
be decided, and none twice (two different decisions for one task).

Idle: single tasks, one at a time, from publish to decision.

Where the burst's time goes: the CPU seconds each process of the system (every app, every
sidecar, placement, scheduler, Redis) used, per task, over two windows: until the last task
was decided, and over each task's whole life, until the task board holds every task's end
(the winner's run, its outcome, the reputation it changes). The second is what a task costs;
the first leaves out runs still under way when the last decision came.

Baselines, in the same run and the same way: a bare Dapr publish → subscribe through the same
sidecar to the same subscriber, as a burst of events from the same 16 threads and pooled
client, both as single publishes and as Dapr bulk publishes of 100, and one event at a time;
with the CPU they cost per event. The market's rate is reported as a ratio to them.

Everything above runs with tracing off. Then, in the same run, the same burst (as many tasks,
AGORA_BENCH_TRACED_TASKS to change it) on a fresh system traced as the Helm chart ships it: its
tracing.samplingRate (deploy/helm/agora/values.yaml) in every sidecar's Configuration and as
the apps' parent-based ratio sampler, spans exported over OTLP to a real Jaeger (the local
stack's). Its rate and CPU per task (every process, Jaeger included and also counted alone)
stand beside the untraced ones. Spans still in the exporters' buffers when the last task's end
is on the board (a few seconds' worth) are exported after the window and not counted. The
share of the burst's tasks Jaeger holds a trace of is checked on a spread sample of them.

A quick check of the code: AGORA_BENCH_TASKS=20 AGORA_BENCH_ECHOES=100
AGORA_BENCH_RESULTS=/tmp/market_e2e.json python -m bench.market_e2e (AGORA_BENCH_RESULTS: where
the figures go; default bench/results/market_e2e.json).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.cluster import REPO_ROOT
from agora.harness.system import RECORDER, SERVICES
from agora.runtime.tracing import TASK_ID_ATTRIBUTE
from bench.cpu import cpu_seconds

TASKS = int(os.environ.get("AGORA_BENCH_TASKS", "5000"))
TRACED_TASKS = int(os.environ.get("AGORA_BENCH_TRACED_TASKS", str(TASKS)))
ECHOES = int(os.environ.get("AGORA_BENCH_ECHOES", "5000"))
BULK_ENTRIES = 100
IDLE_SAMPLES = 30
IDLE_PAUSE_S = 0.3
CLIENT_THREADS = 16
ECHO_TOPIC = "agora.bench.echo"
RESULTS = Path(os.environ.get("AGORA_BENCH_RESULTS") or Path(__file__).parent / "results" / "market_e2e.json")
CHART_VALUES = REPO_ROOT / "deploy" / "helm" / "agora" / "values.yaml"
TRACE_PROBES = 200
"""Tasks of the traced burst (spread over it) looked up in Jaeger, to tell the share traced."""
DECISION_TOPICS = ("agora.task.awarded", "agora.task.rejected")
PUBLISHER = httpx.Client(limits=httpx.Limits(max_connections=CLIENT_THREADS), timeout=30)
"""One pooled client for every publish: connections are reused, as a real producer would."""


def _publish(replica: ServiceReplica, topic: str, data: dict[str, Any]) -> float:
    sent_at = time.time()
    url = f"{replica.dapr_http}/v1.0/publish/agora-pubsub/{topic}"
    PUBLISHER.post(url, json=data).raise_for_status()
    return sent_at


def _bulk_publish(replica: ServiceReplica, topic: str, payloads: list[dict[str, Any]]) -> float:
    """One Dapr bulk publish of `payloads` (each its own CloudEvent)."""
    sent_at = time.time()
    url = f"{replica.dapr_http}/v1.0-alpha1/publish/bulk/agora-pubsub/{topic}"
    entries = [
        {"entryId": str(i), "event": payload, "contentType": "application/json"}
        for i, payload in enumerate(payloads)
    ]
    answer = PUBLISHER.post(url, json=entries)
    answer.raise_for_status()
    return sent_at


def _bulk_burst(
    replica: ServiceReplica, topic: str, payloads: list[dict[str, Any]], key: str
) -> dict[str, float]:
    batches = [payloads[i : i + BULK_ENTRIES] for i in range(0, len(payloads), BULK_ENTRIES)]
    with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
        sent = list(pool.map(lambda batch: (batch, _bulk_publish(replica, topic, batch)), batches))
    return {p[key]: at for batch, at in sent for p in batch}


def _arrivals(recorder: ServiceReplica, topic: str, after: int = 0) -> list[dict[str, Any]]:
    url = f"{recorder.app_url}/v1/arrivals/{topic}"
    return list(PUBLISHER.get(url, params={"after": after}).json()["arrivals"])


def _burst(replica: ServiceReplica, topic: str, payloads: list[dict[str, Any]], key: str) -> dict[str, float]:
    with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
        sent = pool.map(lambda p: (p[key], _publish(replica, topic, p)), payloads)
        return dict(sent)


def _wait_for(
    recorder: ServiceReplica, topics: tuple[str, ...], key: str, ids: set[str], timeout_s: float = 300
) -> dict[str, float]:
    """When each id first arrived on any of `topics` (polled for what is new, so the watching
    costs the recorder little while the system works)."""
    deadline = time.monotonic() + timeout_s
    seen: dict[str, float] = {}
    read = dict.fromkeys(topics, 0)
    while time.monotonic() < deadline:
        for topic in topics:
            new = _arrivals(recorder, topic, read[topic])
            read[topic] += len(new)
            for arrival in new:
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


ENDED = ("COMPLETED", "FAILED", "PARTIAL", "REJECTED")


def _wait_for_ends(replica: ServiceReplica, task_ids: set[str], timeout_s: float = 900) -> None:
    """Until the task board lists every task of `task_ids` under a final status."""
    deadline = time.monotonic() + timeout_s
    ended: set[str] = set()
    while time.monotonic() < deadline:
        ended = set()
        for status in ENDED:
            url = f"{replica.dapr_http}/v1.0/invoke/taskboard/method/v1/tasks"
            listed = PUBLISHER.get(url, params={"status": status})
            listed.raise_for_status()
            ended.update(task_ids.intersection(listed.json()["task_ids"]))
        if len(ended) == len(task_ids):
            return
        time.sleep(0.5)
    raise TimeoutError(f"only {len(ended)} of {len(task_ids)} tasks reached their end")


def _per_task(before: dict[str, float], after: dict[str, float], count: int) -> dict[str, float]:
    used = {name: round((after[name] - before.get(name, 0.0)) * 1000 / count, 2) for name in after}
    return dict(sorted(used.items(), key=lambda item: -item[1]))


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


def chart_sampling_rate() -> str:
    """The Helm chart's default tracing.samplingRate: the share of traces a deployment keeps."""
    values = yaml.safe_load(CHART_VALUES.read_text())
    return str(values["tracing"]["samplingRate"])


@dataclass
class MarketBurst:
    """A burst of tasks through the market, from publish to every task's end on the board."""

    task_ids: set[str]
    decided: dict[str, float]
    """Publish → decision latencies and the rate (`_summary`)."""
    to_decision: dict[str, float]
    """CPU ms per task by process, until the last decision."""
    whole_life: dict[str, float]
    """CPU ms per task by process, until the board holds every task's end."""
    ends_after_s: float
    lost: list[str]
    decided_twice: list[str]


def start_market(
    cluster: LocalCluster, warm_prefix: str, replicas: int = 1
) -> tuple[ServiceReplica, ServiceReplica]:
    """Every service its own app (`replicas` of each), and the topic recorder; warmed up with a
    few tasks. Returns an allocator (its sidecar takes the publishes) and the recorder."""
    recorder_spec = ServiceSpec(
        RECORDER.app_id,
        RECORDER.module,
        env={"AGORA_RECORD_TOPICS": ",".join(f"agora-pubsub/{t}" for t in (*DECISION_TOPICS, ECHO_TOPIC))},
    )
    for spec in SERVICES:
        cluster.add_service(spec, replicas)
    [recorder] = cluster.add_service(recorder_spec)
    allocator = next(r for r in cluster.replicas if r.spec.app_id == "allocator")
    warm = task_payloads(warm_prefix, 20)
    _wait_for(recorder, DECISION_TOPICS, "task_id", set(_burst(allocator, "agora.tasks", warm, "task_id")))
    return allocator, recorder


def market_burst(
    cluster: LocalCluster, allocator: ServiceReplica, recorder: ServiceReplica, prefix: str, count: int
) -> MarketBurst:
    processes = list(cluster.processes())
    cpu_before = cpu_seconds(processes)
    task_sent = _burst(allocator, "agora.tasks", task_payloads(prefix, count), "task_id")
    decided = _summary(task_sent, _wait_for(recorder, DECISION_TOPICS, "task_id", set(task_sent), 1800))
    to_decision = _per_task(cpu_before, cpu_seconds(processes), count)
    ends_from = time.monotonic()
    _wait_for_ends(allocator, set(task_sent))
    ends_after_s = time.monotonic() - ends_from
    whole_life = _per_task(cpu_before, cpu_seconds(processes), count)
    decisions = _decisions(recorder, set(task_sent))
    return MarketBurst(
        task_ids=set(task_sent),
        decided=decided,
        to_decision=to_decision,
        whole_life=whole_life,
        ends_after_s=ends_after_s,
        lost=sorted(set(task_sent) - set(decisions)),
        decided_twice=sorted(task for task, made in decisions.items() if len(made) > 1),
    )


def _tasks_traced(cluster: LocalCluster, task_ids: set[str]) -> tuple[int, int]:
    """(tasks looked up, tasks Jaeger holds a trace of) over up to TRACE_PROBES of `task_ids`
    spread over the burst, found as the console finds a task's trace: by the task id on the
    allocator's intake span. Asked after the figures are taken, once the exporters had time to
    send their last spans."""
    ordered = sorted(task_ids)
    probes = ordered[:: max(1, len(ordered) // TRACE_PROBES)][:TRACE_PROBES]
    time.sleep(8)  # the apps' and sidecars' span batches go out every 5 s
    traced = 0
    for task_id in probes:
        found = PUBLISHER.get(
            f"{cluster.jaeger_query_url}/api/traces",
            params={"service": "allocator", "tags": json.dumps({TASK_ID_ATTRIBUTE: task_id}), "limit": 1},
        )
        found.raise_for_status()
        traced += bool(found.json().get("data"))
    return len(probes), traced


def _traced_burst(run: str, sampling_rate: str) -> tuple[MarketBurst, tuple[int, int]]:
    """The burst on a fresh system traced as the Helm chart ships it, into the local Jaeger."""
    with LocalCluster(
        "redis",
        run_dir=Path(tempfile.mkdtemp(prefix="agora-bench-traced-")),
        jaeger=True,
        trace_sampling_rate=sampling_rate,
    ) as cluster:
        allocator, recorder = start_market(cluster, f"warm-traced-{run}")
        burst = market_burst(cluster, allocator, recorder, f"traced-{run}", TRACED_TASKS)
        return burst, _tasks_traced(cluster, burst.task_ids)


def _total(used: dict[str, float]) -> float:
    return round(sum(used.values()), 1)


def main() -> None:
    run = uuid.uuid4().hex[:6]
    with LocalCluster("redis", run_dir=Path(tempfile.mkdtemp(prefix="agora-bench-"))) as cluster:
        allocator, recorder = start_market(cluster, f"warm-{run}")

        # One at a time first, while the system is idle (after a burst, its tasks' executions
        # and outcomes keep the services busy for a while).
        idle_tasks = task_payloads(f"idle-{run}", IDLE_SAMPLES)
        idle_p50 = _one_at_a_time(allocator, recorder, "agora.tasks", idle_tasks, "task_id", DECISION_TOPICS)
        idle_echoes = [{"echo_id": f"idle-echo-{run}-{i:03d}"} for i in range(IDLE_SAMPLES)]
        idle_echo_p50 = _one_at_a_time(allocator, recorder, ECHO_TOPIC, idle_echoes, "echo_id", (ECHO_TOPIC,))

        processes = list(cluster.processes())
        echoes = [{"echo_id": f"echo-{run}-{i:04d}"} for i in range(ECHOES)]
        cpu_before = cpu_seconds(processes)
        echo_sent = _burst(allocator, ECHO_TOPIC, echoes, "echo_id")
        echo = _summary(echo_sent, _wait_for(recorder, (ECHO_TOPIC,), "echo_id", set(echo_sent)))
        echo_cpu = _per_task(cpu_before, cpu_seconds(processes), ECHOES)
        bulk_echoes = [{"echo_id": f"bulk-echo-{run}-{i:04d}"} for i in range(ECHOES)]
        cpu_before = cpu_seconds(processes)
        bulk_sent = _bulk_burst(allocator, ECHO_TOPIC, bulk_echoes, "echo_id")
        bulk_echo = _summary(bulk_sent, _wait_for(recorder, (ECHO_TOPIC,), "echo_id", set(bulk_sent)))
        bulk_echo_cpu = _per_task(cpu_before, cpu_seconds(processes), ECHOES)

        untraced = market_burst(cluster, allocator, recorder, f"burst-{run}", TASKS)

    sampling_rate = chart_sampling_rate()
    traced, (probed, probed_traced) = _traced_burst(run, sampling_rate)

    market = untraced.decided
    whole_life, to_decision = untraced.whole_life, untraced.to_decision
    market_to_bare = round(market["per_second"] / echo["per_second"], 3)
    market_to_bulk = round(market["per_second"] / bulk_echo["per_second"], 3)
    traced_total = _total(traced.whole_life)
    result = {
        "benchmark": "market end to end (redis profile, every service its own app, real sidecars)",
        "client_threads": CLIENT_THREADS,
        "burst": {
            "tasks": TASKS,
            "tracing": "off",
            "publish_to_decision": market,
            "bare_publish_to_subscribe": echo,
            "bare_bulk_publish_to_subscribe": {**bulk_echo, "entries_per_publish": BULK_ENTRIES},
            "market_to_bare_rate": market_to_bare,
            "market_to_bare_bulk_rate": market_to_bulk,
            "tasks_lost": len(untraced.lost),
            "tasks_decided_twice": len(untraced.decided_twice),
            "last_end_after_last_decision_s": round(untraced.ends_after_s, 1),
            "cpu_ms_per_task_whole_life_total": _total(whole_life),
            "cpu_ms_per_task_to_decision_total": _total(to_decision),
            "cpu_ms_per_bare_event_total": _total(echo_cpu),
            "cpu_ms_per_bare_bulk_event_total": _total(bulk_echo_cpu),
            "cpu_ms_per_task_whole_life": whole_life,
            "cpu_ms_per_task_to_decision": to_decision,
        },
        "traced_burst": {
            "tasks": TRACED_TASKS,
            "tracing": "as the Helm chart ships it: sidecars' samplingRate and the apps' "
            "parentbased_traceidratio sampler at tracing.samplingRate, OTLP/gRPC to Jaeger",
            "sampling_rate": sampling_rate,
            "publish_to_decision": traced.decided,
            "rate_to_untraced": round(traced.decided["per_second"] / market["per_second"], 3),
            "tasks_lost": len(traced.lost),
            "tasks_decided_twice": len(traced.decided_twice),
            "last_end_after_last_decision_s": round(traced.ends_after_s, 1),
            "cpu_ms_per_task_whole_life_total": traced_total,
            "cpu_ms_per_task_whole_life_jaeger": traced.whole_life.get("jaeger", 0.0),
            "cpu_ms_per_task_whole_life_to_untraced": round(traced_total / _total(whole_life), 3),
            "cpu_ms_per_task_to_decision_total": _total(traced.to_decision),
            "cpu_ms_per_task_to_decision_jaeger": traced.to_decision.get("jaeger", 0.0),
            "tasks_probed_in_jaeger": probed,
            "tasks_probed_traced": probed_traced,
            "cpu_ms_per_task_whole_life": traced.whole_life,
            "cpu_ms_per_task_to_decision": traced.to_decision,
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
    print(f"{'':<36} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'per s':>7} {'CPU ms each':>12}")
    rows = (
        ("market: publish → award/reject", market, _total(whole_life)),
        (f"market, traced (sampling {sampling_rate})", traced.decided, traced_total),
        ("bare publish → subscribe", echo, _total(echo_cpu)),
        (f"bare bulk publish ({BULK_ENTRIES}) → subscribe", bulk_echo, _total(bulk_echo_cpu)),
    )
    for name, row, cpu in rows:
        figures = f"{row['p50_ms']:>8} {row['p99_ms']:>8} {row['max_ms']:>8} {row['per_second']:>7}"
        print(f"{name:<36} {figures} {cpu:>12}")
    print(
        f"market rate / bare rate: {market_to_bare} (single), {market_to_bulk} (bulk); "
        f"lost: {len(untraced.lost)}, decided twice: {len(untraced.decided_twice)}"
    )
    print(
        f"one at a time ({IDLE_SAMPLES}): publish → decision p50 {idle_p50} ms, "
        f"bare publish → subscribe p50 {idle_echo_p50} ms"
    )
    for window, used in (("whole life", whole_life), ("until the last decision", to_decision)):
        busiest = ", ".join(f"{name} {ms}" for name, ms in list(used.items())[:6])
        print(f"CPU per task, {window}: {_total(used)} ms (busiest: {busiest})")
    print(
        f"traced as the chart ships it (samplingRate {sampling_rate}), a burst of {TRACED_TASKS}: "
        f"{traced.decided['per_second']} tasks/s (untraced {market['per_second']}), CPU per task "
        f"whole life {traced_total} ms (untraced {_total(whole_life)}), of which Jaeger "
        f"{traced.whole_life.get('jaeger', 0.0)} ms; Jaeger holds a trace of {probed_traced} of "
        f"{probed} tasks looked up; lost: {len(traced.lost)}, decided twice: {len(traced.decided_twice)}"
    )
    print(f"written to {RESULTS}")
    problems = []
    for name, burst in (("untraced", untraced), ("traced", traced)):
        if burst.lost or burst.decided_twice:
            problems.append(
                f"{name}: tasks lost: {burst.lost[:10]}; decided twice: {burst.decided_twice[:10]}"
            )
    if probed_traced == 0 and probed * float(sampling_rate) >= 10:
        # At least ten expected: none at all means the traced figures were taken without tracing.
        problems.append(f"traced: Jaeger holds no trace of the {probed} tasks looked up")
    if problems:
        raise SystemExit("; ".join(problems))


if __name__ == "__main__":
    main()
