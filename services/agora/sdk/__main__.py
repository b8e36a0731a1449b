"""`agora-agent run my_agents.py [more.py ...]` (or `python -m agora.sdk run ...`): serve the
agents and graphs Python files define as an agent app beside its own daprd. Without arguments,
the files named by AGORA_AGENTS_FILE (several separated like PATH entries). A2A agents of any
framework join them by their card URLs: `--a2a NAME=URL` (again for more), or AGORA_A2A_AGENTS
(`NAME=URL,NAME=URL`); an app may serve those alone.

The app's sidecar must be ready before the files are loaded: a file may use it as it loads (a
dapr-agents `DurableAgent` reads the sidecar's metadata when it is constructed). Whoever starts
the sidecar names it (`dapr run` and the local system set DAPR_HTTP_PORT and DAPR_GRPC_PORT);
with none named and none answering on the default port, the command stops at once and says how
an agent app joins a system."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from agora.sdk._app import AgentAppSettings, serve_agents
from agora.sdk._app_files import a2a_agents, file_list, load_apps

HOW_TO_JOIN = (
    "An agent app runs beside its own Dapr sidecar: `make run PROFILE=redis AGENTS=FILE` starts the "
    "local system with it (`make run AGENTS=FILE` in the embedded default); beside a cluster of your "
    "own, `dapr run --app-id agents --app-port 8000 -- agora-agent run FILE` (docs/sdk.md, Agent apps)."
)
PROBE_TIMEOUT_S = 2.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agora-agent", description="Run a team's agents as an agent app.")
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser("run", help="serve the agents and graphs of Python files")
    run.add_argument(
        "files", type=Path, nargs="*", help="Python files defining `agents` (agora.sdk.Agent) and/or `graphs`"
    )
    run.add_argument(
        "--a2a",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="an A2A agent to put on the market, by its name and its card's URL (again for more)",
    )
    run.add_argument("--app-id", help="the app's Dapr app id (default: APP_ID, else 'agents')")
    args = parser.parse_args(argv)
    settings = AgentAppSettings()
    paths = args.files if args.command == "run" and args.files else file_list(settings.agents_file or "")
    named_a2a = ",".join([*(args.a2a if args.command == "run" else []), settings.a2a_agents or ""])
    try:
        remote = a2a_agents(named_a2a)
    except ValueError as exc:
        parser.error(str(exc))
    if not paths and not remote:
        parser.error(
            "name the agents' file: agora-agent run my_agents.py (or set AGORA_AGENTS_FILE), "
            "or A2A agents: --a2a NAME=URL (or AGORA_A2A_AGENTS)"
        )
    for path in paths:
        if not path.is_file():
            print(f"error: {path}: no such file", file=sys.stderr)
            return 2
    if args.command == "run" and args.app_id:
        settings = settings.model_copy(update={"app_id": args.app_id})
    problem = sidecar_problem(settings, os.environ)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    agents, graphs = load_apps(paths)
    serve_agents([*agents, *remote], settings, graphs)
    return 0


def sidecar_problem(settings: AgentAppSettings, environ: Mapping[str, str]) -> str | None:
    """Why the app's files cannot be loaded yet; None once its sidecar is ready. A sidecar named
    in the environment is waited for (`sidecar_wait_seconds`: it may be starting beside the
    app); without one, the default port is asked once."""
    endpoint = settings.dapr_http_endpoint
    named = "DAPR_HTTP_PORT" in environ or "DAPR_GRPC_PORT" in environ
    deadline = time.monotonic() + (settings.sidecar_wait_seconds if named else 0.0)
    while True:
        if _ready(endpoint):
            return None
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if not named:
        missing = f"no Dapr sidecar for this app: DAPR_HTTP_PORT is not set and none answers at {endpoint}."
        return f"{missing} {HOW_TO_JOIN}"
    late = f"the app's Dapr sidecar at {endpoint} was not ready within {settings.sidecar_wait_seconds:g} s."
    return f"{late} {HOW_TO_JOIN}"


def _ready(endpoint: str) -> bool:
    """Whether the sidecar's components are loaded (it may still be waiting for the app)."""
    try:
        return httpx.get(f"{endpoint}/v1.0/healthz/outbound", timeout=PROBE_TIMEOUT_S).is_success
    except httpx.HTTPError:
        return False


if __name__ == "__main__":
    sys.exit(main())
