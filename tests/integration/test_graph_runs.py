"""Durable graph runs in an agent app against real sidecars (redis profile): a run stops at its
human node as an escalation, survives a SIGKILL of its app while it waits, and the person's
decision resumes it after that node without running a finished node again; a market node's
task is allocated and completed through the market; a planning node and a debate node return
their services' results."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.system import CONSOLE, SERVICES
from tests.integration.helpers import eventually, replicas_of
from tests.integration.test_task_event_streams import read_stream

pytestmark = pytest.mark.integration

APPS = Path(__file__).resolve().parent / "apps"


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Path]]:
    run_dir = tmp_path_factory.mktemp("graph-runs-cluster")
    calls = run_dir / "graph-calls.txt"
    with LocalCluster(
        "redis", run_dir=run_dir, jaeger=True, extra_env={"OTEL_BSP_SCHEDULE_DELAY": "200"}
    ) as cluster:
        for spec in [*SERVICES, CONSOLE]:
            cluster.add_service(spec)
        cluster.add_service(
            ServiceSpec(
                "agents",
                "agora.sdk",
                env={"AGORA_AGENTS_FILE": str(APPS / "graph_agents.py"), "GRAPH_CALLS": str(calls)},
            )
        )
        yield cluster, calls


def console(cluster: LocalCluster) -> ServiceReplica:
    return replicas_of(cluster, "console")[0]


def run_url(cluster: LocalCluster, run_id: str, graph_id: str = "approval") -> str:
    return console(cluster).invoke_url(f"v1/graphs/{graph_id}/runs/{run_id}", "agents")


def run_in(
    cluster: LocalCluster, run_id: str, *statuses: str, graph_id: str = "approval"
) -> dict[str, Any] | None:
    """The run's record once its status is one of `statuses`."""
    answer = httpx.get(run_url(cluster, run_id, graph_id), timeout=10)
    record: dict[str, Any] | None = answer.json() if answer.status_code == 200 else None
    return record if record is not None and record["status"] in statuses else None


def span_names(cluster: LocalCluster, trace_id: str) -> set[str]:
    answer = httpx.get(f"{cluster.jaeger_query_url}/api/traces/{trace_id}", timeout=10)
    if answer.status_code != 200 or not answer.json().get("data"):
        return set()
    return {s["operationName"] for s in answer.json()["data"][0]["spans"]}


def traced_nodes(cluster: LocalCluster, trace_id: str, graph_id: str) -> list[str] | None:
    """The nodes whose spans are children of the run's span in Jaeger, in time order."""
    answer = httpx.get(f"{cluster.jaeger_query_url}/api/traces/{trace_id}", timeout=10)
    if answer.status_code != 200 or not answer.json().get("data"):
        return None
    spans = answer.json()["data"][0]["spans"]
    runs = [s for s in spans if s["operationName"] == f"graph.run {graph_id}"]
    if len(runs) != 1:
        return None
    run_span = runs[0]["spanID"]

    def under_run(span: dict[str, Any]) -> bool:
        return any(r["refType"] == "CHILD_OF" and r["spanID"] == run_span for r in span.get("references", []))

    nodes = [s for s in spans if s["operationName"].startswith("graph.node ") and under_run(s)]
    return [
        s["operationName"].removeprefix("graph.node ") for s in sorted(nodes, key=lambda s: s["startTime"])
    ]


def test_a_graph_run_waits_for_a_person_through_a_crash_and_goes_on_as_decided(
    market: tuple[LocalCluster, Path],
) -> None:
    cluster, calls = market
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    started = httpx.put(run_url(cluster, run_id), json={"input": "solar prices"}, timeout=30)
    assert started.status_code == 200, started.text
    assert started.json() == {"graph_id": "approval", "run_id": run_id, "created": True}

    waiting = eventually(lambda: run_in(cluster, run_id, "WAITING_FOR_HUMAN"), timeout=60)
    assert waiting["path"] == ["write", "approve"] and waiting["waiting_at"] == "approve"
    escalation_id = waiting["escalation_id"]
    assert escalation_id == f"graph.{run_id}.2"
    escalation = httpx.get(
        console(cluster).invoke_url(f"v1/escalations/{escalation_id}", "escalation"), timeout=10
    )
    assert escalation.status_code == 200, escalation.text
    parked = escalation.json()
    assert parked["waiting_party"] == {"kind": "graph_run", "id": run_id}
    assert parked["context"]["prompt_used"] == "Publish this draft?"

    # The spans of the steps so far reach Jaeger before the app is killed (a killed process
    # loses the spans it had not exported yet).
    trace_id = waiting["traceparent"].split("-")[1]
    eventually(
        lambda: {"graph.node write", "graph.node approve"} <= span_names(cluster, trace_id), timeout=30
    )
    [app] = replicas_of(cluster, "agents")
    app.kill_app()
    app.start_app()

    decided = httpx.post(
        console(cluster).invoke_url(f"v1/escalations/{escalation_id}/resume", "escalation"),
        json={"decision": {"kind": "escalation", "action": "modify_prompt", "modified_prompt": "in Spanish"},
              "who": "pat@example.com", "why": "approved"},
        timeout=30,
    )  # fmt: skip
    assert decided.status_code == 200, decided.text

    done = eventually(lambda: run_in(cluster, run_id, "COMPLETED"), timeout=60)
    assert done["path"] == ["write", "approve", "publish"]
    assert "published: A short note on solar prices." in done["state"]
    assert "Use this prompt instead:\\nin Spanish" in done["state"]
    assert calls.read_text().splitlines() == ["write solar prices"], "a recorded node never runs again"

    # One trace: the run's span, each node's span its child (also the node after the crash).
    assert done["traceparent"] == waiting["traceparent"]
    eventually(
        lambda: traced_nodes(cluster, trace_id, "approval") == ["write", "approve", "publish"], timeout=60
    )

    again = httpx.put(run_url(cluster, run_id), json={"input": "solar prices"}, timeout=30)
    assert again.status_code == 200 and again.json()["created"] is False
    other = httpx.put(run_url(cluster, run_id), json={"input": "wind"}, timeout=30)
    assert other.status_code == 409 and other.json()["error"] == "CONFLICT", other.text


def test_an_abort_ends_the_run_aborted_and_the_cli_starts_and_shows_runs(
    market: tuple[LocalCluster, Path],
) -> None:
    cluster, _ = market
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    port = ["--dapr-http-port", str(console(cluster).endpoints.dapr_http_port)]
    start = ["graph", "start", "approval", run_id, "--input", "wind", "--wait"]
    started = subprocess.run(
        [sys.executable, "-m", "agora.cli", *port, *start], capture_output=True, text=True, timeout=90
    )
    assert started.returncode == 0, started.stderr
    shown_lines = started.stdout.splitlines()
    # --wait prints the run each time it changes: on a busy machine it may show it RUNNING first.
    assert shown_lines[0] == f"approval/{run_id}: started", started.stdout
    assert f"approval/{run_id}: WAITING_FOR_HUMAN  write → approve" in shown_lines, started.stdout
    assert f"waits at approve for a person: escalation graph.{run_id}.2" in started.stdout
    waiting = eventually(lambda: run_in(cluster, run_id, "WAITING_FOR_HUMAN"), timeout=60)
    decided = httpx.post(
        console(cluster).invoke_url(f"v1/escalations/{waiting['escalation_id']}/resume", "escalation"),
        json={"decision": {"kind": "escalation", "action": "abort"}, "who": "pat@example.com", "why": "no"},
        timeout=30,
    )
    assert decided.status_code == 200, decided.text
    aborted = eventually(lambda: run_in(cluster, run_id, "ABORTED"), timeout=60)
    assert aborted["path"] == ["write", "approve"] and "aborted by pat@example.com" in aborted["reason"]
    shown = subprocess.run(
        [sys.executable, "-m", "agora.cli", *port, "graph", "show", "approval", run_id],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == f"approval/{run_id}: ABORTED  write → approve"
    assert "reason: aborted by pat@example.com at node approve" in shown.stdout


def test_a_graph_run_s_event_stream_shows_each_change_resumes_after_the_last_seen_and_ends_with_the_run(
    market: tuple[LocalCluster, Path],
) -> None:
    cluster, _ = market
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    assert httpx.put(run_url(cluster, run_id), json={"input": "tide"}, timeout=30).status_code == 200
    events_url = f"{run_url(cluster, run_id)}/events"
    eventually(lambda: httpx.get(run_url(cluster, run_id), timeout=10).status_code == 200, timeout=60)
    waiting = read_stream(events_url, stop=frozenset({"WAITING_FOR_HUMAN"}), state_key="status")
    assert [kind for kind, _, _ in waiting] == ["graph_run"] * len(waiting)
    _, last, seen = waiting[-1]
    assert last["status"] == "WAITING_FOR_HUMAN" and last["path"] == ["write", "approve"], last
    assert seen is not None
    assert seen == last["revision"] + 1
    decided = httpx.post(
        console(cluster).invoke_url(f"v1/escalations/{last['escalation_id']}/resume", "escalation"),
        json={"decision": {"kind": "escalation", "action": "abort"}, "who": "pat@example.com", "why": "no"},
        timeout=30,
    )
    assert decided.status_code == 200, decided.text

    rest = read_stream(events_url, last_event_id=seen)  # resumed after the event last seen

    assert rest[-1][0] == "end", rest
    changes = [(data, event_id) for kind, data, event_id in rest if kind == "graph_run"]
    assert changes and all(event_id is not None and event_id > seen for _, event_id in changes), changes
    assert changes[-1][0]["status"] == "ABORTED", changes
    missing = httpx.get(f"{run_url(cluster, 'never-started')}/events", timeout=30)
    assert missing.status_code == 404 and missing.json()["error"] == "NOT_FOUND", missing.text


def test_a_run_of_an_unknown_graph_or_with_a_bad_state_is_refused(market: tuple[LocalCluster, Path]) -> None:
    cluster, _ = market
    unknown = httpx.put(run_url(cluster, "r-1", graph_id="nope"), json={"input": "x"}, timeout=30)
    assert unknown.status_code == 404 and unknown.json()["error"] == "NOT_FOUND", unknown.text
    bad = httpx.put(run_url(cluster, "r-2"), json={"input": 7, "status": "NONSENSE"}, timeout=30)
    assert bad.status_code == 422 and bad.json()["error"] == "INVALID_ARGUMENT", bad.text
    assert "input" in bad.json()["message"] and "status" in bad.json()["message"]
    missing = httpx.get(run_url(cluster, "never-started"), timeout=30)
    assert missing.status_code == 404, missing.text


def test_a_market_node_s_task_is_allocated_and_completed_through_the_market(
    market: tuple[LocalCluster, Path],
) -> None:
    cluster, _ = market
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    body = {"input": "Summarize the state of solar power in Spain"}
    assert httpx.put(run_url(cluster, run_id, "research"), json=body, timeout=30).status_code == 200

    done = eventually(
        partial(run_in, cluster, run_id, "COMPLETED", "FAILED", graph_id="research"), timeout=90
    )
    assert done["status"] == "COMPLETED", done["reason"]
    state = json.loads(done["state"])
    result = state["market"]["ask"]
    assert result["task_id"] == f"graph.{run_id}.1" and result["agent_id"]
    board = httpx.get(console(cluster).invoke_url(f"v1/tasks/{result['task_id']}", "taskboard"), timeout=10)
    assert board.status_code == 200, board.text
    # The node records the board's end, and the condition routes the success on to its note.
    assert board.json()["status"] == result["status"] == "COMPLETED" and result["succeeded"] is True
    assert board.json()["outcome"]["summary"] == result["summary"]
    assert done["path"] == ["ask", "check", "note"], done["state"]
    assert state["output"] == f"{result['agent_id']} answered: {result['summary']}"
    assert board.json()["allocation"]["winning_agent_id"] == result["agent_id"]


def test_a_planning_node_and_a_debate_node_return_their_services_results(
    market: tuple[LocalCluster, Path],
) -> None:
    cluster, _ = market
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    body = {"input": "Write a market report on home solar batteries in Spain with sources and data"}
    assert httpx.put(run_url(cluster, run_id, "plan_then_debate"), json=body, timeout=30).status_code == 200

    ended = partial(run_in, cluster, run_id, "COMPLETED", "FAILED", graph_id="plan_then_debate")
    done = eventually(ended, timeout=240)
    assert done["status"] == "COMPLETED", done["reason"]
    assert done["path"] == ["plan", "debate"]
    state = json.loads(done["state"])
    plan, debate = state["plans"]["plan"], state["debates"]["debate"]
    assert plan["plan_id"] == f"graph.{run_id}.1" and plan["state"] == "COMPLETED", plan
    shown = httpx.get(console(cluster).invoke_url(f"v1/plans/{plan['plan_id']}", "planner"), timeout=10)
    assert shown.json()["state"] == plan["state"]
    assert shown.json()["result"]["final_output"] == plan["result"]["final_output"]
    assert debate["debate_id"] == f"graph.{run_id}.2" and debate["state"] == "COMPLETED", debate
    asked = httpx.get(console(cluster).invoke_url(f"v1/debates/{debate['debate_id']}", "debate"), timeout=10)
    assert asked.json()["state"] == debate["state"]
    assert asked.json()["question"].startswith("Should the report be published")
    assert state["output"] == (debate["final_answer"] or debate["reason"])
