"""The embedded default: every Agora service in one app beside one sidecar.

The in-memory pub/sub broker lives inside a sidecar, so services on separate sidecars could
not hear each other's events. Hosting all service modules in one app keeps the embedded
default (in-memory components, no server) a working whole; the services are the same modules
that run as separate apps with the `redis` profile and on Kubernetes, and they still meet only
through topics, actor calls and service invocation (addressed to this app's id).
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI

from agora.allocator.app import AllocatorSettings, allocator_module
from agora.debate.app import DebateSettings, debate_module
from agora.escalation.app import EscalationSettings, escalation_module
from agora.planner.app import PlannerSettings, planner_module
from agora.registry.app import RegistrySettings, registry_module
from agora.reputation.app import ReputationSettings, reputation_module
from agora.runtime.service import ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings
from agora.sdk import Agent
from agora.sdk._app_files import a2a_agents, file_list, load_apps
from agora.sdk.graphs import CompiledGraph
from agora.taskboard.app import TaskBoardSettings, taskboard_module
from agora.uncertainty.app import uncertainty_module
from agora.worker.app import WorkerSettings, worker_module

APP_ID = "agora"


def create_app() -> FastAPI:
    settings = ServiceSettings(app_id=os.environ.get("APP_ID", APP_ID))
    return create_service_app(settings, service_modules(settings.app_id))


def team_app() -> tuple[list[Agent], list[CompiledGraph[Any]]]:
    """A team's SDK agents and graphs beside the reference worker's, from the Python files named
    by AGORA_SDK_AGENTS_FILE (several separated like PATH entries; `agora run` gives the
    examples; AGORA_AGENTS_FILE is the worker's YAML here), and the A2A agents AGORA_A2A_AGENTS
    names (`name=card-url`, comma-separated). They share the worker's agent app: its runs, its
    bids at this app's id, its graph runs."""
    agents, graphs = load_apps(file_list(os.environ.get("AGORA_SDK_AGENTS_FILE", "")))
    return [*agents, *a2a_agents(os.environ.get("AGORA_A2A_AGENTS", ""))], graphs


def service_modules(app_id: str) -> list[ServiceModule]:
    return [
        registry_module(RegistrySettings(app_id=app_id)),
        taskboard_module(TaskBoardSettings(app_id=app_id)),
        reputation_module(ReputationSettings(app_id=app_id)),
        allocator_module(AllocatorSettings(app_id=app_id, registry_app_id=app_id, taskboard_app_id=app_id)),
        worker_module(
            WorkerSettings(
                app_id=app_id, registry_app_id=app_id, taskboard_app_id=app_id, uncertainty_app_id=app_id
            ),
            *team_app(),
        ),
        escalation_module(EscalationSettings(app_id=app_id)),
        uncertainty_module(),
        planner_module(PlannerSettings(app_id=app_id)),
        debate_module(DebateSettings(app_id=app_id)),
    ]


def main() -> None:
    serve(create_app(), ServiceSettings(app_id=os.environ.get("APP_ID", APP_ID)))


if __name__ == "__main__":
    main()
