"""The embedded default: every Agora service in one app beside one sidecar.

The in-memory pub/sub broker lives inside a sidecar, so services on separate sidecars could
not hear each other's events. Hosting all service modules in one app keeps the embedded
default (in-memory components, no server) a working whole; the services are the same modules
that run as separate apps with the `redis` profile and on Kubernetes, and they still meet only
through topics, actor calls and service invocation (addressed to this app's id).
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI

from agora.allocator.app import AllocatorSettings, allocator_module
from agora.debate.app import DebateSettings, debate_module
from agora.escalation.app import EscalationSettings, escalation_module
from agora.planner.app import PlannerSettings, planner_module
from agora.registry.app import RegistrySettings, registry_module
from agora.reputation.app import reputation_module
from agora.runtime.service import ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings
from agora.sdk import AgentAppSettings, load_agents
from agora.sdk._app import agent_app_module
from agora.taskboard.app import TaskBoardSettings, taskboard_module
from agora.uncertainty.app import uncertainty_module
from agora.worker.app import WorkerSettings, worker_module

APP_ID = "agora"


def create_app() -> FastAPI:
    settings = ServiceSettings(app_id=os.environ.get("APP_ID", APP_ID))
    return create_service_app(settings, [*service_modules(settings.app_id), *agent_modules(settings.app_id)])


def agent_modules(app_id: str) -> list[ServiceModule]:
    """A team's agents beside the services: the Python file of SDK agents named by
    AGORA_SDK_AGENTS_FILE (`agora run` gives the example calculator) as an agent app's module,
    bidding for its agents at this app's id. (AGORA_AGENTS_FILE is the worker's YAML here.)"""
    path = os.environ.get("AGORA_SDK_AGENTS_FILE")
    if not path:
        return []
    settings = AgentAppSettings(
        app_id=app_id, registry_app_id=app_id, taskboard_app_id=app_id, agents_file=Path(path)
    )
    return [agent_app_module(load_agents(Path(path)), settings)]


def service_modules(app_id: str) -> list[ServiceModule]:
    settings = ServiceSettings(app_id=app_id)
    return [
        registry_module(RegistrySettings(app_id=settings.app_id)),
        taskboard_module(TaskBoardSettings(app_id=settings.app_id)),
        reputation_module(),
        allocator_module(
            AllocatorSettings(
                app_id=settings.app_id, registry_app_id=settings.app_id, taskboard_app_id=settings.app_id
            )
        ),
        worker_module(
            WorkerSettings(
                app_id=settings.app_id,
                registry_app_id=settings.app_id,
                uncertainty_app_id=settings.app_id,
            )
        ),
        escalation_module(EscalationSettings(app_id=settings.app_id)),
        uncertainty_module(),
        planner_module(PlannerSettings(app_id=settings.app_id)),
        debate_module(DebateSettings(app_id=settings.app_id)),
    ]


def main() -> None:
    serve(create_app(), ServiceSettings(app_id=os.environ.get("APP_ID", APP_ID)))


if __name__ == "__main__":
    main()
