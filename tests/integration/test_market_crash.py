"""A SIGKILLed allocator in the middle of a burst: every task ends terminal or resumable, and
after a restart every task is decided exactly once."""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from typing import Any, cast

import httpx

from agora.harness import LocalCluster
from tests.integration.helpers import eventually, present, replicas_of
from tests.integration.test_market import TERMINAL, publish_task, show, task

BURST = 100
RESUMABLE = {"PENDING", "BIDDING", "ALLOCATED"}


def test_killed_allocator_leaves_no_task_lost_or_allocated_twice(apps_cluster: LocalCluster) -> None:
    allocator = replicas_of(apps_cluster, "allocator")[0]
    batch = uuid.uuid4().hex[:6]
    specs = [task(task_id=f"burst-{batch}-{i:03d}") for i in range(BURST)]

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        publishing = [pool.submit(publish_task, allocator, spec) for spec in specs]
        # Kill once the board shows the burst is under way, mid-flight.
        eventually(
            lambda: sum(show(apps_cluster, s["task_id"]) is not None for s in specs[:20]) >= 5, timeout=30
        )
        allocator.kill_app()
        killed_at = time.monotonic()
        for future in publishing:
            future.result()  # the sidecar still accepts publications while its app is down

    # While the app is down, whatever reached the board is terminal or resumable.
    records: dict[str, dict[str, Any] | None] = {
        s["task_id"]: show(apps_cluster, s["task_id"]) for s in specs
    }
    for task_id, record in records.items():
        assert record is None or record["status"] in TERMINAL | RESUMABLE, (task_id, record)

    allocator.start_app()
    assert time.monotonic() - killed_at < 60, "restart within the delivery retry window"

    def all_settled() -> dict[str, dict[str, Any]] | None:
        settled = {s["task_id"]: show(apps_cluster, s["task_id"]) for s in specs}
        open_tasks = {
            task_id: r and {k: r[k] for k in ("status", "award_published", "history", "awards", "outcome")}
            for task_id, r in settled.items()
            if r is None or r["status"] not in TERMINAL
        }
        assert not open_tasks, f"{len(open_tasks)} tasks not settled: {open_tasks}"
        return cast(dict[str, dict[str, Any]], settled)

    final = eventually(all_settled, timeout=120, interval=1.0)
    for task_id, record in final.items():
        decisions = [h["status"] for h in record["history"] if h["status"] in {"ALLOCATED", "REJECTED"}]
        assert len(decisions) == 1, (task_id, record["history"])
        assert record["award_published"], task_id
        if record["status"] != "REJECTED":
            assert record["outcome"]["agent_id"] == record["allocation"]["winning_agent_id"]
    assert httpx.get(f"{allocator.app_url}/readyz", timeout=5).status_code == 200


def test_allocation_interrupted_by_an_unreachable_registry_completes_when_it_returns(
    apps_cluster: LocalCluster,
) -> None:
    """The allocator's background run fails part way (no registry answers); it keeps the task
    undecided (PENDING) on the board, retries with backoff, and decides it once the registry is
    back."""
    allocator = replicas_of(apps_cluster, "allocator")[0]
    registries = replicas_of(apps_cluster, "registry")
    spec = task()
    for registry in registries:
        registry.kill_app()
    try:
        publish_task(allocator, spec)
        # Up to a redelivery cycle late: right after an app restart (the test above) daprd
        # can hand a message to its previous subscription, which cancels it; the stream's
        # pending entry is then claimed again after `processingTimeout`.
        eventually(
            lambda: (record := show(apps_cluster, spec["task_id"])) and record["status"] == "PENDING",
            timeout=60,
        )
        app_log = apps_cluster.logs / f"{allocator.name}.app.log"

        def attempt_failed() -> bool:
            return any(
                "allocation interrupted" in line and spec["task_id"] in line
                for line in app_log.read_text().splitlines()
            )

        eventually(attempt_failed, timeout=60)
        assert present(show(apps_cluster, spec["task_id"]))["status"] == "PENDING"
    finally:
        for registry in registries:
            registry.start_app()

    def terminal() -> dict[str, Any] | None:
        r = show(apps_cluster, spec["task_id"])
        return r if r and r["status"] in TERMINAL else None

    record = eventually(terminal, timeout=90)
    assert record["allocation"]["status"] == "ALLOCATED"
    assert [h["status"] for h in record["history"]].count("ALLOCATED") == 1
