"""Outcomes the market checks (redis profile, every service its own app): two pairs of agents for
sums, in each one that adds right and one that always answers wrong, claims success and bids
surer (tests/integration/apps/sum_agents.py). Tasks with an expected-answer check: the board
records the claim and the verdict side by side, the wrong one's reputation falls and the market
sends the work to the right one. Tasks without a check, in the same run: the agents' word is all
there is, the records cannot tell the pair apart, and the wrong one keeps the work. A verdict an
agent's app forges is refused and counted nowhere. Tasks a checker app checks
(tests/integration/apps/sum_checker.py, written with the SDK): its answer decides, and a checker
that is down, never there, or answers out of its contract leaves the outcome unchecked, never
passed. Tasks their publisher checks, and a failed check a person decides."""

from __future__ import annotations

import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.system import CONSOLE, RECORDER, SERVICES
from tests.integration.helpers import STORE_PROFILE, eventually, publish_event, replicas_of

pytestmark = pytest.mark.integration

AGENTS_FILE = Path(__file__).resolve().parent / "apps" / "sum_agents.py"
AGENTS = ServiceSpec("agents", "agora.sdk", env={"AGORA_AGENTS_FILE": str(AGENTS_FILE)})
CHECKER = ServiceSpec("checker", None, command=[sys.executable, str(AGENTS_FILE.with_name("sum_checker.py"))])
CHECKER_RETRY_SECONDS = 1.0
"""The board's first wait before asking a checker app again (then 4 s, 16 s: 21 s in all)."""
TASKS = 40
LAST = 20
TERMINAL = {"COMPLETED", "FAILED", "PARTIAL", "REJECTED"}


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        STORE_PROFILE,
        run_dir=tmp_path_factory.mktemp("checked-outcomes"),
        extra_env={"AGORA_CHECKER_RETRY_SECONDS": str(CHECKER_RETRY_SECONDS)},
    ) as cluster:
        for spec in [*SERVICES, RECORDER, CONSOLE, AGENTS, CHECKER]:
            cluster.add_service(spec)
        yield cluster


def console(cluster: LocalCluster) -> ServiceReplica:
    return replicas_of(cluster, "console")[0]


def board_record(cluster: LocalCluster, task_id: str) -> dict[str, Any] | None:
    answer = httpx.get(console(cluster).invoke_url(f"v1/tasks/{task_id}", "taskboard"), timeout=10)
    return answer.json() if answer.status_code == 200 else None


def reputation(cluster: LocalCluster, agent_id: str) -> dict[str, Any]:
    answer = httpx.get(console(cluster).invoke_url(f"v1/reputation/{agent_id}", "reputation"), timeout=10)
    assert answer.status_code == 200, answer.text
    record: dict[str, Any] = answer.json()
    return record


def counted(cluster: LocalCluster, agents: tuple[str, str]) -> int:
    """Outcomes the reputation counted for either agent of a pair."""
    return sum(reputation(cluster, agent_id)["total_tasks"] for agent_id in agents)


def run_sum(
    cluster: LocalCluster,
    pair: tuple[str, str],
    skill: str,
    a: int,
    b: int,
    checked: bool,
    check: dict[str, Any] | None = None,
    *,
    acceptance: dict[str, Any] | None = None,
    while_it_is_checked: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One sum published and followed to its end, and its outcome counted by the reputation
    (one at a time: each decision sees every earlier outcome). `check`: the task's own, else an
    expected answer when `checked`; `acceptance`: the task's whole acceptance, in place of
    either; `while_it_is_checked` is called once the outcome is recorded and the task waits for
    its checker app."""
    task_id = f"sum-{uuid.uuid4().hex[:8]}"
    spec: dict[str, Any] = {
        "task_id": task_id,
        "description": f"What is {a} + {b}?",
        "required_skills": [skill],
    }
    if acceptance is not None:
        spec["acceptance"] = acceptance
    elif check is not None:
        spec["acceptance"] = {"check": check}
    elif checked:
        spec["acceptance"] = {"check": {"kind": "expected", "match": "number", "expected": str(a + b)}}
    before = counted(cluster, pair)
    publish_event(console(cluster).dapr_http, "agora.tasks", spec)

    if while_it_is_checked is not None:

        def awaiting_its_verdict() -> bool:
            record = board_record(cluster, task_id)
            return bool(record and record["status"] == "ALLOCATED" and record["outcome"] is not None)

        eventually(awaiting_its_verdict, timeout=60, interval=0.1)
        while_it_is_checked(task_id)

    def ended() -> dict[str, Any] | None:
        record = board_record(cluster, task_id)
        return record if record and record["status"] in TERMINAL else None

    record: dict[str, Any] = eventually(ended, timeout=90, interval=0.2)
    if record["outcome"] is not None:
        eventually(lambda: counted(cluster, pair) == before + 1, timeout=30, interval=0.2)
    return record


def run_sums(cluster: LocalCluster, pair: tuple[str, str], skill: str, checked: bool) -> list[dict[str, Any]]:
    draw = random.Random(f"{skill}-{TASKS}")
    return [
        run_sum(cluster, pair, skill, draw.randint(100, 999), draw.randint(100, 999), checked)
        for _ in range(TASKS)
    ]


def winners(records: list[dict[str, Any]]) -> list[str | None]:
    return [(record.get("allocation") or {}).get("winning_agent_id") for record in records]


def test_checked_sums_go_to_the_agent_that_adds_right_and_unchecked_ones_cannot_tell_the_pair_apart(
    market: LocalCluster,
) -> None:
    checked_pair = ("adder-checked", "bluffer-checked")
    unchecked_pair = ("adder-unchecked", "bluffer-unchecked")
    checked = run_sums(market, checked_pair, "sums-checked", checked=True)
    unchecked = run_sums(market, unchecked_pair, "sums-unchecked", checked=False)

    # Checked: the claim and the verdict side by side, the verdict deciding the task's end.
    bluffs = [r for r in checked if r["outcome"] and r["outcome"]["agent_id"] == "bluffer-checked"]
    assert bluffs, "the bluffer was tried"
    for record in bluffs:
        assert record["outcome"]["actual_success"] is True, "the agent claimed success"
        assert record["verdict"]["status"] == "failed" and record["verdict"]["checked_by"] == "taskboard"
        assert record["status"] == "FAILED" and record["failure_reason"].startswith("CHECK_FAILED")
    for record in checked:
        if record["outcome"] and record["outcome"]["agent_id"] == "adder-checked":
            assert record["status"] == "COMPLETED" and record["verdict"]["status"] == "passed", record
    bluffer, adder = reputation(market, "bluffer-checked"), reputation(market, "adder-checked")
    assert bluffer["success_rate"] == 0.0 and bluffer["overclaims"] == len(bluffs), bluffer
    assert bluffer["calibration_factor"] < 1.0 < adder["calibration_factor"], (bluffer, adder)
    assert adder["success_rate"] == 1.0 and adder["overclaims"] == 0, adder
    last = winners(checked)[-LAST:]
    adder_late = winners(unchecked)[-LAST:].count("adder-unchecked")
    print(
        f"checked: the bluffer ran {len(bluffs)} of {TASKS}, the adder {last.count('adder-checked')} "
        f"of the last {LAST}; unchecked: the adder {adder_late} of the last {LAST}"
    )
    assert last.count("adder-checked") >= 0.9 * LAST, last

    # Unchecked, in the same run: both say they succeeded every time and the records take their
    # word, so the surer bidder keeps the work it does wrong.
    assert all(r["verdict"] is None and r["status"] == "COMPLETED" for r in unchecked), "every claim stood"
    unchecked_last = winners(unchecked)[-LAST:]
    assert unchecked_last.count("adder-unchecked") < 0.9 * LAST, unchecked_last
    for agent_id in unchecked_pair:
        record = reputation(market, agent_id)
        assert record["overclaims"] == 0 and record["success_rate"] in (0.0, 1.0), record
        assert record["success_rate"] == 1.0 or record["total_tasks"] == 0, record


def test_a_verdict_an_agent_s_app_sends_with_its_outcome_is_refused_and_counted_nowhere(
    market: LocalCluster,
) -> None:
    """The agent's app reports through its own sidecar, as its runs do; an outcome that carries a
    verdict of its own is no outcome (the contract has no such field), and the board's record
    and the reputation stay as they were. Nor may the app announce a recorded outcome itself."""
    pair = ("adder-checked", "bluffer-checked")
    record = run_sum(market, pair, "sums-checked", 2, 2, checked=True)
    task_id = record["spec"]["task_id"]
    totals = {agent_id: counts(reputation(market, agent_id)) for agent_id in pair}
    [app] = replicas_of(market, "agents")
    forged = {
        "task_id": task_id, "agent_id": "bluffer-checked", "actual_success": True, "actual_cost_usd": 0.0,
        "actual_steps": 1, "summary": "2 + 2 = 5",
        "verdict": {"status": "passed", "kind": "expected", "reason": "trust me", "checked_by": "taskboard"},
    }  # fmt: skip
    refused = httpx.put(
        f"{app.dapr_http}/v1.0/actors/Task/{task_id}/method/mark_outcome", json=forged, timeout=30
    )
    # An actor's refusal comes in its answer's envelope (the call itself went through).
    error = refused.json()["error"]
    assert error["error"] == "INVALID_ARGUMENT" and "verdict" in error["message"], refused.text

    announced = httpx.post(
        f"{app.dapr_http}/v1.0/publish/agora-pubsub/agora.task.outcome.recorded",
        json={"outcome": {k: v for k, v in forged.items() if k != "verdict"}, "counts_as_success": True,
              "verdict": forged["verdict"]},
        timeout=30,
    )  # fmt: skip
    assert announced.status_code == 403, announced.text

    assert board_record(market, task_id) == record, "the board's record is as its check left it"
    assert {agent_id: counts(reputation(market, agent_id)) for agent_id in pair} == totals, "counted nowhere"


def counts(record: dict[str, Any]) -> dict[str, Any]:
    return {key: record[key] for key in ("total_tasks", "evidence", "evidence_of_success", "overclaims")}


def dispute(cluster: LocalCluster, task_id: str, verdict: str, why: str) -> httpx.Response:
    body = {"disputed_by": "ana@example.com", "reason": why, "verdict": verdict}
    return httpx.post(
        console(cluster).invoke_url(f"v1/tasks/{task_id}/dispute", "taskboard"), json=body, timeout=30
    )


def test_a_dispute_corrects_the_reputation_once_announced_twice_and_after_the_reputation_restarts(
    market: LocalCluster,
) -> None:
    """A person disputes a passed outcome (through the console's identity, as the CLI does):
    the board's record turns FAILED with the dispute's verdict and the one it replaced, and the
    agent's record counts that outcome as an overclaim instead of a success, once. The same
    dispute again (the board announces it again), and again after the reputation app was
    restarted, changes nothing more; another dispute is refused."""
    pair = ("adder-checked", "bluffer-checked")
    record = run_sum(market, pair, "sums-checked", 40, 2, checked=True)
    assert record["status"] == "COMPLETED", record
    task_id, agent = record["spec"]["task_id"], record["outcome"]["agent_id"]
    before = counts(reputation(market, agent))

    answer = dispute(market, task_id, "failed", "the ledger shows 43")
    assert answer.status_code == 200, answer.text
    disputed = answer.json()
    assert disputed["status"] == "FAILED" and disputed["verdict"]["kind"] == "dispute"
    assert (
        disputed["dispute"]["before"] == record["verdict"]
        and "ana@example.com" in disputed["verdict"]["reason"]
    )
    expected = {
        "total_tasks": before["total_tasks"],
        "evidence": before["evidence"] - 1.0 + 2.0,  # a success counted once became an overclaim
        "evidence_of_success": before["evidence_of_success"] - 1.0,
        "overclaims": before["overclaims"] + 1,
    }
    eventually(lambda: counts(reputation(market, agent)) == expected, timeout=30, interval=0.2)

    def settled_after_another_outcome() -> None:
        # Outcomes of one agent are applied in the order they come: one counted after the
        # repeated announcement shows the repeat was handled.
        run_sum(market, pair, "sums-checked", 1, 1, checked=True)

    again = dispute(market, task_id, "failed", "the ledger shows 43")
    assert again.status_code == 200 and again.json() == disputed, again.text
    settled_after_another_outcome()
    [reputation_app] = replicas_of(market, "reputation")
    reputation_app.restart()
    assert dispute(market, task_id, "failed", "the ledger shows 43").status_code == 200
    settled_after_another_outcome()
    now = counts(reputation(market, agent))
    assert (
        now["overclaims"] == expected["overclaims"] and now["total_tasks"] == expected["total_tasks"] + 2
    ), now
    assert (
        now["evidence"] == expected["evidence"] + 2.0
        and now["evidence_of_success"] == expected["evidence_of_success"] + 2.0
    ), now

    refused = dispute(market, task_id, "passed", "no, 42 was right")
    assert refused.status_code == 409 and refused.json()["error"] == "NOT_DISPUTABLE", refused.text


def test_a_publisher_checked_bluff_stands_passed_until_its_publisher_disputes_it(
    market: LocalCluster,
) -> None:
    """A task its publisher checks (`publisher`): the bluffer (the surer bidder, no record yet)
    wins it, and its wrong answer stands as a passed verdict, counted as a checked success,
    until the publisher disputes it; then the task is FAILED and the success an overclaim."""
    pair = ("adder-publisher", "bluffer-publisher")
    check = {"check": {"kind": "publisher"}, "dispute_window_s": 3600}
    record = run_sum(market, pair, "sums-publisher", 585, 740, True, acceptance=check)
    assert record["outcome"]["agent_id"] == "bluffer-publisher" and record["status"] == "COMPLETED", record
    verdict = record["verdict"]
    assert (verdict["status"], verdict["kind"], verdict["checked_by"]) == ("passed", "publisher", "taskboard")
    assert "unless the publisher disputes it by" in verdict["reason"], verdict
    assert counts(reputation(market, "bluffer-publisher")) == {
        "total_tasks": 1, "evidence": 1.0, "evidence_of_success": 1.0, "overclaims": 0,
    }  # fmt: skip

    answer = dispute(market, record["spec"]["task_id"], "failed", "585 + 740 is 1325")
    assert answer.status_code == 200 and answer.json()["status"] == "FAILED", answer.text
    overclaim = {"total_tasks": 1, "evidence": 2.0, "evidence_of_success": 0.0, "overclaims": 1}
    eventually(lambda: counts(reputation(market, "bluffer-publisher")) == overclaim, timeout=30, interval=0.2)


def test_the_app_a_task_answers_to_disputes_it_in_its_own_name_and_no_other_app_can(
    market: LocalCluster,
) -> None:
    """An app's own dispute, through its own sidecar (Dapr names the caller): the agent app
    `agents` publishes a task that answers to it (`reply_to`) and disputes its outcome in its
    own name; in another's name, or of a task that answers to no app, it is refused (403
    `FORBIDDEN`), and an app the board's access policy does not admit is refused by its
    sidecar."""
    [publisher] = replicas_of(market, "agents")
    [checker] = replicas_of(market, "checker")
    pair = ("adder-publisher", "bluffer-publisher")
    check = {"check": {"kind": "publisher"}, "dispute_window_s": 3600}

    def finished(reply_to: str | None) -> str:
        task_id = f"sum-{uuid.uuid4().hex[:8]}"
        spec = {"task_id": task_id, "description": "What is 2 + 2?", "required_skills": ["sums-publisher"],
                "acceptance": check, **({"reply_to": reply_to} if reply_to else {})}  # fmt: skip
        publish_event(publisher.dapr_http, "agora.tasks", spec)
        eventually(lambda: (board_record(market, task_id) or {}).get("status") in TERMINAL, timeout=60)
        return task_id

    def dispute_through(app: ServiceReplica, task_id: str, by: str) -> httpx.Response:
        body = {"disputed_by": by, "reason": "2 + 2 is 4", "verdict": "failed"}
        return httpx.post(app.invoke_url(f"v1/tasks/{task_id}/dispute", "taskboard"), json=body, timeout=30)

    own = finished(reply_to="agents")
    other_name = dispute_through(publisher, own, "ana@example.com")
    assert other_name.status_code == 403 and "disputes in its own name" in other_name.json()["message"]
    not_admitted = dispute_through(checker, own, "checker")
    assert not_admitted.status_code == 403, not_admitted.text
    assert board_record(market, own)["dispute"] is None, "nothing changed"  # type: ignore[index]

    answered = dispute_through(publisher, own, "agents")
    assert answered.status_code == 200, answered.text
    assert answered.json()["dispute"]["by"] == "agents" and answered.json()["status"] in (
        "FAILED",
        "COMPLETED",
    )

    nobodys = finished(reply_to=None)
    refused = dispute_through(publisher, nobodys, "agents")
    assert refused.status_code == 403 and "answers to no app" in refused.json()["message"], refused.text
    eventually(lambda: counted(market, pair) >= 2, timeout=30, interval=0.2)


def test_a_schema_checked_sum_passes_as_json_and_fails_as_prose(market: LocalCluster) -> None:
    """A task whose output must satisfy a JSON Schema: the bluffer's prose fails it (not JSON),
    the adder's JSON passes it, each verdict signed by the board with why."""
    pair = ("adder-json", "bluffer-json")
    schema = {"type": "object", "required": ["total"], "properties": {"total": {"type": "integer"}}}
    check = {"kind": "json_schema", "json_schema": schema}
    by_agent: dict[str, dict[str, Any]] = {}
    for a, b in [(585, 740), (12, 30), (7, 8), (100, 200), (1, 2)]:
        record = run_sum(market, pair, "sums-json", a, b, True, {**check})
        by_agent.setdefault(record["outcome"]["agent_id"], record)
        if len(by_agent) == 2:
            break
    assert set(by_agent) == set(pair), "both ran a task once the bluffer's record fell"
    bluff, sum_ = by_agent["bluffer-json"], by_agent["adder-json"]
    assert (bluff["status"], bluff["verdict"]["kind"], bluff["verdict"]["status"]) == (
        "FAILED",
        "json_schema",
        "failed",
    )
    assert "not JSON" in bluff["verdict"]["reason"] and bluff["verdict"]["checked_by"] == "taskboard"
    assert (sum_["status"], sum_["verdict"]["status"]) == ("COMPLETED", "passed")
    assert sum_["verdict"]["reason"] == "the output satisfies the schema"


def decide(cluster: LocalCluster, escalation_id: str, action: str, why: str) -> httpx.Response:
    decision = {"kind": "escalation", "action": action}
    return httpx.post(
        console(cluster).invoke_url(f"v1/escalations/{escalation_id}/resume", "escalation"),
        json={"decision": decision, "who": "ana@example.com", "why": why},
        timeout=30,
    )


def test_a_failed_check_waits_for_a_person_who_hands_the_task_to_the_next_bid(market: LocalCluster) -> None:
    """`on_failure: person`: the bluffer's wrong sum fails its check, and the task waits
    (ALLOCATED, its outcome and failed verdict recorded) in an escalation that shows the output
    and why; a retry is refused up front, a reassignment hands the task to the adder, whose right
    answer completes it, and the bluffer's failed turn counts against it."""
    pair = ("adder-person", "bluffer-person")
    task_id = f"sum-{uuid.uuid4().hex[:8]}"
    spec = {
        "task_id": task_id, "description": "What is 585 + 740?", "required_skills": ["sums-person"],
        "acceptance": {"check": {"kind": "expected", "match": "number", "expected": "1325"},
                       "on_failure": "person"},
    }  # fmt: skip
    publish_event(console(market).dapr_http, "agora.tasks", spec)
    escalation_id = f"check-{task_id}.1"

    def parked() -> dict[str, Any] | None:
        shown = httpx.get(
            console(market).invoke_url(f"v1/escalations/{escalation_id}", "escalation"), timeout=10
        )
        return shown.json() if shown.status_code == 200 else None

    escalation = eventually(parked, timeout=60, interval=0.2)
    assert escalation["status"] == "WAITING_FOR_HUMAN" and escalation["waiting_party"] == {
        "kind": "task",
        "id": task_id,
    }
    assert escalation["context"]["output_summary"] == "585 + 740 = 432901"
    assert "is not within 0 of 1325" in escalation["context"]["error_history"][0]
    waiting = board_record(market, task_id)
    assert waiting is not None and waiting["status"] == "ALLOCATED"
    assert waiting["verdict"]["status"] == "failed" and waiting["outcome"]["agent_id"] == "bluffer-person"

    refused = decide(market, escalation_id, "retry", "once more")
    assert refused.status_code == 422 and "skip (accept the output all the same)" in refused.json()["message"]
    assert decide(market, escalation_id, "reassign", "the adder can do sums").status_code == 200

    def ended() -> dict[str, Any] | None:
        record = board_record(market, task_id)
        return record if record and record["status"] in TERMINAL else None

    record = eventually(ended, timeout=60, interval=0.2)
    assert record["status"] == "COMPLETED" and record["outcome"]["agent_id"] == "adder-person", record
    assert record["verdict"]["status"] == "passed"
    bluffed = record["awards"][0]
    assert bluffed["agent_id"] == "bluffer-person" and bluffed["verdict"]["status"] == "failed"
    eventually(lambda: counted(market, pair) == 2, timeout=30, interval=0.2)
    assert reputation(market, "bluffer-person")["overclaims"] == 1


BY_APP = ("adder-by-app", "bluffer-by-app")
CHECKER_APP = {"kind": "checker_app", "app_id": "checker", "method": "check"}


def test_a_checker_app_s_answer_decides_the_task_and_the_reputation_learns_it(market: LocalCluster) -> None:
    """The board asks the checker app (by service invocation) about each outcome before the task
    ends: its verdict and reason stand beside the agent's claim, signed with the checker's app id,
    and the bluffer's claims it contradicts are counted as overclaims."""
    draw = random.Random("sums-by-app")
    records = [
        run_sum(
            market, BY_APP, "sums-by-app", draw.randint(100, 999), draw.randint(100, 999), True, CHECKER_APP
        )
        for _ in range(8)
    ]
    by_agent: dict[str, list[dict[str, Any]]] = {agent_id: [] for agent_id in BY_APP}
    for record in records:
        by_agent[record["outcome"]["agent_id"]].append(record)
    bluffs, sums = by_agent["bluffer-by-app"], by_agent["adder-by-app"]
    assert bluffs and sums, {agent_id: len(r) for agent_id, r in by_agent.items()}
    for record in bluffs:
        verdict = record["verdict"]
        assert record["outcome"]["actual_success"] is True and record["status"] == "FAILED", record
        assert (verdict["status"], verdict["kind"], verdict["checked_by"]) == (
            "failed",
            "checker_app",
            "checker",
        )
        assert ", not " in verdict["reason"] and record["failure_reason"].startswith("CHECK_FAILED"), verdict
    for record in sums:
        assert record["status"] == "COMPLETED" and record["verdict"]["status"] == "passed", record
        assert record["verdict"]["checked_by"] == "checker", record
    assert reputation(market, "bluffer-by-app")["overclaims"] == len(bluffs)
    assert reputation(market, "adder-by-app")["evidence_of_success"] == len(sums)

    # Only the task board may ask: an agent's app asking the checker itself is refused.
    [app] = replicas_of(market, "agents")
    asked = httpx.post(app.invoke_url("check", "checker"), json={}, timeout=30)
    assert asked.status_code == 403, asked.text


def taskboard_log(cluster: LocalCluster) -> str:
    return "".join(path.read_text(errors="replace") for path in cluster.logs.glob("taskboard-*.app.log"))


def test_a_checker_app_that_is_down_is_asked_again_and_its_answer_decides_once_it_is_back(
    market: LocalCluster,
) -> None:
    """The checker's app is killed (its sidecar stays, answering 500 for it) before the task is
    published: the board's first try gets no answer and it waits to ask again; the app is
    started, and the next try's answer ends the task."""
    [checker] = replicas_of(market, "checker")

    def back_after_a_failed_try(task_id: str) -> None:
        eventually(
            lambda: any(
                "checker app checker did not answer; asking again" in line and task_id in line
                for line in taskboard_log(market).splitlines()
            ),
            timeout=30,
            interval=0.2,
        )
        checker.start_app()

    checker.kill_app()
    try:
        record = run_sum(
            market,
            BY_APP,
            "sums-by-app",
            20,
            22,
            True,
            CHECKER_APP,
            while_it_is_checked=back_after_a_failed_try,
        )
    finally:
        if checker.app is None or not checker.app.running():
            checker.start_app()
    verdict = record["verdict"]
    assert (verdict["checked_by"], verdict["kind"]) == ("checker", "checker_app"), record
    assert verdict["status"] == ("passed" if record["outcome"]["agent_id"] == "adder-by-app" else "failed")


def test_a_checker_that_never_answers_or_answers_out_of_its_contract_leaves_the_outcome_unchecked(
    market: LocalCluster,
) -> None:
    """No app of that id: asked four times with the backoff, then UNCHECKED with the last
    reason; the agent's claim stands as the task's end and the reputation counts it as the
    agent's word (weight 1 by default). A checker whose answer is no `CheckAnswer`: UNCHECKED at
    once, with what was wrong."""
    started = time.monotonic()
    nowhere = run_sum(
        market, BY_APP, "sums-by-app", 3, 4, True, {"kind": "checker_app", "app_id": "no-such-checker"}
    )
    took = time.monotonic() - started
    verdict = nowhere["verdict"]
    assert verdict["status"] == "unchecked" and verdict["checked_by"] == "taskboard", nowhere
    assert "no answer after 4 tries" in verdict["reason"], verdict
    assert nowhere["status"] == "COMPLETED", "the claim stands, marked unchecked"
    assert took >= CHECKER_RETRY_SECONDS * (1 + 4 + 16), f"the tries' backoff took {took:.1f} s"

    broken = run_sum(market, BY_APP, "sums-by-app", 5, 6, True, {**CHECKER_APP, "method": "out-of-contract"})
    verdict = broken["verdict"]
    assert verdict["status"] == "unchecked" and "out of its contract" in verdict["reason"], broken
    assert "passed" in verdict["reason"] and "reason" in verdict["reason"], "names what was missing"


def test_a_failed_check_passes_the_task_to_the_next_bid_and_the_bluffer_pays_for_its_turn(
    market: LocalCluster,
) -> None:
    """`on_failure: next_bid`: the surer bluffer wins, its wrong sum fails the check, and the
    board awards the task to the adder with a new token; the task ends COMPLETED on the
    adder's answer, the bluffer's turn is kept with its outcome and verdict, and each agent's
    record counts its own turn (the bluffer's as an overclaim)."""
    task_id = f"sum-{uuid.uuid4().hex[:8]}"
    spec = {
        "task_id": task_id,
        "description": "What is 19 + 23?",
        "required_skills": ["sums-next"],
        "acceptance": {
            "check": {"kind": "expected", "match": "number", "expected": "42"},
            "on_failure": "next_bid",
        },
    }
    publish_event(console(market).dapr_http, "agora.tasks", spec)

    def ended() -> dict[str, Any] | None:
        record = board_record(market, task_id)
        return record if record and record["status"] in TERMINAL else None

    record: dict[str, Any] = eventually(ended, timeout=90, interval=0.2)
    assert record["status"] == "COMPLETED", record
    first, second = record["awards"]
    assert first["agent_id"] == "bluffer-next" and second["agent_id"] == "adder-next", record["awards"]
    assert first["outcome"]["summary"] == "19 + 23 = 438" and first["verdict"]["status"] == "failed"
    assert record["outcome"]["agent_id"] == "adder-next" and record["verdict"]["status"] == "passed"

    def both_counted() -> bool:
        return counted(market, ("adder-next", "bluffer-next")) == 2

    eventually(both_counted, timeout=30, interval=0.2)
    bluffer, adder = reputation(market, "bluffer-next"), reputation(market, "adder-next")
    assert bluffer["overclaims"] == 1 and bluffer["evidence_of_success"] == 0.0, bluffer
    assert adder["evidence_of_success"] == 1.0 and adder["overclaims"] == 0, adder


def test_a_judged_sum_ends_on_the_boards_model_s_opinion_kept_with_its_confidence(
    market: LocalCluster,
) -> None:
    """`judge`: after the outcome is recorded the board asks its own model (here the offline
    one, held to the opinion's schema like any) for an opinion; the task ends as it says, and the
    verdict keeps the confidence, signed by the board, never a fact of the checker's."""
    record = run_sum(
        market, BY_APP, "sums-by-app", 8, 9, True, {"kind": "judge", "rubric": "The sum is right."}
    )
    verdict = record["verdict"]
    assert (verdict["kind"], verdict["checked_by"]) == ("judge", "taskboard"), record
    assert verdict["status"] in ("passed", "failed") and 0.0 <= verdict["confidence"] <= 1.0, verdict
    assert record["status"] == ("COMPLETED" if verdict["status"] == "passed" else "FAILED"), record
