"""`agora` command line: run the local system, and talk to a running one.

Commands that talk to a running system go through a Dapr sidecar's HTTP API (service
invocation and publish); by default they use the sidecar of the system `agora run` started
(found through `.run/current/cluster.json`), or `--dapr-http-port` / DAPR_HTTP_PORT.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from agora.core.market import AllocationStatus, TaskSpec
from agora.core.messages import Topic
from agora.demo import invoker, run_demo, session_continuation
from agora.harness.cluster import LocalCluster
from agora.harness.system import JAEGER_DEFAULT_PORTS, SERVICES_BY_PROFILE, app_id_hosting

RUN_ROOT = Path(".run")


def _running_services() -> list[dict[str, Any]]:
    manifest = RUN_ROOT / "current" / "cluster.json"
    return list(json.loads(manifest.read_text())["services"]) if manifest.is_file() else []


def _sidecar_port(args: argparse.Namespace) -> int:
    if args.dapr_http_port:
        return int(args.dapr_http_port)
    services = _running_services()
    if services:
        # People's tools speak as the console where there is one (the access-control
        # policies name it); otherwise through any sidecar.
        console = [s for s in services if s["app_id"] == "console"]
        return int((console or services)[0]["dapr_http_port"])
    if os.environ.get("DAPR_HTTP_PORT"):
        return int(os.environ["DAPR_HTTP_PORT"])
    raise SystemExit("no running Agora found: start one with `make run`, or pass --dapr-http-port")


def _app_id(service: str) -> str:
    return app_id_hosting(service, {s["app_id"] for s in _running_services()})


def _invoke(
    args: argparse.Namespace,
    method: str,
    path: str,
    body: Any = None,
    service: str = "registry",
    headers: dict[str, str] | None = None,
) -> Any:
    url = f"http://127.0.0.1:{_sidecar_port(args)}/v1.0/invoke/{_app_id(service)}/method/{path}"
    try:
        response = httpx.request(method, url, json=body, timeout=30, headers=headers)
    except httpx.ConnectError as exc:
        raise SystemExit(f"no Agora sidecar answers at {url} ({exc}); is `make run` running?") from exc
    if response.status_code >= 400:
        raise SystemExit(f"{service} answered {response.status_code}: {response.text}")
    return response.json()


def _print_agents(agents: list[dict[str, Any]]) -> None:
    if not agents:
        print("(no agents)")
    for agent in agents:
        print(
            f"{agent['agent_id']:<24} {agent['model_tier']:<9} ${agent['cost_per_step_usd']:<8.4f} "
            f"{', '.join(agent['skill_tags'])}"
        )


def cmd_run(args: argparse.Namespace) -> int:
    from agora.harness import LocalCluster

    RUN_ROOT.mkdir(exist_ok=True)
    run_dir = RUN_ROOT / time.strftime("%Y%m%d-%H%M%S")
    current = RUN_ROOT / "current"
    try:
        with LocalCluster(
            args.profile,
            run_dir=run_dir.resolve(),
            jaeger=not args.no_jaeger,
            jaeger_ports=JAEGER_DEFAULT_PORTS,
        ) as cluster:
            if current.is_symlink() or current.exists():
                current.unlink()
            current.symlink_to(run_dir.name)
            return _serve_locally(cluster, args, run_dir)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # one Ctrl-C is enough; clean up undisturbed
        print("\nstopped.")
        return 0
    finally:
        current.unlink(missing_ok=True)


def _serve_locally(cluster: LocalCluster, args: argparse.Namespace, run_dir: Path) -> int:
    for spec in SERVICES_BY_PROFILE[args.profile]:
        cluster.add_service(spec)
    print(f"Agora is up (profile {args.profile}); logs in {run_dir}/logs")
    for replica in cluster.replicas:
        ep = replica.endpoints
        app = f"app :{ep.app_port}" if replica.spec.module else "(no app)"
        print(f"  {replica.name:<14} {app:<11}  daprd http :{ep.dapr_http_port}")
    if cluster.with_jaeger:
        print(
            f"  traces: {cluster.jaeger_query_url} (Jaeger query API; service 'allocator', 'registry', ...)"
        )
    app_ids = {r.spec.app_id for r in cluster.replicas}

    def app_id_for(service: str) -> str:
        return app_id_hosting(service, app_ids)

    watching = not args.no_demo
    if watching:
        run_demo(cluster.replicas[0].dapr_http, app_id_for)
    invoke = invoker(cluster.replicas[0].dapr_http, app_id_for)
    print("Running. Ctrl-C stops everything.", flush=True)
    with httpx.Client(timeout=10) as http:
        while all(p.running() for p in cluster.processes()):
            time.sleep(0.5)
            if watching and (continued := session_continuation(http, invoke)):
                print(continued, flush=True)
                watching = False
    print("a process exited unexpectedly; stopping", file=sys.stderr)
    return 1


def cmd_register(args: argparse.Namespace) -> int:
    profiles = yaml.safe_load(Path(args.file).read_text())
    for profile in profiles if isinstance(profiles, list) else [profiles]:
        saved = _invoke(args, "POST", "v1/agents", profile)
        print(f"registered {saved['agent_id']}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    _print_agents(_invoke(args, "GET", "v1/agents")["agents"])
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    query = {"required_skills": args.required, "preferred_skills": args.preferred or []}
    if args.limit:
        query["limit"] = args.limit
    _print_agents(_invoke(args, "POST", "v1/agents/filter", query)["agents"])
    return 0


def cmd_deregister(args: argparse.Namespace) -> int:
    print(_invoke(args, "DELETE", f"v1/agents/{args.agent_id}"))
    return 0


def cmd_task_publish(args: argparse.Namespace) -> int:
    loaded = yaml.safe_load(Path(args.file).read_text())
    for raw in loaded if isinstance(loaded, list) else [loaded]:
        spec = TaskSpec.model_validate(raw)  # a typo is reported here, not dead-lettered later
        url = f"http://127.0.0.1:{_sidecar_port(args)}/v1.0/publish/agora-pubsub/{Topic.TASKS}"
        httpx.post(url, json=spec.model_dump(mode="json"), timeout=30).raise_for_status()
        print(f"published {spec.task_id}")
    return 0


def cmd_task_show(args: argparse.Namespace) -> int:
    record = _invoke(args, "GET", f"v1/tasks/{args.task_id}", service="taskboard")
    if args.json:
        print(json.dumps(record, indent=2))
        return 0
    allocation, outcome = record.get("allocation") or {}, record.get("outcome")
    print(f"{record['spec']['task_id']}: {record['status']}  ({record['spec']['description']})")
    print("  history: " + " → ".join(h["status"] for h in record["history"]))
    for score in allocation.get("all_scores", []):
        won = "★" if score["agent_id"] == allocation.get("winning_agent_id") else " "
        print(
            f"  {won} {score['agent_id']:<14} final={score['final_score']:+.3f} "
            f"calibrated={score['calibrated_success_prob']:.2f} reputation={score['reputation_score']:.2f} "
            f"cost={score['cost_score']:.2f} ucb={score['ucb_bonus']:.2f}"
        )
    if allocation.get("reject_reason"):
        print(f"  rejected: {allocation['reject_reason']}")
    if outcome:
        print(
            f"  outcome: {'success' if outcome['actual_success'] else 'failure'} by {outcome['agent_id']}, "
            f"{outcome['actual_steps']} steps, ${outcome['actual_cost_usd']:.4f}"
        )
    return 0


def cmd_task_list(args: argparse.Namespace) -> int:
    for task_id in _invoke(args, "GET", f"v1/tasks?status={args.status}", service="taskboard")["task_ids"]:
        print(task_id)
    return 0


def _print_escalation(record: dict[str, Any], *, full: bool) -> None:
    party, context = record["waiting_party"], record["context"]
    deadline = f"  deadline {record['deadline']}" if record.get("deadline") else ""
    print(
        f"{record['escalation_id']:<28} {record['status']:<18} {party['kind']} {party['id']}  "
        f"confidence {context.get('confidence', '-')}{deadline}"
    )
    if not full:
        return
    print(json.dumps(context, indent=2))
    for suggestion in context.get("historical_suggestions", []):
        print(f"  suggestion: {suggestion['action']} (succeeded: {suggestion.get('outcome_succeeded')})")
    for entry in record["audit"]:
        print(f"  audit: {entry['when']} {entry['who']}: {entry['what']} {entry.get('why') or ''}")


def cmd_escalations_list(args: argparse.Namespace) -> int:
    query = f"v1/escalations?status={args.status}&limit={args.limit}&offset={args.offset}"
    answer = _invoke(args, "GET", query, service="escalation")
    for record in answer["escalations"]:
        _print_escalation(record, full=False)
    shown = len(answer["escalations"])
    print(
        f"({shown} of {answer['total']} {args.status})"
        if answer["total"]
        else f"(no escalations {args.status})"
    )
    return 0


def cmd_escalations_show(args: argparse.Namespace) -> int:
    _print_escalation(
        _invoke(args, "GET", f"v1/escalations/{args.escalation_id}", service="escalation"), full=True
    )
    return 0


def cmd_escalations_resume(args: argparse.Namespace) -> int:
    decision: dict[str, Any] = {"kind": "escalation", "action": args.action}
    if args.prompt:
        decision["modified_prompt"] = args.prompt
    if args.guidance:
        decision["guidance"] = args.guidance
    token = os.environ.get("AGORA_API_TOKEN")
    record = _invoke(
        args,
        "POST",
        f"v1/escalations/{args.escalation_id}/resume",
        {"decision": decision, "who": args.who, "why": args.why},
        service="escalation",
        headers={"x-agora-token": token} if token else None,
    )
    decided = f"{record['decision']['action']} by {record['decided_by']}"
    print(f"{record['escalation_id']}: {record['status']} with {decided}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agora", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dapr-http-port", help="sidecar to talk through (default: the running `agora run`)")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="start the whole system locally (Ctrl-C stops it)")
    run.add_argument("--profile", choices=["default", "redis"], default="default")
    run.add_argument("--no-jaeger", action="store_true", help="do not start Jaeger")
    run.add_argument("--no-demo", action="store_true", help="skip the demo")
    run.set_defaults(func=cmd_run)

    registry = commands.add_parser("registry", help="capability registry").add_subparsers(
        dest="action", required=True
    )
    register = registry.add_parser("register", help="register profiles from a YAML/JSON file (one or a list)")
    register.add_argument("file")
    register.set_defaults(func=cmd_register)
    registry.add_parser("list", help="list registered agents").set_defaults(func=cmd_list)
    filter_ = registry.add_parser("filter", help="capable agents for required/preferred skills")
    filter_.add_argument("--required", nargs="+", required=True)
    filter_.add_argument("--preferred", nargs="*")
    filter_.add_argument("--limit", type=int)
    filter_.set_defaults(func=cmd_filter)
    deregister = registry.add_parser("deregister", help="remove an agent")
    deregister.add_argument("agent_id")
    deregister.set_defaults(func=cmd_deregister)

    task = commands.add_parser("task", help="tasks on the market").add_subparsers(
        dest="action", required=True
    )
    publish = task.add_parser("publish", help="publish TaskSpecs from a YAML/JSON file (one or a list)")
    publish.add_argument("file")
    publish.set_defaults(func=cmd_task_publish)
    show = task.add_parser("show", help="a task's status, bids, scores and outcome")
    show.add_argument("task_id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_task_show)
    listing = task.add_parser("list", help="task ids in a status")
    listing.add_argument("--status", default="ALLOCATED", choices=[s.value for s in AllocationStatus])
    listing.set_defaults(func=cmd_task_list)

    escalations = commands.add_parser("escalations", help="escalations waiting for a person").add_subparsers(
        dest="action", required=True
    )
    waiting = escalations.add_parser("list", help="escalations in a status (default: waiting)")
    waiting.add_argument(
        "--status", default="WAITING_FOR_HUMAN", choices=["WAITING_FOR_HUMAN", "RESOLVED", "EXPIRED"]
    )
    waiting.add_argument("--limit", type=int, default=50)
    waiting.add_argument("--offset", type=int, default=0)
    waiting.set_defaults(func=cmd_escalations_list)
    show_escalation = escalations.add_parser("show", help="one escalation with its context and suggestions")
    show_escalation.add_argument("escalation_id")
    show_escalation.set_defaults(func=cmd_escalations_show)
    resume = escalations.add_parser(
        "resume", help="decide a waiting escalation (AGORA_API_TOKEN if required)"
    )
    resume.add_argument("escalation_id")
    resume.add_argument("--action", required=True, choices=["retry", "skip", "abort", "modify_prompt"])
    resume.add_argument("--prompt", help="the new prompt (required with modify_prompt)")
    resume.add_argument("--guidance")
    resume.add_argument("--who", default=os.environ.get("USER", "operator"))
    resume.add_argument("--why", default="")
    resume.set_defaults(func=cmd_escalations_resume)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
