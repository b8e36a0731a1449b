"""A2A agents of any framework on the market (redis profile, every service its own app): agents
built only from the `a2a-sdk` (tests/integration/apps/a2a_peer.py), put on the market by their
card URLs (AGORA_A2A_AGENTS of an agent app that serves nothing else), reached through that
app's sidecar. One
speaks A2A 1.0 and streams, one speaks the 0.3 wire and answers each message whole, one dies
when asked to, one stalls, one leaves."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import A2AError

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.processes import ManagedProcess, PortAllocator, port_open
from agora.harness.system import SERVICES, console_with
from agora.sdk._a2a import MAX_SAME_QUESTION
from tests.integration.apps.a2a_peer import (
    BID_OFFER,
    PRICE_PER_STEP_USD,
    QUIZ_ANSWER,
    QUIZ_QUESTION,
    SLOW_SECONDS,
)
from tests.integration.helpers import (
    CONSOLE_DECIDER,
    CONSOLE_VIEWER,
    eventually,
    publish_event,
    replicas_of,
    write_console_api_keys,
)
from tests.integration.test_market_a2a import a2a_client, board_record

pytestmark = pytest.mark.integration

APPS = Path(__file__).resolve().parent / "apps"
TERMINAL = {"COMPLETED", "FAILED", "PARTIAL", "REJECTED"}
LEASE_SECONDS = 6
"""The agent app's lease on its agents' registrations: short, so a gone card shows soon."""
PEERS = {
    "poet": ["--wire", "1.0"],
    "clerk": ["--wire", "0.3", "--no-streaming"],
    "fragile": ["--wire", "1.0"],
    "staller": ["--wire", "1.0"],
    "holder": ["--wire", "1.0"],
    "latecomer": ["--wire", "1.0"],
    "leaver": ["--wire", "1.0"],
    "bidder": ["--wire", "1.0", "--bids", "own"],
    "mumbler": ["--wire", "1.0", "--bids", "text"],
    "careless": ["--wire", "1.0"],
    "broken": ["--card", "broken"],
    "huge": ["--card", "huge"],
    "skilless": ["--card", "skilless"],
}
JOINED_LATER = {"latecomer"}
"""Agents the app is not started with: a person joins them through its API (`agora a2a join`)."""
IDLE_SECONDS = 12
"""How long the app lets an agent holding a task stay silent (AGORA_A2A_IDLE_SECONDS): above the
slow agent's work (SLOW_SECONDS), so only the silent one runs into it."""


class Peers:
    """The A2A agents, each its own process on a loopback port, with the log of what reached it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        ports = PortAllocator()
        self.ports = {name: ports.take() for name in PEERS}
        self.processes: dict[str, ManagedProcess] = {}

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def log(self, name: str) -> list[str]:
        path = self.folder / f"{name}.log"
        return path.read_text().splitlines() if path.exists() else []

    def start(self, name: str) -> None:
        argv = [
            sys.executable, str(APPS / "a2a_peer.py"), "--port", str(self.ports[name]), "--name", name,
            "--log", str(self.folder / f"{name}.log"), *PEERS[name],
        ]  # fmt: skip
        process = ManagedProcess(f"a2a-{name}", argv, self.folder / f"{name}.out", env=dict(os.environ))
        self.processes[name] = process.start()
        process.wait_until(port_open(self.ports[name]), f"the A2A agent {name} listening", timeout=30)

    def stop(self, name: str) -> None:
        self.processes[name].stop()

    def stop_all(self) -> None:
        for process in self.processes.values():
            process.stop()


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peers]:
    running = Peers(tmp_path_factory.mktemp("a2a-peers"))
    try:
        for name in PEERS:
            running.start(name)
        yield running
    finally:
        running.stop_all()


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory, peers: Peers) -> Iterator[LocalCluster]:
    agents = ServiceSpec(
        "agents",
        "agora.sdk",
        env={
            # The app serves these alone: no agents file.
            "AGORA_A2A_AGENTS": ",".join(
                f"a2a-{name}={peers.url(name)}" for name in PEERS if name not in JOINED_LATER
            ),
            "AGORA_AGENT_LEASE_SECONDS": str(LEASE_SECONDS),
            "AGORA_A2A_IDLE_SECONDS": str(IDLE_SECONDS),
        },
    )
    run_dir = tmp_path_factory.mktemp("a2a-agents-cluster")
    with LocalCluster("redis", run_dir=run_dir) as cluster:
        for spec in [*SERVICES, agents]:
            cluster.add_service(spec)
        # The console, with its people's API keys: A2A clients of the market act with them.
        keys = write_console_api_keys(run_dir / "console-api-keys.yaml")
        app_ids = {replica.spec.app_id for replica in cluster.replicas}
        cluster.add_service(console_with(app_ids, AGORA_CONSOLE_API_KEYS_FILE=str(keys)))
        yield cluster


def console(cluster: LocalCluster) -> ServiceReplica:
    return replicas_of(cluster, "console")[0]


def registered(cluster: LocalCluster, agent_id: str) -> dict[str, Any] | None:
    answer = httpx.get(console(cluster).invoke_url(f"v1/agents/{agent_id}", "registry"), timeout=10)
    return answer.json() if answer.status_code == 200 else None


def publish(cluster: LocalCluster, peer: str, text: str, **fields: Any) -> str:
    """A task only the A2A agent `peer` can do; `text` picks what it does with it."""
    task_id = f"a2a-{uuid.uuid4().hex[:8]}"
    spec = {
        "task_id": task_id,
        "description": text,
        "required_skills": [f"haiku-by-{peer}"],
        "min_success_threshold": 0.0,
        **fields,
    }
    publish_event(console(cluster).dapr_http, "agora.tasks", spec)
    return task_id


def settled(cluster: LocalCluster, task_id: str, timeout: float = 90) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        answer = httpx.get(console(cluster).invoke_url(f"v1/tasks/{task_id}", "taskboard"), timeout=10)
        record = answer.json() if answer.status_code == 200 else None
        return record if record and record["status"] in TERMINAL and record["outcome"] else None

    return eventually(done, timeout=timeout)


def test_an_a2a_agent_s_card_gives_its_profile_on_the_market(market: LocalCluster) -> None:
    poet = eventually(lambda: registered(market, "a2a-poet"), timeout=60)
    profile = poet
    assert profile["agent_name"] == "poet (A2A)"
    assert profile["skill_tags"] == ["haiku-by-poet", "poetry", "verse"]
    assert profile["cost_per_step_usd"] == PRICE_PER_STEP_USD
    assert profile["max_steps"] == 6
    assert profile.get("bid_app_id") is None, "the market estimates an A2A agent's bids"


def test_an_a2a_agent_that_streams_wins_a_task_its_progress_is_in_the_history_and_its_artifact_the_outcome(
    market: LocalCluster, peers: Peers
) -> None:
    eventually(lambda: registered(market, "a2a-poet"), timeout=60)
    task_id = publish(market, "poet", "autumn rain")
    record = settled(market, task_id)
    assert record["status"] == "COMPLETED", record
    outcome = record["outcome"]
    assert outcome["agent_id"] == "a2a-poet"
    assert outcome["summary"] == "a haiku by poet about autumn rain"
    assert outcome["actual_cost_usd"] == pytest.approx(PRICE_PER_STEP_USD)
    progress = [note["text"] for note in record["awards"][-1]["progress"]]
    assert progress == ["WORKING: drafting"], "what it streamed while it worked is in the task's history"
    winning = record["allocation"]["winning_bid"]
    assert "market" in winning["rationale"].lower() or winning["fallback"], winning
    reached = [line for line in peers.log("poet") if line.startswith(f"message agora-{task_id}-")]
    assert reached == [f"message agora-{task_id}-1 agora-{task_id}-1"], "one message, the award's own ids"


def test_an_a2a_agent_of_the_0_3_wire_answers_whole_and_completes(market: LocalCluster, peers: Peers) -> None:
    eventually(lambda: registered(market, "a2a-clerk"), timeout=60)
    record = settled(market, publish(market, "clerk", "first snow"))
    assert record["status"] == "COMPLETED", record
    assert record["outcome"]["summary"] == "a haiku by clerk about first snow"


def test_an_a2a_agent_that_vanishes_mid_task_gives_failed_with_the_reason(
    market: LocalCluster, peers: Peers
) -> None:
    eventually(lambda: registered(market, "a2a-fragile"), timeout=60)
    record = settled(market, publish(market, "fragile", "vanish"))
    assert record["status"] == "FAILED", record
    summary = record["outcome"]["summary"]
    assert summary.startswith(f"the A2A agent a2a-fragile at {peers.url('fragile')}: "), summary
    assert "could not be reached or failed" in summary or "reply ended" in summary, summary
    assert not peers.processes["fragile"].running()


def test_a_task_s_deadline_cancels_its_a2a_task(market: LocalCluster, peers: Peers) -> None:
    eventually(lambda: registered(market, "a2a-staller"), timeout=60)
    task_id = publish(market, "staller", "stall", deadline_ms=4_000)
    record = settled(market, task_id)
    assert record["status"] == "FAILED", record
    assert "DEADLINE_EXCEEDED" in record["outcome"]["summary"], record["outcome"]
    cancels = eventually(lambda: [ln for ln in peers.log("staller") if ln.startswith("cancel ")], timeout=20)
    assert len(cancels) == 1, cancels
    reached = [line for line in peers.log("staller") if line.startswith("message ")]
    assert reached == [f"message agora-{task_id}-1 agora-{task_id}-1"], "the task went to the agent once"


async def test_an_a2a_client_cancels_a_task_an_a2a_agent_works_on_and_the_agent_s_task_is_cancelled(
    market: LocalCluster, peers: Peers
) -> None:
    eventually(lambda: registered(market, "a2a-holder"), timeout=60)
    request = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text="stall")])
    request.metadata.update({"skills": ["haiku-by-holder"], "min_success_threshold": 0.0})
    sent = SendMessageRequest(
        message=request, configuration=SendMessageConfiguration(return_immediately=True)
    )
    async with a2a_client(market, CONSOLE_DECIDER, streaming=False) as client:
        [answer] = [response async for response in client.send_message(sent)]
        task_id = answer.task.id
        reached = f"message agora-{task_id}-1 agora-{task_id}-1"
        eventually(lambda: reached in peers.log("holder"), timeout=60, interval=0.1)
        async with a2a_client(market, CONSOLE_VIEWER, streaming=False) as viewer:
            with pytest.raises(A2AError, match="FORBIDDEN: victor is a viewer; cancelling a task needs"):
                await viewer.cancel_task(CancelTaskRequest(id=task_id))

        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))

        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled.status
        assert cancelled.status.message.parts[0].text == "CANCELLED by alice: cancelled over A2A"
        record = board_record(market, task_id)
        assert record is not None and record["status"] == "FAILED" and record["outcome"] is None, record
        assert record["failure_reason"] == "CANCELLED by alice: cancelled over A2A"
        # The agent app stopped the run, and the run cancelled the agent's own task.
        eventually(lambda: [line for line in peers.log("holder") if line.startswith("cancel ")], timeout=30)
        again = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert again.status.state == TaskState.TASK_STATE_CANCELED, "a cancel asked again is answered"
        read = await client.get_task(GetTaskRequest(id=task_id))
        assert read.status.state == TaskState.TASK_STATE_CANCELED
        listed = await client.list_tasks(ListTasksRequest(context_id=task_id, page_size=100))
        assert [task.id for task in listed.tasks] == [task_id], listed
        assert listed.tasks[0].status.state == TaskState.TASK_STATE_CANCELED, listed

        finished = settled(market, publish(market, "poet", "frost"))
        with pytest.raises(A2AError, match="TASK_ENDED"):
            await client.cancel_task(CancelTaskRequest(id=finished["spec"]["task_id"]))
        with pytest.raises(A2AError, match="no task a2a-missing on the market"):
            await client.cancel_task(CancelTaskRequest(id="a2a-missing"))
    await asyncio.sleep(2)
    assert [line for line in peers.log("holder") if line.startswith("message ")] == [reached], (
        "the cancelled task was not sent to the agent again"
    )
    after = board_record(market, task_id)
    assert after is not None and after["outcome"] is None, "no outcome came after the cancel"


def test_an_a2a_agent_whose_card_is_gone_leaves_the_market_and_comes_back_with_it(
    market: LocalCluster, peers: Peers
) -> None:
    eventually(lambda: registered(market, "a2a-leaver"), timeout=60)
    peers.stop("leaver")
    eventually(lambda: registered(market, "a2a-leaver") is None, timeout=4 * LEASE_SECONDS)
    peers.start("leaver")
    back = eventually(lambda: registered(market, "a2a-leaver"), timeout=4 * LEASE_SECONDS)
    assert back["skill_tags"][0] == "haiku-by-leaver"


def test_an_a2a_agent_s_question_is_answered_by_a_person_through_the_cli_and_its_task_completes(
    market: LocalCluster, peers: Peers
) -> None:
    eventually(lambda: registered(market, "a2a-poet"), timeout=60)
    task_id = publish(market, "poet", "ask")
    escalation_id = f"{task_id}.a2a-question-1"
    escalation_url = console(market).invoke_url(f"v1/escalations/{escalation_id}", "escalation")

    def waiting() -> dict[str, Any] | None:
        answer = httpx.get(escalation_url, timeout=10)
        found = answer.json() if answer.status_code == 200 else None
        return found if found and found["status"] == "WAITING_FOR_HUMAN" else None

    parked = eventually(waiting, timeout=60)
    assert parked["context"]["output_summary"] == "The A2A agent a2a-poet asks: which season?"
    assert parked["waiting_party"] == {"kind": "task", "id": task_id}
    board = httpx.get(console(market).invoke_url(f"v1/tasks/{task_id}", "taskboard"), timeout=10).json()
    assert board["status"] == "ALLOCATED" and board["outcome"] is None, "waiting, not ended"

    port = ["--dapr-http-port", str(console(market).endpoints.dapr_http_port)]
    decided = subprocess.run(
        [sys.executable, "-m", "agora.cli", *port, "escalations", "resume", escalation_id,
         "--action", "modify_prompt", "--prompt", "winter", "--who", "alice"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert decided.returncode == 0, decided.stderr
    record = settled(market, task_id)

    assert record["status"] == "COMPLETED", record
    assert record["outcome"]["summary"] == "a haiku by poet about winter"
    reached = [line for line in peers.log("poet") if f" agora-{task_id}" in line]
    assert reached == [
        f"message agora-{task_id}-1 agora-{task_id}-1",
        f"message agora-{task_id}-1-answer-1 agora-{task_id}-1",
    ], "the task, then the person's answer in the same context, each once"


def cancels(peers: Peers, peer: str) -> list[str]:
    """The cancels the A2A agent `peer` received, in order."""
    return [line for line in peers.log(peer) if line.startswith("cancel ")]


def parked_question(cluster: LocalCluster, task_id: str, number: int) -> dict[str, Any]:
    """The escalation of the A2A agent's `number`th question of the task, once it waits."""
    url = console(cluster).invoke_url(f"v1/escalations/{task_id}.a2a-question-{number}", "escalation")

    def waiting() -> dict[str, Any] | None:
        answer = httpx.get(url, timeout=10)
        found = answer.json() if answer.status_code == 200 else None
        return found if found and found["status"] == "WAITING_FOR_HUMAN" else None

    return eventually(waiting, timeout=60)


def answer_question(cluster: LocalCluster, escalation_id: str, text: str) -> None:
    decided = agora(
        cluster, "escalations", "resume", escalation_id, "--action", "modify_prompt", "--prompt", text,
        "--who", "alice",
    )  # fmt: skip
    assert decided.returncode == 0, decided.stderr


def test_an_a2a_agent_s_question_shows_what_it_produced_and_the_answer_continues_its_task_by_reference(
    market: LocalCluster, peers: Peers
) -> None:
    eventually(lambda: registered(market, "a2a-poet"), timeout=60)
    task_id = publish(market, "poet", "quiz")
    parked = parked_question(market, task_id, 1)
    assert parked["context"]["output_summary"] == (
        f"The A2A agent a2a-poet asks: {QUIZ_QUESTION}\n\nWhat it has produced so far:\na draft by poet"
    )
    answer_question(market, parked["escalation_id"], QUIZ_ANSWER)
    record = settled(market, task_id)
    assert record["status"] == "COMPLETED", record
    assert "poet was thinking of 7" in record["outcome"]["summary"], record["outcome"]
    assert not [line for line in peers.log("poet") if line.startswith("unreferenced ")], (
        "the answer listed the task it continues in referenceTaskIds"
    )


def test_an_a2a_agent_that_asks_the_same_question_again_and_again_is_stopped_with_the_reason(
    market: LocalCluster, peers: Peers
) -> None:
    eventually(lambda: registered(market, "a2a-poet"), timeout=60)
    cancelled_before = len(cancels(peers, "poet"))
    task_id = publish(market, "poet", "quiz")
    for number, wrong in zip(range(1, MAX_SAME_QUESTION + 1), ("1", "2", "3"), strict=True):
        parked = parked_question(market, task_id, number)
        answer_question(market, parked["escalation_id"], wrong)
    record = settled(market, task_id)
    assert record["status"] == "FAILED", record
    assert f"asked the same question {MAX_SAME_QUESTION + 1} times in a row" in record["outcome"]["summary"]
    asked = [ln for ln in peers.log("poet") if ln.startswith(f"message agora-{task_id}-")]
    assert len(asked) == 1 + MAX_SAME_QUESTION, ("the task, then each answer, once", asked)
    eventually(lambda: len(cancels(peers, "poet")) == cancelled_before + 1, timeout=20)  # its task, cancelled


def agora(cluster: LocalCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    """The `agora` CLI, through the console's sidecar (as people's tools call)."""
    port = ["--dapr-http-port", str(console(cluster).endpoints.dapr_http_port)]
    return subprocess.run(
        [sys.executable, "-m", "agora.cli", *port, *argv], capture_output=True, text=True, timeout=60
    )


def test_a_person_joins_an_a2a_agent_to_the_running_app_it_wins_work_stays_through_a_restart_and_leaves(
    market: LocalCluster, peers: Peers
) -> None:
    assert registered(market, "a2a-latecomer") is None, "not on the market before it is joined"
    joined = agora(market, "a2a", "join", "a2a-latecomer", peers.url("latecomer"), "--price", "0.004")
    assert joined.returncode == 0, joined.stderr
    assert joined.stdout.startswith("joined a2a-latecomer"), joined.stdout
    profile = eventually(lambda: registered(market, "a2a-latecomer"), timeout=10)
    assert profile["skill_tags"][0] == "haiku-by-latecomer" and profile["cost_per_step_usd"] == 0.004
    first = settled(market, publish(market, "latecomer", "dawn"))
    assert first["status"] == "COMPLETED" and first["outcome"]["agent_id"] == "a2a-latecomer", first

    unreadable = agora(market, "a2a", "join", "a2a-nobody", "http://127.0.0.1:9/card.json")
    assert unreadable.returncode == 1 and "cannot be read" in unreadable.stderr, unreadable.stderr
    taken = agora(market, "a2a", "join", "a2a-poet", peers.url("latecomer"))
    assert taken.returncode == 1 and "one of this app's own agents" in taken.stderr, taken.stderr

    # The list is the store's: the app started again serves it.
    [app] = replicas_of(market, "agents")
    app.kill_app()
    app.start_app()
    listed = agora(market, "a2a", "list")
    assert listed.returncode == 0 and listed.stdout.splitlines() == [
        f"a2a-latecomer  {peers.url('latecomer')}  ($0.004/step)"
    ], listed.stdout
    again = settled(market, publish(market, "latecomer", "dusk"), timeout=120)
    assert again["status"] == "COMPLETED" and again["outcome"]["agent_id"] == "a2a-latecomer", again

    left = agora(market, "a2a", "leave", "a2a-latecomer")
    assert left.returncode == 0, left.stderr
    eventually(lambda: registered(market, "a2a-latecomer") is None, timeout=20)
    gone = agora(market, "a2a", "leave", "a2a-latecomer")
    assert gone.returncode == 1 and "no A2A agent a2a-latecomer joined" in gone.stderr, gone.stderr


def agent_task_kept(app: ServiceReplica, message_id: str) -> bool:
    """Whether the app has kept the agent's task for the message it sent (`a2a:sent:<id>`)."""
    key = quote(f"a2a:sent:{message_id}", safe="")
    answer = httpx.get(f"{app.dapr_http}/v1.0/state/agora-state/{key}", timeout=10)
    return answer.status_code == 200 and bool(answer.json().get("a2a_task_id"))


@pytest.mark.parametrize(
    ("peer", "back"),
    [
        ("poet", "while-the-agent-works"),
        ("poet", "after-the-agent-finished"),
        ("clerk", "while-the-agent-works"),  # the 0.3 wire, no stream: its task is read
    ],
)
def test_the_agent_app_killed_mid_task_sends_the_task_once_and_the_task_completes(
    market: LocalCluster, peers: Peers, peer: str, back: str
) -> None:
    eventually(lambda: registered(market, f"a2a-{peer}"), timeout=60)
    task_id = publish(market, peer, "slow")
    sent = f"message agora-{task_id}-1 agora-{task_id}-1"
    eventually(lambda: sent in peers.log(peer), timeout=60, interval=0.05)
    [app] = replicas_of(market, "agents")
    # Killed once the app has kept the task the agent named, while the agent works on it
    # (SLOW_SECONDS). A kill before that, in the moment between sending and the answer, is the
    # lost send (tests/unit/test_a2a_sent_messages.py): the 0.3 wire cannot say then whether the
    # agent has the task, and the run ends FAILED rather than send it twice.
    eventually(lambda: agent_task_kept(app, f"agora-{task_id}-1"), timeout=30, interval=0.05)
    app.kill_app()
    time.sleep(1 if back == "while-the-agent-works" else SLOW_SECONDS + 2)
    app.start_app()
    record = settled(market, task_id, timeout=150)

    assert record["status"] == "COMPLETED", (record["outcome"]["summary"], record["awards"])
    assert record["outcome"]["summary"] == f"a haiku by {peer} about slow"
    reached = [line for line in peers.log(peer) if f" agora-{task_id}" in line]
    assert reached == [sent], "the run taken up again followed the agent's task instead of sending it again"


def test_an_a2a_agent_that_bids_itself_wins_by_its_own_bid_asked_over_a2a(market: LocalCluster) -> None:
    bidder = eventually(lambda: registered(market, "a2a-bidder"), timeout=60)
    assert bidder["bid_app_id"] == "agents", "its bids are asked of its agent app"
    # A bid over A2A crosses the agent app and the peer: given seconds, not the default 300 ms, so
    # a busy machine does not turn it into the market's fallback estimate.
    record = settled(market, publish(market, "bidder", "spring", bid_deadline_ms=5_000))

    assert record["status"] == "COMPLETED", record
    bid = record["allocation"]["winning_bid"]
    assert not bid["fallback"], bid
    assert bid["rationale"] == BID_OFFER["rationale"]
    assert bid["self_reported_success_prob"] == BID_OFFER["self_reported_success_prob"]
    assert bid["estimated_steps"] == BID_OFFER["estimated_steps"]


def test_an_a2a_agent_that_answers_a_bid_request_out_of_contract_gets_the_market_s_estimate_with_why(
    market: LocalCluster,
) -> None:
    eventually(lambda: registered(market, "a2a-mumbler"), timeout=60)
    record = settled(market, publish(market, "mumbler", "summer"))

    bid = record["allocation"]["winning_bid"]
    assert bid["fallback"], bid
    assert "answered its bid request without a 'bid_offer' data part" in bid["fallback_reason"], bid
    assert record["status"] == "COMPLETED", "it still does the work it wins"


def test_cards_that_are_no_use_keep_their_agents_off_the_market_with_the_reason_and_the_others_on(
    market: LocalCluster,
) -> None:
    eventually(lambda: registered(market, "a2a-poet"), timeout=60)
    [app] = replicas_of(market, "agents")
    assert app.app is not None
    reasons = {
        "a2a-broken": "its card is not an A2A Agent Card",
        "a2a-huge": "its card is larger than 262144 bytes",
        "a2a-skilless": "its card offers no skill",
    }

    def logged() -> bool:
        log = app.app.log_path.read_text(errors="replace") if app.app else ""
        return all(reason in log for reason in reasons.values())

    eventually(logged, timeout=30)
    time.sleep(LEASE_SECONDS / 3)  # a renewal later: still off the market, the others still on
    for agent_id in reasons:
        assert registered(market, agent_id) is None, agent_id
    assert registered(market, "a2a-poet") is not None


def test_an_a2a_agent_that_goes_silent_holding_a_task_gives_failed_with_the_reason_and_is_cancelled(
    market: LocalCluster, peers: Peers
) -> None:
    eventually(lambda: registered(market, "a2a-careless"), timeout=60)
    record = settled(market, publish(market, "careless", "silence"), timeout=IDLE_SECONDS + 90)
    assert record["status"] == "FAILED", record
    summary = record["outcome"]["summary"]
    assert "could not be reached or failed" in summary and "Timeout" in summary, summary
    cancelled = [ln for ln in peers.log("careless") if ln.startswith("cancel ")]
    assert len(cancelled) == 1, "the task given up on is cancelled at the agent"


def test_an_a2a_agent_that_streams_without_end_gives_failed_out_of_protocol(market: LocalCluster) -> None:
    eventually(lambda: registered(market, "a2a-careless"), timeout=60)
    record = settled(market, publish(market, "careless", "chatter"))
    assert record["status"] == "FAILED", record
    assert "answered out of protocol: it sent more than 1000 events" in record["outcome"]["summary"]


def test_an_a2a_agent_s_oversized_artifact_is_cut_to_the_bound_and_the_outcome_says_so(
    market: LocalCluster,
) -> None:
    eventually(lambda: registered(market, "a2a-careless"), timeout=60)
    record = settled(market, publish(market, "careless", "sprawl"))
    assert record["status"] == "COMPLETED" and record["outcome"]["partial"], record["outcome"]
    summary = record["outcome"]["summary"]
    assert len(summary) == 16_384 and summary.endswith("(cut at 16384 characters)"), summary[-60:]


def test_a_question_nobody_answers_before_the_deadline_ends_the_task_and_cancels_the_a2a_task(
    market: LocalCluster, peers: Peers
) -> None:
    eventually(lambda: registered(market, "a2a-poet"), timeout=60)
    cancelled_before = len(cancels(peers, "poet"))
    task_id = publish(market, "poet", "ask", deadline_ms=6_000)
    record = settled(market, task_id)

    assert record["status"] == "FAILED", record
    assert "DEADLINE_EXCEEDED" in record["outcome"]["summary"], record["outcome"]
    escalation_url = console(market).invoke_url(f"v1/escalations/{task_id}.a2a-question-1", "escalation")
    assert httpx.get(escalation_url, timeout=10).status_code == 200, "it asked, and waited for a person"
    eventually(lambda: len(cancels(peers, "poet")) > cancelled_before, timeout=20)
    time.sleep(1.0)  # a second cancel of the same task would come right after the first
    assert len(cancels(peers, "poet")) == cancelled_before + 1, cancels(peers, "poet")
