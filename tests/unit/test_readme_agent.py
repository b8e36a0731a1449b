"""The README's first agent runs as written: its code, saved as a file and run as a script,
prints what the README says it prints; served as an agents file, it is the agent the market
gets. It is at most 20 lines, with no hand-written model policy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agora.sdk import Agent, RunStatus
from agora.sdk.app import load_agents
from agora.sdk.graphs import GraphStatus

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_section(heading: str) -> str:
    return README.read_text().split(heading, 1)[1]


def readme_agent_code() -> str:
    return readme_section("## A first agent").split("```python\n", 1)[1].split("```", 1)[0]


def readme_agent_output() -> str:
    """The block the README shows after the code: what running it prints."""
    after_code = readme_section("## A first agent").split("```python\n", 1)[1].split("```", 1)[1]
    return after_code.split("```\n", 1)[1].split("```", 1)[0]


def test_the_readme_agent_runs_as_written_and_prints_what_the_readme_shows(tmp_path: Path) -> None:
    code = readme_agent_code()
    lines = [line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(lines) <= 20, len(lines)
    assert "json" not in code and "overrides" not in code, "no hand-written model policy"
    script = tmp_path / "my_agents.py"
    script.write_text(code)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AGORA_MODEL_")}
    ran = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    shown = [line.removeprefix("$ ").strip() for line in readme_agent_output().splitlines()]
    printed = ran.stdout.strip().splitlines()
    assert printed and printed == [line for line in shown if not line.startswith("python ")], ran.stdout


async def test_the_readme_agent_file_serves_the_agent_it_runs(tmp_path: Path) -> None:
    script = tmp_path / "my_agents.py"
    script.write_text(readme_agent_code())
    [agent] = load_agents(script)
    assert isinstance(agent, Agent) and agent.profile.skill_tags == ["word_count"]
    result = await agent.run("Count the words of: the quick brown fox")
    assert result.status is RunStatus.COMPLETED and result.tools_called == ["count_words"]


TUTORIAL = README.parent / "docs" / "sdk-tutorial.md"


def tutorial_graph_code() -> str:
    section = TUTORIAL.read_text().split("## Step 5: a graph with a person in the middle", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_tutorial_s_graph_is_complete_and_stops_for_a_person_on_a_long_draft() -> None:
    code = tutorial_graph_code()
    user_lines = [line for line in code.splitlines() if line.strip() and not line.startswith("#")]
    assert len(user_lines) < 30, len(user_lines)
    namespace: dict[str, Any] = {}
    exec(compile(code, "my_graphs.py", "exec"), namespace)

    [graph] = namespace["graphs"]
    state_type = namespace["Draft"]
    short = await graph.run(state_type(input="wind"))
    assert short.path == ["write", "publish"] and short.state.output.startswith("A short note on wind.")
    waiting = await graph.run(state_type(input="solar " * 40))
    assert waiting.waiting_at == "approve" and waiting.status is GraphStatus.WAITING_FOR_HUMAN
    done = await graph.resume(waiting, "yes")
    assert done.path == ["write", "approve", "publish"] and done.state.output.endswith("(yes)")
