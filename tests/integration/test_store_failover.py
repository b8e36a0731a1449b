"""A store that fails over: Redis as a primary, two replicas and three Sentinels, Dapr's Redis
components in their failover mode (`LocalCluster(redis_failover=True)`, harness/sentinel.py).
During the fault matrix's burst the primary is SIGKILLed, the Sentinels promote a replica, and
the old primary is started again and rejoins as a replica.

Redis replicates asynchronously: a write the primary acknowledged and had not yet sent on is
lost with it. Each run's figures (lost, doubled, time to settle) are measured and written as the
matrix's are; `AGORA_FAILOVER_RUNS` runs repeat the row on one system (`make chaos`: 5)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from agora.harness import LocalCluster
from tests.integration.test_fault_matrix import (
    FAULTS,
    Matrix,
    assert_the_row_holds,
    matrix_on,
)

pytestmark = pytest.mark.integration

RUNS = int(os.environ.get("AGORA_FAILOVER_RUNS", "1"))


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    run_dir = tmp_path_factory.mktemp("store-failover")
    with (
        LocalCluster("redis", run_dir=run_dir, redis_persistence=True, redis_failover=True) as cluster,
        matrix_on(cluster) as found,
    ):
        yield found


@pytest.mark.parametrize("run", range(1, RUNS + 1))
def test_a_burst_goes_on_through_a_failover_of_the_redis_primary(matrix: Matrix, run: int) -> None:
    before = matrix.cluster.redis_primary()
    matrix.baseline()
    result = matrix.run(FAULTS["redis-failover"])
    print(f"failover run {run}: {result}")

    assert matrix.cluster.redis_primary() != before, "a replica was promoted"
    assert_the_row_holds(matrix, result)
