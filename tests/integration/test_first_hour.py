"""The first hour of a new user: `agora run` (what `make run` starts) comes up clean, its demo
shows the market as the README does (on every fresh system), every command the README and
docs/usage.md show runs as written, from the clone and from any other directory, and mistakes
get a readable message and a non-zero exit code, never a traceback."""

from __future__ import annotations

import asyncio
import html
import itertools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agora.harness.toolchain import Toolchain, cache_root
from tests.integration.helpers import eventually, present, start_agora_run

REPO = Path(__file__).resolve().parents[2]
AGORA = [sys.executable, "-m", "agora.cli"]
RELOAD_SECONDS = 30
DOCUMENTS_WITH_COMMANDS = (REPO / "README.md", REPO / "docs" / "usage.md")
"""Read in this order: the README's first task and escalations, then the plans and debates."""
DEMO_FIRST_LINE = "Registry: filter_capable(required=['web_search'], preferred=['summarize']):"
"""Where the demo's output the README shows begins."""
SECOND_SYSTEM_TIMEOUT_S = 300


@dataclass
class RunningSystem:
    proc: subprocess.Popen[str]
    output: list[str]
    run_dir: Path

    def logs(self) -> Path:
        return self.run_dir / "logs"


def _readme_commands() -> list[list[str]]:
    """Every `.venv/bin/agora ...` line of the shell blocks of the README and docs/usage.md, in
    order."""
    commands = []
    in_shell = False
    lines = [line for document in DOCUMENTS_WITH_COMMANDS for line in document.read_text().splitlines()]
    for line in lines:
        if line.startswith("```"):
            in_shell = line.strip() == "```sh"
            continue
        if in_shell and line.startswith(".venv/bin/agora "):
            command = line.split("  #", 1)[0]
            commands.append(shlex.split(command))
    return commands


def _readme_demo_output() -> list[str]:
    """The README's demo output: the registry's answer, then each market task's allocation and
    outcome."""
    lines = (REPO / "README.md").read_text().splitlines()
    start = lines.index(DEMO_FIRST_LINE)
    return lines[start : lines.index("```", start)]


def _demo_output(output: list[str]) -> list[str]:
    """The same part of what a demo printed: up to its hint to inspect a task."""
    lines = "".join(output).splitlines()
    start = lines.index(DEMO_FIRST_LINE)
    end = next(i for i, line in enumerate(lines) if line.startswith("Inspect any task with"))
    shown = lines[start:end]
    while shown and not shown[-1]:
        shown.pop()
    return shown


def agora(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AGORA, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSystem]:
    """`agora run` started as `make run` starts it, but from a directory that is not the clone."""
    where = tmp_path_factory.mktemp("make-run")
    proc, output = start_agora_run(where, {**os.environ, "PYTHONPATH": str(REPO / "services")})
    run_dir = next(where.joinpath(".run").iterdir())
    running = RunningSystem(proc, output, run_dir)
    try:
        yield running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


pytestmark = pytest.mark.whole_system


def test_the_banner_names_jaeger_services_that_exist(system: RunningSystem) -> None:
    banner = next(line for line in system.output if "traces:" in line)
    url, named = present(re.search(r"(http://\S+) \(Jaeger query API; services: ([^)]*)\)", banner)).groups()
    expected = {name.strip() for name in named.split(",")}
    assert expected == {"agora"}

    def known() -> bool:
        return expected <= set(httpx.get(f"{url}/api/services", timeout=5).json()["data"] or [])

    eventually(known, timeout=30)


def test_the_banner_gives_the_consoles_address_and_the_console_answers_there(system: RunningSystem) -> None:
    banner = next(line for line in system.output if "console:" in line)
    url = present(re.search(r"console: (http://127\.0\.0\.1:\d+)", banner)).group(1)
    answer = httpx.get(f"{url}/signin", timeout=10)
    assert answer.status_code == 200 and "Sign in" in answer.text


async def test_the_mcp_server_the_banner_names_publishes_a_task_the_market_decides(
    system: RunningSystem,
) -> None:
    """With the key the banner points at, an MCP client (the `mcp` SDK's) publishes a task and
    reads it decided: in the embedded default, the console's sidecar shares no broker with the
    market, so the task goes through the task board."""
    banner = next(line for line in system.output if "MCP server:" in line)
    url, key_file = present(
        re.search(r"MCP server: (http://127\.0\.0\.1:\d+/mcp)\s+\(bearer key in (\S+)\)", banner)
    ).groups()
    key = Path(key_file).read_text().strip()
    task_id = f"mcp-first-hour-{os.getpid()}"
    task = {
        "task_id": task_id,
        "description": "Find papers on agent markets",
        "required_skills": ["web_search"],
        "min_success_threshold": 0.0,
    }
    async with (
        httpx.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        published = await session.call_tool("publish_task", {"task": task})
        assert not published.isError, published.content
        deadline = time.monotonic() + 60
        while True:
            shown = await session.call_tool("show_task", {"task_id": task_id})
            record = shown.structuredContent or {}
            if not shown.isError and record.get("status") in {"COMPLETED", "FAILED", "REJECTED"}:
                break
            assert time.monotonic() < deadline, f"not decided in time: {shown.content}"
            await asyncio.sleep(0.5)
    assert record["allocation"]["status"] == "ALLOCATED", record["allocation"]


def test_a_paused_session_is_decided_in_the_console_the_banner_names(system: RunningSystem) -> None:
    """As a person would: sign in with the secret the banner points at, open the escalation,
    send the decision form (the console's forms work without its script)."""
    banner = next(line for line in system.output if "console:" in line)
    url, person, secret_file = present(
        re.search(
            r"console: (http://127\.0\.0\.1:\d+)\s+\(sign in as (\S+) with the secret in (\S+)\)", banner
        )
    ).groups()
    port = present(re.search(r"agora-0 .*daprd http :(\d+)", "".join(system.output))).group(1)
    session = f"console-session-{os.getpid()}"
    report = f"http://127.0.0.1:{port}/v1.0/invoke/agora/method/v1/sessions/{session}/llm-responses"
    confident = {"step_id": "1", "text": "Found the orders table. Confidence: 95%"}
    httpx.post(report, json=confident, timeout=30).raise_for_status()
    doubtful = {
        "step_id": "2",
        "prompt": "Migrate the orders table",
        "text": "Not sure at all. Confidence: 15%",
    }
    verdict = httpx.post(report, json=doubtful, timeout=30).json()
    assert verdict["action"] == "pause_for_human", verdict
    escalation_id = verdict["escalation_id"]

    with httpx.Client(base_url=url, timeout=30) as http:
        secret = Path(secret_file).read_text().strip()
        assert http.post("/signin", data={"name": person, "secret": secret}).status_code == 303
        page = http.get(f"/escalations/{escalation_id}").text
        form = {
            name: html.unescape(value) for name, value in re.findall(r'name="(\w+)" value="([^"]*)"', page)
        }
        decided = http.post(
            f"/escalations/{escalation_id}/decision",
            data={
                "csrf": form["csrf"],
                "context_digest": form["context_digest"],
                "shown_fields": form["shown_fields"],
                "action": "modify_prompt",
                "modified_prompt": "Copy the orders table first, then drop it",
                "why": "keep a backup",
            },
        )
        assert decided.status_code == 303, decided.text
        shown = http.get(f"/escalations/{escalation_id}").text
    assert 'id="status">RESOLVED<' in shown and f'id="decided-by">{person}<' in shown

    def continued() -> bool:
        state = httpx.get(report.removesuffix("/llm-responses"), timeout=10).json()
        return bool(state["status"] == "RUNNING")

    eventually(continued, timeout=30)


def test_the_demo_shows_an_sdk_agent_winning_by_its_own_bid_using_its_tool_and_its_answer_checked(
    system: RunningSystem,
) -> None:
    shown = "".join(system.output)
    assert "Agent app: published demo-sum 'What is 19 + 23?'" in shown, shown
    winner = next(line for line in system.output if "winner calculator by" in line)
    assert "by its own bid: 'Calculator: about 2 steps, 0 of 4 runs under way'" in winner, winner
    outcome = next(line for line in system.output if "tools called:" in line)
    assert "outcome: succeeded in 2 steps" in outcome and outcome.rstrip().endswith(
        "'42.0'; tools called: add"
    )
    # The market checked the answer: the claim and the verdict, side by side, with why.
    lines = "".join(system.output).splitlines()
    checked = lines[lines.index(outcome.rstrip("\n")) + 1]
    assert checked.strip() == (
        "the agent claimed success; verdict: passed by taskboard (expected): 42.0 is within 0 of 42"
    ), checked


def test_the_demo_shows_an_a2a_agent_of_the_a2a_sdk_alone_winning_a_task_with_its_artifact(
    system: RunningSystem,
) -> None:
    shown = "".join(system.output)
    assert "  on the market over A2A: text-stats, an agent of the a2a-sdk alone (http://127.0.0.1:" in shown
    assert "A2A agent: published demo-stats" in shown, shown
    ended = next(line for line in system.output if line.startswith("  demo-stats"))
    assert ended.split()[1] == "COMPLETED", ended
    said = next(line for line in system.output if "said over A2A as it worked:" in line)
    assert said.strip().startswith("text-stats said") and "counting" in said, said
    outcome = next(line for line in system.output if "outcome: succeeded: " in line and "words" in line)
    assert "15 words in 2 sentences; most frequent: 'the' (4x)" in outcome, outcome


def test_the_demo_s_market_ends_as_the_readme_shows_on_every_fresh_system(
    system: RunningSystem, tmp_path: Path
) -> None:
    """The system of this module, and a second one started afresh beside it (no Jaeger; its
    links in a cache folder of its own, so this module's system stays the one the CLI finds)."""
    readme = _readme_demo_output()
    assert "Market: published 4 tasks to agora.tasks" in readme and len(readme) >= 15, readme
    assert _demo_output(system.output) == readme

    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "services"),
        "AGORA_CACHE": str(tmp_path / "cache"),
        "AGORA_DAPR_BIN": str(Toolchain.from_environment().dapr_bin),
    }
    proc = subprocess.Popen(
        [*AGORA, "run", "--no-jaeger"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    output: list[str] = []
    watchdog = threading.Timer(SECOND_SYSTEM_TIMEOUT_S, proc.kill)  # a system that never comes up
    watchdog.start()
    try:
        for line in iter(proc.stdout.readline, ""):
            output.append(line)
            if line.startswith("Running."):
                break
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        watchdog.cancel()
    assert output and output[-1].startswith("Running."), "".join(output)
    assert _demo_output(output) == readme


def test_every_readme_command_runs_as_written_from_the_clone(system: RunningSystem) -> None:
    commands = _readme_commands()
    assert len(commands) >= 15, commands
    for command in commands:
        assert command[0] == ".venv/bin/agora"
        done = subprocess.run(
            [str(REPO / ".venv" / "bin" / "agora"), *command[1:]],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr


def test_the_cli_finds_the_running_system_from_any_directory(system: RunningSystem, tmp_path: Path) -> None:
    assert (cache_root() / "current").resolve() == system.run_dir.resolve()
    listed = agora("registry", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "researcher" in listed.stdout


def readable_failure(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "{" not in done.stderr.split("\n", 1)[0], done.stderr
    for text in expected:
        assert text in done.stderr, (text, done.stderr)


def test_an_invalid_file_is_reported_by_field(system: RunningSystem, tmp_path: Path) -> None:
    bad = tmp_path / "tasks.yaml"
    bad.write_text(
        "- task_id: ok-1\n  description: fine\n  required_skills: [web_search]\n- task_id: bad 2\n"
    )
    readable_failure(
        agora("task", "publish", str(bad), cwd=tmp_path),
        f"{bad}: item 2",
        "task_id: String should match pattern",
        "required_skills: Field required",
    )
    readable_failure(agora("task", "publish", "missing.yaml", cwd=tmp_path), "missing.yaml: no such file")
    crowded = tmp_path / "agents.yaml"
    crowded.write_text(
        json.dumps([{"agent_id": "a", "agent_name": "A", "skill_tags": [f"t{i}" for i in range(65)]}])
    )
    readable_failure(
        agora("registry", "register", str(crowded), cwd=tmp_path),
        "skill_tags: List should have at most 64 items",
    )
    readable_failure(  # a query is checked before it is sent, like a file
        agora("registry", "filter", "--required", " ", cwd=tmp_path),
        "the capability query: required_skills",
    )


def test_each_kind_of_server_error_is_readable(system: RunningSystem, tmp_path: Path) -> None:
    readable_failure(
        agora("task", "show", "no-such-task", cwd=tmp_path),
        "(404 NOT_FOUND)",
        "no task 'no-such-task' on the board",
    )
    readable_failure(
        agora("escalations", "resume", "no-such-escalation", "--action", "retry", cwd=tmp_path),
        "(404 NOT_FOUND)",
    )
    readable_failure(
        agora("plan", "list", "--limit", "5000", cwd=tmp_path),
        "(422 INVALID_ARGUMENT)",
        "limit",
    )
    readable_failure(
        agora("escalations", "resume", "demo-session.2", "--action", "retry", cwd=tmp_path),
        "(409 AGENT_NOT_WAITING)",
    )
    readable_failure(
        agora("--dapr-http-port", "1", "registry", "list", cwd=tmp_path), "no Dapr sidecar answers"
    )


def test_a_clean_start_logs_no_error_and_one_reload_timer(system: RunningSystem) -> None:
    """Run last in this module: it waits for the registry's first periodic reload."""
    app_log = system.logs() / "agora-0.app.log"

    def reloads() -> list[datetime]:
        return [
            datetime.fromisoformat(entry["time"])
            for entry in map(json.loads, app_log.read_text().splitlines())
            if entry.get("message") == "registry loaded"
        ]

    eventually(lambda: len(reloads()) >= 2, timeout=RELOAD_SECONDS + 30, interval=1)
    times = reloads()
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)]
    assert all(gap > RELOAD_SECONDS - 5 for gap in gaps), times

    errors = []
    for path in sorted(system.logs().glob("*.log")):
        for line in path.read_text().splitlines():
            if '"level": "error"' in line or "level=error" in line or "level=fatal" in line:
                errors.append(f"{path.name}: {line[:300]}")
    assert errors == []


def test_the_demo_graph_waits_for_a_person_and_goes_on_as_decided(
    system: RunningSystem, tmp_path: Path
) -> None:
    shown = "".join(system.output)
    assert "Graph: run demo-review of the review graph" in shown, shown
    route = next(line for line in system.output if "WAITING_FOR_HUMAN: " in line)
    assert route.strip() == "WAITING_FOR_HUMAN: measure → research → approve", route
    assert any("market node: task graph.demo-review.2" in line for line in system.output), shown
    waiting = next(line for line in system.output if "it waits at 'approve' for a person" in line)
    escalation_id = waiting.rsplit("escalation ", 1)[1].strip()

    decided = agora(
        "escalations", "resume", escalation_id, "--action", "retry", "--why", "publish it", cwd=tmp_path
    )
    assert decided.returncode == 0, decided.stderr

    shown = "".join(system.output)
    port = present(re.search(r"agora-0 .*daprd http :(\d+)", shown)).group(1)
    url = f"http://127.0.0.1:{port}/v1.0/invoke/agora/method/v1/graphs/review/runs/demo-review"

    def ended() -> dict[str, Any] | None:
        record: dict[str, Any] = httpx.get(url, timeout=10).json()
        return record if record["status"] == "COMPLETED" else None

    record = eventually(ended, timeout=60)
    assert record["path"] == ["measure", "research", "approve", "publish"]
    assert "[Decision: retry.]" in json.loads(record["state"])["output"]
