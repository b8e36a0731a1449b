"""Network faults between every sidecar and the state store: Redis (the state store and the broker
of the redis profile), or PostgreSQL (AGORA_TEST_STORE=postgres; RabbitMQ stays on the loopback),
on a host of the test's own, a network namespace joined to the machine by a veth pair with no
route out (`LocalCluster(store_host=True)`, harness/netns.py). During the fault matrix's burst,
for 20 s: 5 % of the packets each way lost, or a partition (iptables rules in the namespace), or
the store's answers 50 ± 20 ms late (Toxiproxy in front of the host: this machine's kernel has
no netem to delay packets); then healed. Each row: nothing lost or doubled,
and the time from the heal until the burst has settled. `make test` runs the partition;
`AGORA_NETWORK_FAULTS=all` (`make chaos`) all three."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from agora.harness import LocalCluster
from agora.harness.netns import netns_available
from tests.integration.helpers import STORE_PROFILE
from tests.integration.test_fault_matrix import (
    FAULTS,
    JITTER_MS,
    LATENCY_MS,
    Matrix,
    assert_the_row_holds,
    matrix_on,
)
from tests.required import cannot_run

pytestmark = pytest.mark.integration

ALL_ROWS = ("store-partition", "store-loss", "store-latency")
ROWS = ALL_ROWS if os.environ.get("AGORA_NETWORK_FAULTS") == "all" else ALL_ROWS[:1]
"""The rows run: the partition in `make test`, all three in `make chaos`."""


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    missing = netns_available()
    if missing is not None:
        cannot_run(f"no network namespace of the test's own can be made here: {missing}")
    run_dir = tmp_path_factory.mktemp("network-faults")
    with (
        LocalCluster(STORE_PROFILE, run_dir=run_dir, redis_persistence=True, store_host=True) as cluster,
        matrix_on(cluster) as found,
    ):
        yield found


@pytest.mark.parametrize("fault_name", ROWS)
def test_a_burst_survives_a_broken_network_to_the_store(matrix: Matrix, fault_name: str) -> None:
    host, proxy = matrix.cluster.store_host, matrix.cluster.store_proxy
    assert host is not None and proxy is not None
    matrix.baseline()
    result = matrix.run(FAULTS[fault_name])
    dropped = "" if fault_name == "store-latency" else f"{host.dropped_by_last_fault} packets dropped; "
    print(f"{fault_name}: {dropped}{result}")

    if fault_name == "store-latency":
        # While delayed, an exchange through the proxy waited at least 30 ms (the fault checks it).
        assert not proxy.delayed(), "healed: the store answers at once again"
        assert proxy.round_trip_ms() < LATENCY_MS - JITTER_MS, "healed: the store answers at once"
    else:
        assert host.dropped_by_last_fault > 0, "the fault dropped packets"
        assert host.dropped() == 0, "healed: nothing dropped since"
    assert_the_row_holds(matrix, result)
