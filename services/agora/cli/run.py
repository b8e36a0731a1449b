"""`agora run`: the whole system started locally (every service with its sidecar, Jaeger, the
demo), the links that tell later commands where it runs, and watching it until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx

from agora.cli.demo import graph_continuation, invoker, run_demo, session_continuation
from agora.cli.problems import CliError
from agora.cli.sidecar import RUN_ROOT, point_link, run_links, unlink_if_pointing_at
from agora.cli.text import MAX_TEXT_CHARS, one_line, shorten
from agora.console.api_keys import local_api_key
from agora.console.users import LOCAL_PERSON, local_sign_in
from agora.harness.cluster import LOCAL_MODEL, LocalCluster, ServiceSpec
from agora.harness.processes import ProcessFailed
from agora.harness.system import (
    CONSOLE,
    EMBEDDED,
    JAEGER_DEFAULT_PORTS,
    SERVICES_BY_PROFILE,
    app_id_hosting,
    console_with,
)
from agora.harness.toolchain import MissingTool

__all__ = ["EXAMPLE_A2A_AGENT", "EXAMPLE_AGENTS", "agent_app_of", "cmd_run", "serve_locally"]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
EXAMPLE_AGENTS = (EXAMPLES / "agents" / "calculator.py", EXAMPLES / "graphs" / "review.py")
"""The example agent app, in a clone: a calculator agent (a calculator and a file reader as
tools) and the review graph (a branch, a tool, the market and a person)."""
EXAMPLE_A2A_AGENT = ("text-stats", EXAMPLES / "a2a" / "text_stats.py")
"""An A2A agent of no Agora code (the `a2a-sdk` alone), in a clone: `agora run` starts it beside
the example agents and puts it on the market by its card's URL, under this name."""


def cmd_run(args: argparse.Namespace) -> int:
    # Ctrl-C (SIGINT) stops the system even when this process inherited SIGINT ignored (a shell
    # starts background commands so): Python keeps an inherited SIG_IGN otherwise.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    RUN_ROOT.mkdir(exist_ok=True)
    run_dir = RUN_ROOT / time.strftime("%Y%m%d-%H%M%S")
    here, user_wide = run_links()
    try:
        with LocalCluster(
            args.profile,
            run_dir=run_dir.resolve(),
            jaeger=not args.no_jaeger,
            jaeger_ports=JAEGER_DEFAULT_PORTS,
            model=args.model,
        ) as cluster:
            point_link(here, Path(run_dir.name))
            point_link(user_wide, run_dir.resolve())
            return serve_locally(cluster, args, run_dir)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # one Ctrl-C is enough; clean up undisturbed
        print("\nstopped.")
        return 0
    except MissingTool as exc:
        raise CliError(str(exc)) from None
    except ProcessFailed as exc:
        first, *log_tail = str(exc).splitlines()
        raise CliError("\n".join([first, *(f"  {line}" for line in log_tail)])) from None
    finally:
        for link in (here, user_wide):
            unlink_if_pointing_at(link, run_dir)


def agent_app_of(profile: str, agents_file: Path | None, a2a_agents: str = "") -> list[ServiceSpec]:
    """The services of `profile` with a team's agents (and graphs) beside them (`agents_file`,
    else the examples when this is a clone) and the A2A agents `a2a_agents` names
    (AGORA_A2A_AGENTS: `name=card-url`, comma-separated): in the embedded default they are
    hosted by the one app (its in-memory broker is the only one), in the redis profile they
    are their own agent app, `agents`."""
    services = list(SERVICES_BY_PROFILE[profile])
    if agents_file is not None and not agents_file.is_file():
        raise CliError(f"{agents_file}: no such file (--agents names a Python file of SDK agents)")
    files = [agents_file] if agents_file is not None else [f for f in EXAMPLE_AGENTS if f.is_file()]
    if not files and not a2a_agents:
        return services
    env = {"AGORA_A2A_AGENTS": a2a_agents} if a2a_agents else {}
    paths = os.pathsep.join(str(f.resolve()) for f in files)
    if profile == "default":
        env |= {"AGORA_SDK_AGENTS_FILE": paths} if paths else {}
        return [replace(s, env={**s.env, **env}) if s.app_id == EMBEDDED.app_id else s for s in services]
    env |= {"AGORA_AGENTS_FILE": paths} if paths else {}
    return [*services, ServiceSpec("agents", "agora.sdk", env=env)]


def example_a2a_agent(cluster: LocalCluster) -> str:
    """The example A2A agent started beside the system, as AGORA_A2A_AGENTS names it; "" when
    this is no clone (no example to start)."""
    name, program = EXAMPLE_A2A_AGENT
    if not program.is_file():
        return ""
    port = cluster.ports.take()
    cluster.add_peer(f"a2a-{name}", [sys.executable, str(program), "--port", str(port)], port)
    return f"{name}=http://127.0.0.1:{port}"


def serve_locally(cluster: LocalCluster, args: argparse.Namespace, run_dir: Path) -> int:
    # The example A2A agent goes with the example agents: a team's own file replaces both.
    a2a = example_a2a_agent(cluster) if args.agents is None else ""
    for spec in agent_app_of(args.profile, args.agents, a2a):
        if spec.app_id != CONSOLE.app_id:
            cluster.add_service(spec)
    users_file, secret_file = local_sign_in(run_dir.resolve() / "console")
    keys_file, key_file = local_api_key(run_dir.resolve() / "console", LOCAL_PERSON)
    running = {r.spec.app_id for r in cluster.replicas}
    traces = {"AGORA_CONSOLE_JAEGER_URL": cluster.jaeger_query_url} if cluster.with_jaeger else {}
    [console] = cluster.add_service(
        console_with(running, str(users_file), AGORA_CONSOLE_API_KEYS_FILE=str(keys_file), **traces)
    )
    print(f"Agora is up (profile {args.profile}); logs in {run_dir}/logs")
    if cluster.model_url is not None:
        print(f"  model: the local model server at {cluster.model_url}")
    for replica in cluster.replicas:
        ep = replica.endpoints
        app = f"app :{ep.app_port}" if replica.spec.has_app else "(no app)"
        print(f"  {replica.name:<14} {app:<11}  daprd http :{ep.dapr_http_port}")
    if cluster.with_jaeger:
        # The console is traced too, but only once someone uses it: the services Jaeger knows from the start.
        traced = dict.fromkeys(
            r.spec.app_id for r in cluster.replicas if r.spec.has_app and r.spec.app_id != CONSOLE.app_id
        )
        print(f"  traces: {cluster.jaeger_query_url} (Jaeger query API; services: {', '.join(traced)})")
    app_ids = {r.spec.app_id for r in cluster.replicas}

    def app_id_for(service: str) -> str:
        return app_id_hosting(service, app_ids)

    print(f"  console: {console.app_url}  (sign in as {LOCAL_PERSON} with the secret in {secret_file})")
    print(f"  MCP server: {console.app_url}/mcp  (bearer key in {key_file})")
    print(f"  A2A agent: {console.app_url}/.well-known/agent-card.json  (the same key)")
    if a2a:
        name, _, url = a2a.partition("=")
        print(f"  on the market over A2A: {name}, an agent of the a2a-sdk alone ({url})")
    # People's tools, the demo among them, speak through the console's sidecar (topic scopes
    # and access policies name it), except in the default profile, whose in-memory pub/sub
    # reaches only the apps behind the sidecar it is published to: there, the embedded app's.
    tools = console if args.profile != "default" else cluster.replicas[0]
    watching = not args.no_demo
    if watching:
        try:
            # The local model answers a call in seconds and the demo makes dozens.
            local = args.model == "local"
            run_demo(
                tools.dapr_http,
                app_id_for,
                patience=20.0 if local else 1.0,
                model=LOCAL_MODEL if local else None,
            )
        except (httpx.HTTPError, TimeoutError, KeyError, ValueError, CliError) as exc:
            watching = False
            print(
                f"the demo stopped: {shorten(one_line(exc), MAX_TEXT_CHARS)}; see the logs", file=sys.stderr
            )
    invoke = invoker(tools.dapr_http, app_id_for)
    print("Running. Ctrl-C stops everything.", flush=True)
    watching_graph = watching
    with httpx.Client(timeout=10) as http:
        while all(p.running() for p in cluster.processes()):
            time.sleep(0.5)
            if watching and (continued := session_continuation(http, invoke)):
                print(continued, flush=True)
                watching = False
            if watching_graph and (ended := graph_continuation(http, invoke)):
                print(ended, flush=True)
                watching_graph = False
    print("a process exited unexpectedly; stopping", file=sys.stderr)
    return 1
