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
CONSOLE = ServiceSpec("console", "agora.console")
"""The web console people decide escalations on (agora.console), and the Dapr identity people's
tools (the `agora` CLI) call through: the only caller the escalation service lets resume
(components/access-control/). Nobody can sign in to its pages unless `console_with` says who."""
RECORDER = ServiceSpec(
    "recorder",
    "agora.harness.recorder",
    env={
        "AGORA_RECORD_TOPICS": (
            "agora-pubsub/agora.deadletter,agora-pubsub/agora.task.awarded,"
            "agora-pubsub/agora.escalation.resolved,agora-pubsub/agora.plan.completed,"
            "agora-pubsub/agora.debate.completed,agora-pubsub/agora.cost.events"
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
    "postgres": (*SERVICES, CONSOLE),
}


def console_with(running_app_ids: Collection[str], users_file: str | None = None, **env: str) -> ServiceSpec:
    """The console beside the apps running: it asks the services' own apps, or the embedded
    app that hosts them all (the default profile), and signs in the people of `users_file`."""
    settings: dict[str, str] = {}
    if app_id_hosting("escalation", running_app_ids) == EMBEDDED.app_id:
        settings["AGORA_CONSOLE_SERVICES_APP_ID"] = EMBEDDED.app_id
    if users_file is not None:
        settings["AGORA_CONSOLE_USERS_FILE"] = users_file
    return ServiceSpec(CONSOLE.app_id, CONSOLE.module, env={**settings, **env})


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
