"""The `agora` command line itself: its arguments, one subcommand per command, and `main`,
which runs the command they name and prints an expected failure as `error: ...` lines (exit 1);
a command whose reader closed its output (`| head`) stops quietly, as Unix tools do."""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
from pathlib import Path

from agora.cli.a2a import cmd_a2a_join, cmd_a2a_leave, cmd_a2a_list
from agora.cli.debates import cmd_debate_ask, cmd_debate_list, cmd_debate_show
from agora.cli.escalations import cmd_escalations_list, cmd_escalations_resume, cmd_escalations_show
from agora.cli.graphs import cmd_graph_show, cmd_graph_start
from agora.cli.plans import cmd_plan_list, cmd_plan_show, cmd_plan_submit
from agora.cli.problems import CliError, print_error
from agora.cli.registry import cmd_deregister, cmd_filter, cmd_list, cmd_register
from agora.cli.run import cmd_run
from agora.cli.tasks import (
    cmd_task_cancel,
    cmd_task_dispute,
    cmd_task_list,
    cmd_task_publish,
    cmd_task_show,
    cmd_task_watch,
)
from agora.core.acceptance import DisputeVerdict
from agora.core.debate.record import DebateState
from agora.core.escalation.record import EscalationStatus, WaitingPartyKind
from agora.core.market import AllocationStatus
from agora.core.messages import DEFAULT_LEASE_SECONDS, MAX_LEASE_SECONDS, MIN_LEASE_SECONDS
from agora.core.plans.record import PlanState

__all__ = ["DESCRIPTION", "EXIT_READER_GONE", "build_parser", "main"]

DESCRIPTION = "`agora` command line: run the local system, and talk to a running one."


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agora", description=DESCRIPTION)
    parser.add_argument(
        "--dapr-http-port", type=int, help="sidecar to talk through (default: the running `agora run`)"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="start the whole system locally (Ctrl-C stops it)")
    run.add_argument("--profile", choices=["default", "redis", "postgres"], default="default")
    run.add_argument("--no-jaeger", action="store_true", help="do not start Jaeger")
    run.add_argument(
        "--model",
        choices=["offline", "local"],
        default="offline",
        help="offline: the deterministic offline model; local: a real model, the local model server "
        "(`make model-server`) beside the system",
    )
    run.add_argument("--no-demo", action="store_true", help="skip the demo")
    run.add_argument(
        "--agents",
        type=Path,
        help="a Python file of SDK agents to put on the market beside the services "
        "(default: the example calculator, examples/agents/calculator.py)",
    )
    run.set_defaults(func=cmd_run)

    registry = commands.add_parser("registry", help="capability registry").add_subparsers(
        dest="action", required=True
    )
    register = registry.add_parser(
        "register", help="register CapabilityProfiles from a YAML/JSON file (one or a list); validated first"
    )
    register.add_argument("file")
    register.add_argument(
        "--lease-seconds",
        type=int,
        default=DEFAULT_LEASE_SECONDS,
        help=f"how long the registrations last unless registered again "
        f"({MIN_LEASE_SECONDS}-{MAX_LEASE_SECONDS}; default {DEFAULT_LEASE_SECONDS})",
    )
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

    a2a = commands.add_parser(
        "a2a", help="A2A agents of any framework, joined to a running agent app by their card URLs"
    ).add_subparsers(dest="action", required=True)
    join = a2a.add_parser("join", help="put an A2A agent on the market (its card is read first)")
    join.add_argument("agent_id", help="its id on the market")
    join.add_argument("card_url", help="its Agent Card's URL, or the base URL it serves the card under")
    join.add_argument("--price", type=float, help="USD per step (default: the card's market terms)")
    join.add_argument("--max-steps", type=int, help="default: the card's market terms")
    join.set_defaults(func=cmd_a2a_join)
    joined = a2a.add_parser("list", help="the A2A agents joined to the app")
    joined.set_defaults(func=cmd_a2a_list)
    leave = a2a.add_parser("leave", help="take a joined A2A agent off the market")
    leave.add_argument("agent_id")
    leave.set_defaults(func=cmd_a2a_leave)
    for command in (join, joined, leave):
        command.add_argument("--app", default="agents", help="the app id of the agent app (default: agents)")

    task = commands.add_parser("task", help="tasks on the market").add_subparsers(
        dest="action", required=True
    )
    publish = task.add_parser(
        "publish", help="publish TaskSpecs from a YAML/JSON file (one or a list); validated first"
    )
    publish.add_argument("file")
    publish.set_defaults(func=cmd_task_publish)
    show = task.add_parser("show", help="a task's status, bids, scores and outcome")
    show.add_argument("task_id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_task_show)
    watch = task.add_parser("watch", help="a task's events as they happen, until it ends")
    watch.add_argument("task_id")
    watch.set_defaults(func=cmd_task_watch)
    cancel = task.add_parser("cancel", help="cancel a task that has not ended (its run is stopped)")
    cancel.add_argument("task_id")
    cancel.add_argument("--who", default=os.environ.get("USER", "operator"))
    cancel.add_argument("--why", default="")
    cancel.set_defaults(func=cmd_task_cancel)
    dispute = task.add_parser("dispute", help="dispute a finished task's outcome (within its window)")
    dispute.add_argument("task_id")
    dispute.add_argument("--verdict", required=True, choices=[v.value for v in DisputeVerdict])
    dispute.add_argument("--why", required=True)
    dispute.add_argument("--who", default=os.environ.get("USER", "operator"))
    dispute.set_defaults(func=cmd_task_dispute)
    listing = task.add_parser("list", help="task ids in a status")
    listing.add_argument("--status", default="ALLOCATED", choices=[s.value for s in AllocationStatus])
    listing.set_defaults(func=cmd_task_list)

    escalations = commands.add_parser("escalations", help="escalations waiting for a person").add_subparsers(
        dest="action", required=True
    )
    waiting = escalations.add_parser("list", help="escalations, newest first (--status: only those in it)")
    waiting.add_argument(
        "--status", choices=[s.value for s in EscalationStatus], help="default: every status"
    )
    waiting.add_argument(
        "--kind", choices=[k.value for k in WaitingPartyKind], help="only those this waits on"
    )
    waiting.add_argument("--older-than-minutes", type=int, help="only those waiting at least this long")
    waiting.add_argument("--below-confidence", type=float, help="only steps less confident than this")
    waiting.add_argument("--limit", type=int, default=50)
    waiting.add_argument("--offset", type=int, default=0)
    waiting.add_argument("--json", action="store_true", help="the page as JSON, for scripts")
    waiting.set_defaults(func=cmd_escalations_list)
    show_escalation = escalations.add_parser("show", help="one escalation with its context and suggestions")
    show_escalation.add_argument("escalation_id")
    show_escalation.add_argument("--json", action="store_true", help="the record as JSON, for scripts")
    show_escalation.set_defaults(func=cmd_escalations_show)
    resume = escalations.add_parser(
        "resume", help="decide a waiting escalation (AGORA_API_TOKEN if required)"
    )
    resume.add_argument("escalation_id")
    resume.add_argument(
        "--action", required=True, choices=["retry", "skip", "abort", "modify_prompt", "reassign"]
    )
    resume.add_argument(
        "--to",
        metavar="AGENT",
        help="with reassign: the task's bidder to hand it to (none: the next-best bid not tried yet)",
    )
    resume.add_argument("--prompt", help="the new prompt (required with modify_prompt)")
    resume.add_argument("--guidance")
    resume.add_argument("--who", default=os.environ.get("USER", "operator"))
    resume.add_argument("--why", default="")
    resume.add_argument(
        "--seen",
        metavar="DIGEST",
        help="the context digest `escalations show` printed: the decision applies only if the "
        "escalation still shows the same (else CONTEXT_CHANGED, naming what changed)",
    )
    resume.set_defaults(func=cmd_escalations_resume)

    plan = commands.add_parser("plan", help="long tasks planned as subgoal DAGs").add_subparsers(
        dest="action", required=True
    )
    submit = plan.add_parser(
        "submit", help="submit plan requests from a YAML/JSON file (one or a list); validated first"
    )
    submit.add_argument("file")
    submit.set_defaults(func=cmd_plan_submit)
    show_plan = plan.add_parser("show", help="a plan's waves and subgoals as a tree")
    show_plan.add_argument("plan_id")
    show_plan.add_argument("--watch", action="store_true", help="print again on each change until it ends")
    show_plan.add_argument("--json", action="store_true")
    show_plan.set_defaults(func=cmd_plan_show)
    plans = plan.add_parser("list", help="plans, newest first (--state: only those in it)")
    plans.add_argument("--state", choices=[s.value for s in PlanState], help="default: every state")
    plans.add_argument("--limit", type=int, default=50)
    plans.add_argument("--offset", type=int, default=0)
    plans.set_defaults(func=cmd_plan_list)

    graph = commands.add_parser("graph", help="runs of the graphs agent apps serve").add_subparsers(
        dest="action", required=True
    )
    start = graph.add_parser("start", help="start a run of a graph on an input")
    start.add_argument("graph_id")
    start.add_argument("run_id", nargs="?", help="the run's id (default: a new one)")
    start.add_argument("--input", required=True, help="the run's input (the state's `input`)")
    start.add_argument("--app", default="agents", help="the app id of the agent app serving it")
    start.add_argument("--wait", action="store_true", help="print it until it ends or waits for a person")
    start.set_defaults(func=cmd_graph_start)
    show_graph = graph.add_parser("show", help="a run: status, nodes run, where it waits, output")
    show_graph.add_argument("graph_id")
    show_graph.add_argument("run_id")
    show_graph.add_argument("--app", default="agents", help="the app id of the agent app serving it")
    show_graph.add_argument(
        "--watch", action="store_true", help="print again on each change until it settles"
    )
    show_graph.add_argument("--json", action="store_true")
    show_graph.set_defaults(func=cmd_graph_show)

    debate = commands.add_parser("debate", help="multi-agent debates").add_subparsers(
        dest="action", required=True
    )
    ask = debate.add_parser("ask", help="start a debate on a question (three offline debaters by default)")
    ask.add_argument("question")
    ask.add_argument(
        "--option",
        action="append",
        help="an answer the debate may give (again for each; at least two): every answer must be one",
    )
    ask.add_argument("--debaters", help="a YAML/JSON file of DebaterConfigs (at least two)")
    ask.add_argument("--id", help="the debate id (default: a new one)")
    ask.add_argument("--max-rounds", type=int, default=3)
    ask.add_argument("--aggregation", default="WEIGHTED_VOTE", choices=["MAJORITY_VOTE", "WEIGHTED_VOTE"])
    ask.add_argument(
        "--no-routing", action="store_true", help="debate even when the first model is confident"
    )
    ask.add_argument("--wait", action="store_true", help="print it round by round until it ends or waits")
    ask.set_defaults(func=cmd_debate_ask)
    show_debate = debate.add_parser("show", help="a debate round by round")
    show_debate.add_argument("debate_id")
    show_debate.add_argument("--watch", action="store_true", help="print again on each change until it ends")
    show_debate.add_argument("--json", action="store_true")
    show_debate.set_defaults(func=cmd_debate_show)
    debates = debate.add_parser("list", help="debates, newest first (--state: only those in it)")
    debates.add_argument("--state", choices=[s.value for s in DebateState], help="default: every state")
    debates.add_argument("--limit", type=int, default=50)
    debates.add_argument("--offset", type=int, default=0)
    debates.set_defaults(func=cmd_debate_list)
    return parser


EXIT_READER_GONE = 128 + signal.SIGPIPE
"""The exit code of a command whose reader went away (`agora task show ID | head`): what a shell
reports of a Unix tool that SIGPIPE ended."""


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            return _run(argv)
        finally:
            # What is still buffered goes now, so a reader that went away is found here, not
            # by the interpreter's last flush (which would print a traceback of it).
            sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_READER_GONE


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CliError as exc:
        print_error(str(exc))
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _discard_stdout() -> None:
    """Nothing more is written to the closed pipe: whatever is left in stdout's buffer goes to
    /dev/null when the interpreter flushes it at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):  # stdout is not a file (a test's capture)
        pass
