"""The services that make up Agora, as the local harness starts them."""

from __future__ import annotations

from agora.harness.cluster import ServiceSpec

REGISTRY = ServiceSpec("registry", "agora.registry")
RECORDER = ServiceSpec("recorder", "agora.harness.recorder")

SERVICES: tuple[ServiceSpec, ...] = (REGISTRY,)
"""Every Agora service, in start order."""

JAEGER_DEFAULT_PORTS = {
    "otlp_grpc": 4317,
    "otlp_http": 4318,
    "query": 16686,
    "query_grpc": 16685,
    "health": 13133,
}
