"""`agora-agent run my_agents.py [more.py ...]` (or `python -m agora.sdk run ...`): serve the
agents and graphs Python files define as an agent app beside its own daprd. Without arguments,
the files named by AGORA_AGENTS_FILE (several separated like PATH entries)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agora.sdk._app import AgentAppSettings, file_list, load_apps, serve_agents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agora-agent", description="Run a team's agents as an agent app.")
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser("run", help="serve the agents and graphs of Python files")
    run.add_argument(
        "files", type=Path, nargs="+", help="Python files defining `agents` (agora.sdk.Agent) and/or `graphs`"
    )
    run.add_argument("--app-id", help="the app's Dapr app id (default: APP_ID, else 'agents')")
    args = parser.parse_args(argv)
    settings = AgentAppSettings()
    paths = args.files if args.command == "run" else file_list(settings.agents_file or "")
    if not paths:
        parser.error("name the agents' file: agora-agent run my_agents.py (or set AGORA_AGENTS_FILE)")
    for path in paths:
        if not path.is_file():
            print(f"error: {path}: no such file", file=sys.stderr)
            return 2
    if args.command == "run" and args.app_id:
        settings = settings.model_copy(update={"app_id": args.app_id})
    agents, graphs = load_apps(paths)
    serve_agents(agents, settings, graphs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
