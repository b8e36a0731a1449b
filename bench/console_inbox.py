"""The console's inbox with many waiting escalations (redis profile, real sidecars): 10,000
escalations are parked through the escalation service's API, then a person signs in to the
console and its inbox is timed: the whole page, a filtered page, the escalation service's
answer to the inbox's reading (a page of 50 waiting), the rows open pages poll for (8 pages
polling at once), and an escalation's page.

`python -m bench.console_inbox`; AGORA_BENCH_INBOX_PARKED changes how many are parked.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from agora.console.auth import Role
from agora.console.users import entry_yaml
from agora.harness import LocalCluster, ServiceReplica
from agora.harness.system import ESCALATION, console_with

PARKED = int(os.environ.get("AGORA_BENCH_INBOX_PARKED", "10000"))
PAGES = 20
POLLERS = 8
CLIENT_THREADS = 16
SECRET = "bench-inbox-secret"
RESULTS = Path(__file__).parent / "results" / "console_inbox.json"


def _park(http: httpx.Client, replica: ServiceReplica, escalation_id: str, i: int) -> None:
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
    body = {"waiting_party": {"kind": "session", "id": f"session-{i}"}, "context": context}
    http.put(replica.invoke_url(f"v1/escalations/{escalation_id}"), json=body).raise_for_status()


def _ms(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50_ms": round(cuts[49], 1), "p99_ms": round(cuts[98], 1), "max_ms": round(max(samples), 1)}


def _timed(http: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    http.get(url).raise_for_status()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="agora-bench-"))
    users = run_dir / "users.yaml"
    users.write_text("users:\n" + entry_yaml("bench", Role.DECIDER, SECRET))
    with LocalCluster("redis", run_dir=run_dir) as cluster:
        [escalation] = cluster.add_service(ESCALATION)
        [console] = cluster.add_service(console_with({"escalation"}, str(users)))
        run = uuid.uuid4().hex[:6]
        ids = [f"inbox-{run}-{i:05d}" for i in range(PARKED)]
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool, httpx.Client(timeout=60) as http:
            list(pool.map(lambda pair: _park(http, escalation, *pair), ((e, i) for i, e in enumerate(ids))))
        park_s = time.perf_counter() - started

        base = console.app_url
        with httpx.Client(timeout=120, base_url=base) as http:
            signed_in = http.post("/signin", data={"name": "bench", "secret": SECRET})
            assert signed_in.status_code == 303, signed_in.text
            cookies = dict(http.cookies)
            first_page = _timed(http, "/inbox")
            pages = [_timed(http, "/inbox") for _ in range(PAGES)]
            filtered = [_timed(http, "/inbox?kind=session&confidence=0.25") for _ in range(PAGES)]
            listings = [
                _timed(http, escalation.invoke_url("v1/escalations?status=WAITING_FOR_HUMAN&limit=50"))
                for _ in range(PAGES)
            ]
            escalation_pages = [_timed(http, f"/escalations/{e}") for e in ids[:PAGES]]

        def poller(_: int) -> list[float]:
            with httpx.Client(timeout=120, base_url=base, cookies=cookies) as own:
                return [_timed(own, "/inbox/rows") for _ in range(PAGES)]

        with concurrent.futures.ThreadPoolExecutor(POLLERS) as pool:
            polled = [sample for samples in pool.map(poller, range(POLLERS)) for sample in samples]

    result: dict[str, Any] = {
        "benchmark": "console inbox (redis profile, real sidecars)",
        "waiting": PARKED,
        "park_seconds": round(park_s, 1),
        "first_inbox_page_ms": round(first_page, 1),
        "inbox_page": _ms(pages),
        "inbox_page_filtered_session_below_0_25": _ms(filtered),
        "reading_a_page_of_50_waiting": _ms(listings),
        "inbox_rows_poll_8_pages_at_once": _ms(polled),
        "escalation_page": _ms(escalation_pages),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"console inbox: {PARKED} waiting (parked in {result['park_seconds']} s)")
    print(
        f"  first inbox page {result['first_inbox_page_ms']} ms; "
        f"inbox page p50 {result['inbox_page']['p50_ms']} ms"
    )
    print(f"  filtered inbox page p50 {result['inbox_page_filtered_session_below_0_25']['p50_ms']} ms")
    print(
        f"  reading a page of 50 waiting p50 {result['reading_a_page_of_50_waiting']['p50_ms']} ms; "
        f"8 pages polling at once p50 {result['inbox_rows_poll_8_pages_at_once']['p50_ms']} ms, "
        f"p99 {result['inbox_rows_poll_8_pages_at_once']['p99_ms']} ms"
    )
    print(f"  escalation page p50 {result['escalation_page']['p50_ms']} ms")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
