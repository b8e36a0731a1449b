"""The services that make up Agora, as the local harness starts them."""

from __future__ import annotations

from collections.abc import Collection

from agora.harness.cluster import ServiceSpec

REGISTRY = ServiceSpec("registry", "agora.registry")
TASKBOARD = ServiceSpec("taskboard", "agora.taskboard")
REPUTATION = ServiceSpec("reputation", "agora.reputation")
ALLOCATOR = ServiceSpec("allocator", "agora.allocator")
WORKER = ServiceSpec("worker", "agora.worker")
ESCALATION = ServiceSpec("escalation", "agora.escalation")
UNCERTAINTY = ServiceSpec("uncertainty", "agora.uncertainty")
PLANNER = ServiceSpec("planner", "agora.planner")
DEBATE = ServiceSpec("debate", "agora.debate")
EMBEDDED = ServiceSpec("agora", "agora.embedded")
CONSOLE = ServiceSpec("console", None)
"""A sidecar without an app: the identity people's tools (the `agora` CLI) call through, and
the only caller the escalation service lets resume (components/access-control/)."""
RECORDER = ServiceSpec(
    "recorder",
    "agora.harness.recorder",
    env={
        "AGORA_RECORD_TOPICS": (
            "agora-pubsub/agora.deadletter,agora-pubsub/agora.task.awarded,"
            "agora-pubsub/agora.escalation.resolved,agora-pubsub/agora.plan.completed,"
            "agora-pubsub/agora.debate.completed"
        )
    },
)

SERVICES: tuple[ServiceSpec, ...] = (
    REGISTRY,
    TASKBOARD,
    REPUTATION,
    ALLOCATOR,
    WORKER,
    ESCALATION,
    UNCERTAINTY,
    PLANNER,
    DEBATE,
)
"""Every Agora service as its own app, in start order (the redis profile, Kubernetes)."""

SERVICES_BY_PROFILE: dict[str, tuple[ServiceSpec, ...]] = {
    "default": (EMBEDDED,),  # in-memory pub/sub is per sidecar: one app hosts every service
    "redis": (*SERVICES, CONSOLE),
}

JAEGER_DEFAULT_PORTS = {
    "otlp_grpc": 4317,
    "otlp_http": 4318,
    "query": 16686,
    "query_grpc": 16685,
    "health": 13133,
}


def app_id_hosting(service: str, running_app_ids: Collection[str]) -> str:
    """The app that serves `service`: itself when deployed as its own app, else the embedded
    app that hosts every service."""
    if service not in running_app_ids and EMBEDDED.app_id in running_app_ids:
        return EMBEDDED.app_id
    return service
