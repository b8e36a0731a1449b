"""Parking many escalations (redis profile, real sidecars): state size per escalation, the
latency of listing the waiting ones (a page of 50 out of all), and of a person's decision.

10,000 escalations are parked through the escalation service's API from 16 client threads;
then 20 list calls and 200 sequential resumes are timed.
"""

from __future__ import annotations

import concurrent.futures
import json
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from agora.harness import LocalCluster, ServiceReplica
from agora.harness.system import ESCALATION

PARKED = 10_000
LISTS = 20
RESUMES = 200
CLIENT_THREADS = 16
RESULTS = Path(__file__).parent / "results" / "escalations.json"


def _context(i: int) -> dict[str, object]:
    return {
        "kind": "escalation",
        "job_id": f"session-{i}",
        "sheet_num": i % 50,
        "validation_results": [{"kind": "schema", "passed": False}],
        "confidence": 0.42,
        "retry_count": 1,
        "error_history": ["step 3: high uncertainty (0.42)"],
        "prompt_used": "Migrate the orders table to the new schema",
        "output_summary": "Dropping the old table looks fine, but I am not sure.",
    }


def _park(http: httpx.Client, replica: ServiceReplica, escalation_id: str, i: int) -> None:
    body = {"waiting_party": {"kind": "session", "id": f"session-{i}"}, "context": _context(i)}
    http.put(replica.invoke_url(f"v1/escalations/{escalation_id}"), json=body).raise_for_status()


def _ms(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50_ms": round(cuts[49], 1), "p99_ms": round(cuts[98], 1), "max_ms": round(max(samples), 1)}


def main() -> None:
    with LocalCluster("redis", run_dir=Path(tempfile.mkdtemp(prefix="agora-bench-"))) as cluster:
        [replica] = cluster.add_service(ESCALATION)
        run = uuid.uuid4().hex[:6]
        ids = [f"bench-{run}-{i:05d}" for i in range(PARKED)]
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool, httpx.Client(timeout=60) as http:
            list(pool.map(lambda pair: _park(http, replica, *pair), ((e, i) for i, e in enumerate(ids))))
        park_s = time.perf_counter() - started

        with httpx.Client(timeout=60) as http:
            listing, total = [], 0
            for _ in range(LISTS):
                t0 = time.perf_counter()
                answer = http.get(
                    replica.invoke_url("v1/escalations?status=WAITING_FOR_HUMAN&limit=50")
                ).json()
                listing.append((time.perf_counter() - t0) * 1000)
                total = answer["total"]
            resumes = []
            for escalation_id in ids[:RESUMES]:
                decision = {"decision": {"kind": "escalation", "action": "retry"}, "who": "bench"}
                t0 = time.perf_counter()
                http.post(
                    replica.invoke_url(f"v1/escalations/{escalation_id}/resume"), json=decision
                ).raise_for_status()
                resumes.append((time.perf_counter() - t0) * 1000)
            record = http.get(replica.invoke_url(f"v1/escalations/{ids[-1]}")).json()

        assert cluster.redis_port is not None
        key = f"escalation||Escalation||{ids[-1]}||state"
        redis_bytes = subprocess.run(
            ["redis-cli", "-p", str(cluster.redis_port), "MEMORY", "USAGE", key],
            capture_output=True,
            text=True,
        ).stdout.strip()

    result: dict[str, Any] = {
        "benchmark": "escalations (redis profile, real sidecars)",
        "parked": PARKED,
        "park_seconds": round(park_s, 1),
        "parks_per_second": round(PARKED / park_s, 1),
        "waiting_total_listed": total,
        "record_json_bytes": len(json.dumps(record)),
        "redis_memory_bytes_per_escalation": int(redis_bytes) if redis_bytes.isdigit() else None,
        "list_page_of_50": _ms(listing),
        "resume": _ms(resumes),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"escalations: parked {PARKED} in {result['park_seconds']} s ({result['parks_per_second']}/s)")
    print(
        f"  state per escalation: {result['record_json_bytes']} B of JSON, "
        f"{result['redis_memory_bytes_per_escalation']} B in Redis"
    )
    print(
        f"  list (page of 50 of {total} waiting): p50 {result['list_page_of_50']['p50_ms']} ms, "
        f"p99 {result['list_page_of_50']['p99_ms']} ms"
    )
    print(f"  resume: p50 {result['resume']['p50_ms']} ms, p99 {result['resume']['p99_ms']} ms")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
