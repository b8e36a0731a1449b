"""Parking many escalations (redis profile, real sidecars): how fast they park, what a park
costs in CPU summed over every process, how fast the inbox's first page comes with all of them
waiting, and a person's decision.

10,000 escalations are parked through the escalation service's HTTP API, 16 at a time over
pooled connections; then 2,000 more through the `Escalation` actor's `park` (what a waiting party
calls), the same way. With all of them waiting, the first page of 50 is listed, unfiltered and
filtered, beside the bare baseline measured in the same run: one bulk read of the same 50
records' keys from the state store through the same sidecar. Then 200 sequential decisions.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from agora.escalation.store import RECORD_NAMESPACE
from agora.harness import LocalCluster, ServiceReplica
from agora.harness.system import ESCALATION
from bench.cpu import cpu_seconds

PARKED = 10_000
PARKED_THROUGH_THE_ACTOR = 2_000
AT_ONCE = 16
LISTS = 50
RESUMES = 200
STATE_STORE = "agora-state"
FILTERS = {
    "no filter": "",
    "kind=session": "&kind=session",
    "below_confidence=0.25": "&below_confidence=0.25",
    "older_than_minutes=0, kind=session, below_confidence=0.5": (
        "&older_than_minutes=0&kind=session&below_confidence=0.5"
    ),
}
RESULTS = Path(__file__).parent / "results" / "escalations.json"


def _park_body(i: int) -> dict[str, object]:
    context = {
        "kind": "escalation",
        "job_id": f"session-{i}",
        "step": i % 50,
        "validation_results": [{"kind": "schema", "passed": False}],
        "confidence": round(0.05 + (i % 90) / 100, 2),
        "retry_count": 1,
        "error_history": ["step 3: high uncertainty"],
        "prompt_used": "Migrate the orders table to the new schema",
        "output_summary": "Dropping the old table looks fine, but I am not sure.",
    }
    return {"waiting_party": {"kind": "session", "id": f"session-{i}"}, "context": context}


def _ms(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50_ms": round(cuts[49], 2), "p99_ms": round(cuts[98], 2), "max_ms": round(max(samples), 2)}


async def _parks(
    cluster: LocalCluster,
    count: int,
    url_of: Callable[[int], str],
    body_of: Callable[[int], dict[str, object]],
) -> dict[str, Any]:
    """PUT `count` parks, `AT_ONCE` in flight over pooled connections (aiohttp: the client's own
    CPU per request is a fraction of httpx's); what they cost, by process."""
    bodies = [json.dumps(body_of(i)).encode() for i in range(count)]
    processes = list(cluster.processes())
    cpu_before, client_before = cpu_seconds(processes), time.process_time()
    pending = iter(range(count))
    connector = aiohttp.TCPConnector(limit=AT_ONCE)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as http:

        async def worker() -> None:
            for i in pending:
                headers = {"content-type": "application/json"}
                async with http.put(url_of(i), data=bodies[i], headers=headers) as response:
                    if response.status >= 400:
                        raise RuntimeError(f"{url_of(i)} answered {response.status}: {await response.text()}")
                    await response.read()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(AT_ONCE)))
        seconds = time.perf_counter() - started
    cpu_after, client_cpu = cpu_seconds(processes), time.process_time() - client_before
    per_park = {
        name: round((used - cpu_before.get(name, 0.0)) * 1000 / count, 2) for name, used in cpu_after.items()
    }
    per_park["bench client"] = round(client_cpu * 1000 / count, 2)
    per_park = {name: ms for name, ms in sorted(per_park.items(), key=lambda item: -item[1]) if ms > 0}
    return {
        "parked": count,
        "seconds": round(seconds, 2),
        "per_second": round(count / seconds, 1),
        "cpu_ms_per_park": per_park,
        "cpu_ms_per_park_total": round(sum(per_park.values()), 2),
    }


async def _timed(
    http: httpx.AsyncClient, method: str, url: str, **kwargs: Any
) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = await http.request(method, url, **kwargs)
    elapsed = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    return elapsed, response


async def _measure(cluster: LocalCluster, replica: ServiceReplica) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    ids = [f"bench-{run}-{i:05d}" for i in range(PARKED)]
    through_api = await _parks(
        cluster, PARKED, lambda i: replica.invoke_url(f"v1/escalations/{ids[i]}"), _park_body
    )
    actor_ids = [f"bench-{run}-actor-{i:05d}" for i in range(PARKED_THROUGH_THE_ACTOR)]
    through_actor = await _parks(
        cluster,
        PARKED_THROUGH_THE_ACTOR,
        lambda i: f"{replica.dapr_http}/v1.0/actors/Escalation/{actor_ids[i]}/method/park",
        lambda i: _park_body(PARKED + i),
    )
    waiting = PARKED + PARKED_THROUGH_THE_ACTOR

    listing: dict[str, Any] = {}
    async with httpx.AsyncClient(timeout=60) as http:
        for name, query in FILTERS.items():
            url = replica.invoke_url(f"v1/escalations?status=WAITING_FOR_HUMAN&limit=50{query}")
            samples, baseline, total = [], [], 0
            for _ in range(LISTS):
                elapsed, answer = await _timed(http, "GET", url)
                samples.append(elapsed)
                page = answer.json()
                total = page["total"]
                keys = [f"{RECORD_NAMESPACE}:{e['escalation_id']}" for e in page["escalations"]]
                bulk = f"{replica.dapr_http}/v1.0/state/{STATE_STORE}/bulk"
                elapsed, read = await _timed(http, "POST", bulk, json={"keys": keys, "parallelism": 16})
                assert len(read.json()) == len(keys) == 50, (len(keys), name)
                baseline.append(elapsed)
            listing[name] = {
                "first_page_of_50": _ms(samples),
                "bare_bulk_read_of_the_same_50_keys": _ms(baseline),
                "total_waiting": total,
            }
        resumes = []
        for escalation_id in ids[:RESUMES]:
            decision = {"decision": {"kind": "escalation", "action": "retry"}, "who": "bench"}
            url = replica.invoke_url(f"v1/escalations/{escalation_id}/resume")
            resumes.append((await _timed(http, "POST", url, json=decision))[0])
        record = (await http.get(replica.invoke_url(f"v1/escalations/{ids[-1]}"))).json()
    return {
        "benchmark": "escalations (redis profile, real sidecars)",
        "waiting": waiting,
        "clients_at_once": AT_ONCE,
        "park_through_the_http_api": through_api,
        "park_through_the_actor": through_actor,
        "record_json_bytes": len(json.dumps(record)),
        "inbox_first_page": listing,
        "resume": _ms(resumes),
    }


def main() -> None:
    with LocalCluster("redis", run_dir=Path(tempfile.mkdtemp(prefix="agora-bench-"))) as cluster:
        [replica] = cluster.add_service(ESCALATION)
        result = asyncio.run(_measure(cluster, replica))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    for path in ("park_through_the_http_api", "park_through_the_actor"):
        parks = result[path]
        print(
            f"escalations, {path.replace('_', ' ')}: {parks['parked']} in {parks['seconds']} s "
            f"({parks['per_second']}/s), CPU per park {parks['cpu_ms_per_park_total']} ms "
            f"{parks['cpu_ms_per_park']}"
        )
    for name, figures in result["inbox_first_page"].items():
        print(
            f"  first page of 50 of {figures['total_waiting']} waiting ({name}): "
            f"p50 {figures['first_page_of_50']['p50_ms']} ms; bare bulk read of those 50 "
            f"p50 {figures['bare_bulk_read_of_the_same_50_keys']['p50_ms']} ms"
        )
    print(f"  resume: p50 {result['resume']['p50_ms']} ms, p99 {result['resume']['p99_ms']} ms")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
