"""`agora-agent run my_agents.py` (or `python -m agora.sdk run my_agents.py`): serve the agents a
Python file defines as an agent app beside its own daprd. Without arguments, the file named by
AGORA_AGENTS_FILE."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agora.sdk._app import AgentAppSettings, load_app, serve_agents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agora-agent", description="Run a team's agents as an agent app.")
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser("run", help="serve the agents of a Python file")
    run.add_argument("file", type=Path, help="a Python file defining `agents` (a list of agora.sdk.Agent)")
    run.add_argument("--app-id", help="the app's Dapr app id (default: APP_ID, else 'agents')")
    args = parser.parse_args(argv)
    settings = AgentAppSettings()
    path = args.file if args.command == "run" else settings.agents_file
    if path is None:
        parser.error("name the agents' file: agora-agent run my_agents.py (or set AGORA_AGENTS_FILE)")
    if not path.is_file():
        print(f"error: {path}: no such file", file=sys.stderr)
        return 2
    if args.command == "run" and args.app_id:
        settings = settings.model_copy(update={"app_id": args.app_id})
    agents, graphs = load_app(path)
    serve_agents(agents, settings, graphs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
