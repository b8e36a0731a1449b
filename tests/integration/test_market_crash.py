"""A SIGKILLed allocator in the middle of a burst: every task ends terminal or resumable, and
after a restart every task is decided exactly once."""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from typing import Any

import httpx

from agora.harness import LocalCluster
from tests.integration.helpers import eventually, replicas_of
from tests.integration.test_market import TERMINAL, publish_task, show, task

BURST = 100
RESUMABLE = {"PENDING", "BIDDING", "ALLOCATED"}


def test_killed_allocator_leaves_no_task_lost_or_allocated_twice(redis_cluster: LocalCluster) -> None:
    allocator = replicas_of(redis_cluster, "allocator")[0]
    batch = uuid.uuid4().hex[:6]
    specs = [task(task_id=f"burst-{batch}-{i:03d}") for i in range(BURST)]

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        publishing = [pool.submit(publish_task, allocator, spec) for spec in specs]
        # Kill once the board shows the burst is under way, mid-flight.
        eventually(
            lambda: sum(show(redis_cluster, s["task_id"]) is not None for s in specs[:20]) >= 5, timeout=30
        )
        allocator.kill_app()
        killed_at = time.monotonic()
        for future in publishing:
            future.result()  # the sidecar still accepts publications while its app is down

    # While the app is down, whatever reached the board is terminal or resumable.
    records: dict[str, dict[str, Any] | None] = {
        s["task_id"]: show(redis_cluster, s["task_id"]) for s in specs
    }
    for task_id, record in records.items():
        assert record is None or record["status"] in TERMINAL | RESUMABLE, (task_id, record)

    allocator.start_app()
    assert time.monotonic() - killed_at < 60, "restart within the delivery retry window"

    def all_settled() -> dict[str, dict[str, Any]] | None:
        settled = {s["task_id"]: show(redis_cluster, s["task_id"]) for s in specs}
        if all(r is not None and r["status"] in TERMINAL for r in settled.values()):
            return settled  # type: ignore[return-value]
        return None

    final = eventually(all_settled, timeout=120, interval=1.0)
    for task_id, record in final.items():
        decisions = [h["status"] for h in record["history"] if h["status"] in {"ALLOCATED", "REJECTED"}]
        assert len(decisions) == 1, (task_id, record["history"])
        assert record["award_published"], task_id
        if record["status"] != "REJECTED":
            assert record["outcome"]["agent_id"] == record["allocation"]["winning_agent_id"]
    assert httpx.get(f"{allocator.app_url}/readyz", timeout=5).status_code == 200
