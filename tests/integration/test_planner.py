"""The planner against real sidecars (redis profile, every service its own app): plans run in
waves through the market, verification retries and replans, a person decides stopped plans,
and a plan survives its app or sidecar being killed mid-wave.

The planner's model is a scripted OpenAI-compatible endpoint on loopback: plans are the
offline planner's six subgoals in three waves (research_sources, collect_data | analyse,
outline | write_draft, check_facts) and each test scripts the verdicts of its subgoals.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agora.core.task_lifecycle import DEFAULT_ACK_SECONDS
from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.scripted_model import ScriptedModel, model_env, serve_scripted_model
from agora.harness.system import CONSOLE, PLANNER, RECORDER, SERVICES
from tests.integration.helpers import (
    STORE_PROFILE,
    error_line,
    eventually,
    filter_ids,
    profile,
    record_at,
    record_in_state,
    recorded_message,
    replicas_of,
)

pytestmark = pytest.mark.integration

SKILLS = ["web_search", "summarize", "write", "sql", "python"]
FINAL = {"COMPLETED", "FAILED", "ABORTED"}
SETTLED = {*FINAL, "WAITING_FOR_HUMAN"}
"""A plan in one of these states will not move on its own."""
BREAKS_DRAFTING = "[draft breaks]"
"""In a plan's task: drafting its plan raises an error nobody foresaw (`apps.broken_activity`)."""


class Planner:
    def __init__(self, cluster: LocalCluster, model: ScriptedModel) -> None:
        self.cluster = cluster
        self.model = model
        self.console = replicas_of(cluster, "console")[0]
        self.app = replicas_of(cluster, "planner")[0]

    def submit(self, marker: str, **fields: Any) -> str:
        plan_id = f"{marker}-{uuid.uuid4().hex[:6]}"
        body = {
            "task": f"Plan {marker}: write a short report on solar panel prices in Spain this year",
            "skills": SKILLS,
            "min_success_threshold": 0.0,
            **fields,
        }
        response = httpx.put(self.console.invoke_url(f"v1/plans/{plan_id}", "planner"), json=body, timeout=30)
        assert response.status_code == 200, response.text
        assert response.json()["created"] is True
        return plan_id

    def show(self, plan_id: str) -> dict[str, Any] | None:
        return record_at(self.console, "planner", f"v1/plans/{plan_id}")

    def wait_for(self, plan_id: str, timeout: float = 90, states: set[str] = SETTLED) -> dict[str, Any]:
        """The plan once it is in one of `states` (by default: ended, or waiting for a person)."""
        return record_in_state(self.console, "planner", f"v1/plans/{plan_id}", states, timeout)

    def decide(self, escalation_id: str, decision: dict[str, Any]) -> None:
        response = httpx.post(
            self.console.invoke_url(f"v1/escalations/{escalation_id}/resume", "escalation"),
            json={"decision": decision, "who": "pat@example.com", "why": "test decision"},
            timeout=30,
        )
        assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def planner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Planner]:
    with serve_scripted_model() as (model, base_url):
        scripted = ServiceSpec(
            PLANNER.app_id,
            "tests.integration.apps.broken_activity",
            env={**model_env(base_url), "BROKEN_APP": "agora.planner.app",
                 "BROKEN_ACTIVITY": "plan.draft", "BROKEN_MARKER": BREAKS_DRAFTING},
        )  # fmt: skip
        services = [scripted if spec is PLANNER else spec for spec in SERVICES]
        with LocalCluster(
            STORE_PROFILE,
            run_dir=tmp_path_factory.mktemp("planner-cluster"),
            jaeger=True,
            extra_env={"OTEL_BSP_SCHEDULE_DELAY": "200"},
        ) as cluster:
            for spec in [*services, RECORDER, CONSOLE]:
                cluster.add_service(spec)
            yield Planner(cluster, model)


def subgoals(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in record["plan"]["subgoals"]}


def attempts_of(record: dict[str, Any], subgoal_id: str) -> list[dict[str, Any]]:
    return [a for a in record["attempts"] if a["subgoal_id"] == subgoal_id]


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


def test_a_plan_runs_in_waves_through_the_market(planner: Planner) -> None:
    plan_id = planner.submit("waves")
    record = planner.wait_for(plan_id)

    assert record["state"] == "COMPLETED", record["reason"]
    assert record["direct"] is False
    waves = record["waves"]
    assert len(record["plan"]["subgoals"]) >= 6 and len(waves) >= 3
    assert all(s["status"] == "COMPLETED" for s in record["plan"]["subgoals"])
    result = record["result"]
    assert result["success"] is True and result["failed_subgoals"] == []
    assert sorted(result["completed_subgoals"]) == sorted(s for wave in waves for s in wave)
    assert result["final_output"]
    assert result["total_token_usage"]["prompt_tokens"] > 0  # the planner's own model calls

    # Every subgoal went through the market: a task per attempt, awarded to an agent.
    agents = {a["agent_id"] for a in record["attempts"]}
    assert None not in agents and len(agents) >= 2, record["attempts"]
    # A wave's subgoals ran at the same time: each started before the other finished.
    first, second = (attempts_of(record, s)[0] for s in waves[0][:2])
    assert at(first["started_at"]) < at(second["finished_at"])
    assert at(second["started_at"]) < at(first["finished_at"])
    # Waves in order: nothing of a wave started before every subgoal of the previous one ended.
    for earlier, later in itertools.pairwise(waves):
        ended = max(at(attempts_of(record, s)[-1]["finished_at"]) for s in earlier)
        assert all(at(attempts_of(record, s)[0]["started_at"]) >= ended for s in later)

    # The lookahead chose a path for every attempt, and the agent was given it.
    assert all(a["approach"] for a in record["attempts"])
    task = httpx.get(
        planner.console.invoke_url(f"v1/tasks/{record['attempts'][0]['task_id']}", "taskboard"), timeout=30
    ).json()
    assert f"Approach: {record['attempts'][0]['approach']}" in task["spec"]["description"]

    completed = eventually(lambda: _completed_event(planner, plan_id), timeout=30)
    assert completed["state"] == "COMPLETED" and completed["result"]["success"] is True


def _completed_event(planner: Planner, plan_id: str) -> dict[str, Any] | None:
    return recorded_message(planner.cluster, "agora.plan.completed", "plan_id", plan_id)


def test_a_partial_result_is_retried_then_passes(planner: Planner) -> None:
    planner.model.script("partial", "analyse", "PARTIAL", "PASS")
    plan_id = planner.submit("partial")
    record = planner.wait_for(plan_id)

    assert record["state"] == "COMPLETED", record["reason"]
    tries = attempts_of(record, "analyse")
    assert [a["verdict"] for a in tries] == ["PARTIAL", "PASS"]
    assert tries[0]["task_id"] != tries[1]["task_id"]  # each attempt is its own market task
    assert subgoals(record)["analyse"]["attempts"] == 2
    assert record["replans"] == 0


def test_a_failed_subgoal_is_replanned_and_the_plan_completes(planner: Planner) -> None:
    planner.model.script("replan", "collect_data", "FAIL", "FAIL")  # the attempt, then its fallback
    plan_id = planner.submit("replan")
    record = planner.wait_for(plan_id)

    assert record["state"] == "COMPLETED", record["reason"]
    assert record["replans"] == 1 and record["plan"]["version"] == 2
    tries = attempts_of(record, "collect_data")
    assert [a["verdict"] for a in tries] == ["FAIL", "FAIL", "PASS"]
    assert tries[1]["description"].startswith("Try another way")  # the fallback strategy
    # Completed subgoals were kept by the replan, not run again.
    assert len(attempts_of(record, "research_sources")) == 1
    assert record["result"]["replans_triggered"] == 1


def test_a_failed_dependency_skips_its_dependents(planner: Planner) -> None:
    planner.model.script("skiprule", "collect_data", "FAIL", "FAIL")
    plan_id = planner.submit("skiprule", escalate=False, config={"max_replans": 0})
    record = planner.wait_for(plan_id)

    assert record["state"] == "FAILED"
    status = {sid: s["status"] for sid, s in subgoals(record).items()}
    assert status["collect_data"] == "FAILED"
    assert status["analyse"] == "SKIPPED"  # depends on collect_data
    assert status["write_draft"] == "SKIPPED" and status["check_facts"] == "SKIPPED"  # on analyse
    assert status["research_sources"] == "COMPLETED" and status["outline"] == "COMPLETED"
    assert "collect_data" in record["reason"]
    assert record["result"]["success"] is False
    assert attempts_of(record, "analyse") == []


@pytest.mark.parametrize("action", ["retry", "modify_prompt", "skip", "abort"])
def test_a_stopped_plan_goes_on_as_the_person_decides(planner: Planner, action: str) -> None:
    marker = f"stop-{action}"
    planner.model.script(marker, "outline", "FAIL", "FAIL")
    plan_id = planner.submit(marker, config={"max_replans": 0})
    waiting = planner.wait_for(plan_id)
    assert waiting["state"] == "WAITING_FOR_HUMAN", waiting["reason"]
    stop = waiting["stop"]
    assert stop["reason"] == "subgoal_failed" and stop["subgoal_id"] == "outline"

    escalation = httpx.get(
        planner.console.invoke_url(f"v1/escalations/{stop['escalation_id']}", "escalation"), timeout=30
    ).json()
    assert escalation["waiting_party"] == {"kind": "plan_step", "id": plan_id}
    assert escalation["context"]["job_id"] == plan_id
    assert len(escalation["context"]["error_history"]) == 2  # both attempts, with their verdicts

    decision: dict[str, Any] = {"kind": "escalation", "action": action}
    if action == "modify_prompt":
        decision["modified_prompt"] = "Outline the report in five bullet points"
    planner.decide(stop["escalation_id"], decision)
    record = planner.wait_for(plan_id, states=FINAL)
    outline = subgoals(record)["outline"]

    if action == "abort":
        assert record["state"] == "ABORTED"
        assert "pat@example.com" in record["reason"]
        assert "research_sources" in record["result"]["completed_subgoals"]  # partial results kept
        assert outline["status"] == "FAILED"
        return
    assert record["state"] == "COMPLETED", record["reason"]
    assert record["decisions"][0].startswith(f"pat@example.com: {action}")
    if action == "skip":
        assert outline["status"] == "SKIPPED" and record["waived"] == ["outline"]
        assert subgoals(record)["write_draft"]["status"] == "COMPLETED"  # ran without it
    else:
        assert outline["status"] == "COMPLETED"
        assert attempts_of(record, "outline")[-1]["verdict"] == "PASS"
    if action == "modify_prompt":
        assert outline["description"] == "Outline the report in five bullet points"
    completed = eventually(lambda: _completed_event(planner, plan_id), timeout=30)
    assert completed["decided_by"] == "pat@example.com"


def _crash(planner: Planner, kill: str) -> None:
    """Kill the planner's app or sidecar while a wave runs (a verification answer is held
    back, so the wave is in flight), then start it again."""
    replica: ServiceReplica = planner.app
    if kill == "app":
        replica.kill_app()
        time.sleep(1)
        replica.start_app()
    else:
        replica.kill_sidecar()
        time.sleep(1)
        replica.start_sidecar()


@pytest.mark.parametrize("kill", ["app", "sidecar"])
def test_a_plan_resumes_where_it_was_after_its_planner_is_killed_mid_wave(
    planner: Planner, kill: str
) -> None:
    marker = f"crash-{kill}"
    planner.model.hold(marker, "analyse")
    plan_id = planner.submit(marker)

    def mid_wave() -> dict[str, Any] | None:
        record = planner.show(plan_id)
        return record if record and record["current_wave"] == 1 and planner.model.holding(marker) else None

    before = eventually(mid_wave, timeout=60)
    done_before = {sid for sid, s in subgoals(before).items() if s["status"] == "COMPLETED"}
    assert done_before == {"research_sources", "collect_data"}
    _crash(planner, kill)
    planner.model.release(marker)

    record = planner.wait_for(plan_id, timeout=120)
    assert record["state"] == "COMPLETED", record["reason"]
    for subgoal_id in subgoals(record):  # nothing ran twice, nothing was lost
        assert len(attempts_of(record, subgoal_id)) == 1, attempts_of(record, subgoal_id)
    tasks = [a["task_id"] for a in record["attempts"]]
    assert len(tasks) == len(set(tasks)) == 6


def test_a_plan_is_one_trace_from_request_to_synthesis(planner: Planner) -> None:
    planner.model.script("traced", "outline", "FAIL", "FAIL")  # a replan, in the same trace
    plan_id = planner.submit("traced")
    record = planner.wait_for(plan_id)
    assert record["state"] == "COMPLETED", record["reason"]
    trace_id = record["traceparent"].split("-")[1]

    def whole_trace() -> bool:
        response = httpx.get(f"{planner.cluster.jaeger_query_url}/api/traces/{trace_id}", timeout=10)
        assert response.status_code == 200 and response.json().get("data"), "trace not in Jaeger yet"
        spans = response.json()["data"][0]["spans"]
        by_id = {s["spanID"]: s for s in spans}
        named: dict[str, list[dict[str, Any]]] = {}
        for span in spans:
            named.setdefault(span["operationName"], []).append(span)
        expected = ["planning.run", "planning.wave", "planning.subgoal", "planning.verify"]
        expected += ["planning.replan", "planning.synthesize", "market.allocate", "agent.execute"]
        for name in expected:
            assert name in named, f"{name} not in the trace yet"
        [run] = named["planning.run"]

        def under(span: dict[str, Any], ancestor: dict[str, Any]) -> bool:
            while True:
                parents = [r["spanID"] for r in span.get("references", []) if r["refType"] == "CHILD_OF"]
                if not parents or parents[0] not in by_id:
                    return False
                span = by_id[parents[0]]
                if span is ancestor:
                    return True

        assert len(named["planning.wave"]) == 4  # three waves, and the replanned subgoal's
        assert all(under(w, run) for w in named["planning.wave"])
        subgoal_spans = named["planning.subgoal"]
        assert len(subgoal_spans) == len(record["attempts"])
        assert all(any(under(s, w) for w in named["planning.wave"]) for s in subgoal_spans)
        allocations = named["market.allocate"]
        assert len(allocations) == len(record["attempts"])
        assert all(any(under(a, s) for s in subgoal_spans) for a in allocations)
        for name in ("planning.replan", "planning.synthesize", "planning.create_plan", "agent.execute"):
            assert all(under(s, run) for s in named[name]), name
        return True

    eventually(whole_trace, timeout=60, interval=1.0)


def test_a_plan_given_by_the_user_runs_as_given_and_an_invalid_one_is_refused(planner: Planner) -> None:
    given = [
        {"id": "fetch", "description": "Fetch the price list", "success_criterion": "prices fetched",
         "tool_hints": ["web_search"]},
        {"id": "report", "description": "Write the report", "success_criterion": "report written",
         "dependencies": ["fetch"], "tool_hints": ["write"]},
    ]  # fmt: skip
    plan_id = planner.submit("given", subgoals=given, config={"enable_lookahead": False})
    record = planner.wait_for(plan_id)
    assert record["state"] == "COMPLETED", record["reason"]
    assert record["waves"] == [["fetch"], ["report"]]
    assert [a["approach"] for a in record["attempts"]] == ["", ""]  # lookahead off

    cyclic = [{**given[0], "dependencies": ["report"]}, given[1], {**given[1]}]
    response = httpx.put(
        planner.console.invoke_url("v1/plans/cyclic", "planner"),
        json={"task": "t", "subgoals": cyclic},
        timeout=30,
    )
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "INVALID_PLAN"
    assert "used twice" in body["message"] and "cycle" in body["message"]
    assert planner.show("cyclic") is None


def test_the_cli_submits_shows_and_lists_plans(planner: Planner, tmp_path: Path) -> None:
    plan_id = f"cli-{uuid.uuid4().hex[:6]}"
    request = {"plan_id": plan_id, "task": "Plan cli: write a short report on solar panel prices in Spain",
               "skills": SKILLS, "min_success_threshold": 0.0}  # fmt: skip
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(request))
    port = ["--dapr-http-port", str(planner.console.endpoints.dapr_http_port)]

    def agora(*argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "agora.cli", *port, *argv], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert agora("plan", "submit", str(tmp_path / "plan.yaml")).strip() == f"{plan_id}: submitted"
    assert "already exists" in agora("plan", "submit", str(tmp_path / "plan.yaml"))
    shown = agora("plan", "show", plan_id, "--watch")
    assert f"{plan_id} v1: COMPLETED" in shown
    for wave in ("wave 1", "wave 2", "wave 3"):
        assert wave in shown
    assert "✓ write_draft" in shown and "result:" in shown
    assert plan_id in agora("plan", "list", "--state", "COMPLETED", "--limit", "500")


def test_a_deadline_without_a_time_zone_or_already_past_is_refused(planner: Planner) -> None:
    for deadline, says in (("2030-01-01T00:00:00", "timezone"), ("2001-01-01T00:00:00Z", "already passed")):
        plan_id = f"deadline-{uuid.uuid4().hex[:6]}"
        response = httpx.put(
            planner.console.invoke_url(f"v1/plans/{plan_id}", "planner"),
            json={"task": "a task with a careless deadline", "deadline": deadline},
            timeout=30,
        )
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["error"] == "INVALID_ARGUMENT"
        assert [e["loc"][-1] for e in body["details"]["errors"]] == ["deadline"]
        assert says in body["message"]
        assert planner.show(plan_id) is None, "nothing was started"


def test_a_plan_id_reused_with_another_request_is_refused_and_the_same_request_is_a_repeat(
    planner: Planner,
) -> None:
    plan_id = planner.submit("reuse")
    url = planner.console.invoke_url(f"v1/plans/{plan_id}", "planner")
    record = planner.show(plan_id)
    assert record is not None
    first = record["request"]

    again = httpx.put(url, json=first, timeout=30)
    assert again.status_code == 200, again.text
    assert again.json()["created"] is False

    other = httpx.put(url, json={**first, "task": "Another task altogether"}, timeout=30)
    assert other.status_code == 409, other.text
    assert other.json()["error"] == "CONFLICTING_REQUEST"
    assert "differs in: task" in other.json()["message"]
    shown = planner.show(plan_id)
    assert shown is not None and shown["request"]["task"] == first["task"]


def test_a_plan_whose_run_breaks_down_ends_failed_with_the_reason_and_is_announced(planner: Planner) -> None:
    plan_id = planner.submit("broken", task=f"Plan broken: a report on solar panels {BREAKS_DRAFTING}")
    record = planner.wait_for(plan_id, states=FINAL)

    assert record["state"] == "FAILED"
    assert "InjectedDefect" in record["reason"] and "plan.draft" in record["reason"]
    assert record["result"]["success"] is False
    completed = eventually(lambda: _completed_event(planner, plan_id), timeout=30)
    assert completed["state"] == "FAILED" and "InjectedDefect" in completed["reason"]
    logged = eventually(lambda: error_line(planner.app, "plan_id", plan_id), timeout=10)
    assert logged["trace_id"] == record["traceparent"].split("-")[1]
    assert planner.show(plan_id) == record, "the ended record stays as it is"


def test_without_a_state_plans_of_every_state_are_listed_newest_first(planner: Planner) -> None:
    planner.model.script("list-stopped", "outline", "FAIL", "FAIL")
    stopped = planner.submit("list-stopped", config={"max_replans": 0})
    waiting = planner.wait_for(stopped)
    assert waiting["state"] == "WAITING_FOR_HUMAN", waiting["reason"]
    completed = planner.submit("list-done")
    assert planner.wait_for(completed)["state"] == "COMPLETED"
    planner.model.hold("list-running", "analyse")
    running = planner.submit("list-running")
    try:
        eventually(lambda: planner.model.holding("list-running"), timeout=60)
        answer = httpx.get(planner.console.invoke_url("v1/plans?limit=500", "planner"), timeout=30).json()
        assert answer["state"] is None and answer["total"] >= 3
        mine = {stopped, completed, running}
        ours = [(p["plan_id"], p["state"]) for p in answer["plans"] if p["plan_id"] in mine]
        assert ours == [(running, "RUNNING"), (completed, "COMPLETED"), (stopped, "WAITING_FOR_HUMAN")]
        created = [at(p["created_at"]) for p in answer["plans"]]
        assert created == sorted(created, reverse=True)

        narrowed = httpx.get(
            planner.console.invoke_url("v1/plans?state=COMPLETED&limit=500", "planner"), timeout=30
        ).json()
        ids = [p["plan_id"] for p in narrowed["plans"]]
        assert narrowed["state"] == "COMPLETED" and completed in ids and running not in ids
        assert ids == sorted(ids) and {p["state"] for p in narrowed["plans"]} == {"COMPLETED"}

        port = ["--dapr-http-port", str(planner.console.endpoints.dapr_http_port)]
        listed = subprocess.run(
            [sys.executable, "-m", "agora.cli", *port, "plan", "list", "--limit", "500"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        rows = [line.split()[:2] for line in listed.stdout.splitlines() if line.startswith("list-")]
        assert rows == [[running, "RUNNING"], [completed, "COMPLETED"], [stopped, "WAITING_FOR_HUMAN"]]
    finally:
        planner.model.release("list-running")
        planner.decide(waiting["stop"]["escalation_id"], {"kind": "escalation", "action": "abort"})


def offers_only(registry_url: str, skill: str, agent_id: str) -> bool:
    return filter_ids(registry_url, [skill]) == [agent_id]


def test_a_subgoal_whose_award_nobody_acknowledges_ends_at_the_lapse(planner: Planner) -> None:
    """The only capable agent is a registration with nothing behind it: its award lapses, the
    board fails the task, and the attempt ends then, not at its ten-minute timeout (nor at the
    minute-long board check)."""
    skill = f"haunting-{uuid.uuid4().hex[:6]}"
    phantom = f"phantom-{uuid.uuid4().hex[:6]}"
    registered = httpx.post(
        planner.console.invoke_url("v1/agents", "registry"), json=profile(phantom, skill), timeout=30
    )
    assert registered.status_code == 200, registered.text
    try:
        for replica in replicas_of(planner.cluster, "registry"):
            eventually(partial(offers_only, replica.app_url, skill, phantom), timeout=30)
        given = [{"id": "haunt", "description": "Haunt the warehouse", "success_criterion": "haunted",
                  "tool_hints": [skill]}]  # fmt: skip
        plan_id = planner.submit(
            "lapse",
            skills=[skill],
            subgoals=given,
            escalate=False,
            attempt_timeout_seconds=600,
            config={"enable_lookahead": False, "max_replans": 0},
        )
        record = planner.wait_for(plan_id, timeout=120, states=FINAL)

        assert record["state"] == "FAILED"
        first = attempts_of(record, "haunt")[0]
        assert first["ended"] == "rejected" and first["agent_id"] is None
        assert f"no agent acknowledged the award in time (tried {phantom})" in first["reason"]
        waited = at(first["finished_at"]) - at(first["started_at"])
        assert timedelta(seconds=DEFAULT_ACK_SECONDS) <= waited < timedelta(seconds=50), waited
    finally:
        httpx.delete(planner.console.invoke_url(f"v1/agents/{phantom}", "registry"), timeout=30)
