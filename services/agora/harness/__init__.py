"""Local cluster harness used by tests, `make run` and the benchmarks."""

from agora.harness.cluster import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.toolchain import Toolchain

__all__ = ["LocalCluster", "ServiceReplica", "ServiceSpec", "Toolchain"]
