"""Two replicas of every service (allocator, registry, task board, reputation, worker,
uncertainty, escalation, planner, debate, console) on one system. During the fault matrix's
burst one replica of a service is SIGKILLed, app and sidecar together as a pod dies, and left
down: the other carries the burst alone. Work topics share one consumer group per app, so the
survivor takes the dead replica's pending messages; actors move to the surviving host through
placement; the sweeps every replica runs (the award watch, the stale-task sweep, the registry's
reload) are idempotent, so two of them never decide, count or announce anything twice.

`make test` runs the task board's row (the host of the `Task` actors); `AGORA_REPLICA_ROWS=all`
(`make chaos`) every service's."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from agora.harness import LocalCluster
from agora.harness.system import CONSOLE, SERVICES
from tests.integration.helpers import STORE_PROFILE, replicas_of
from tests.integration.test_fault_matrix import (
    FAULTS,
    Matrix,
    assert_the_row_holds,
    matrix_on,
)

pytestmark = pytest.mark.integration

ALL_ROWS = tuple(f"replica:{s.app_id}" for s in (*SERVICES, CONSOLE))
ROWS = ALL_ROWS if os.environ.get("AGORA_REPLICA_ROWS") == "all" else ("replica:taskboard",)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    run_dir = tmp_path_factory.mktemp("replicas")
    with (
        LocalCluster(STORE_PROFILE, run_dir=run_dir, redis_persistence=True) as cluster,
        matrix_on(cluster, replicas=2) as found,
    ):
        yield found


@pytest.mark.parametrize("fault_name", ROWS)
def test_a_burst_goes_on_with_one_of_two_replicas_killed(matrix: Matrix, fault_name: str) -> None:
    app_id = fault_name.removeprefix("replica:")
    killed = replicas_of(matrix.cluster, app_id)[1]
    matrix.baseline()
    result = matrix.run(FAULTS[fault_name])
    print(f"{fault_name}: {result}")

    assert all(len(replicas_of(matrix.cluster, s.app_id)) == 2 for s in (*SERVICES, CONSOLE))
    assert killed.app is not None and killed.app.running(), "the killed replica is back for the next row"
    assert_the_row_holds(matrix, result)
