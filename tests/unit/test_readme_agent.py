"""The README's "Bring your own agent" is a complete agent app: its code, as written, defines
an agent whose runner calls its tool and answers with the tool's result, in under 30 lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agora.sdk import Agent, AgentDefinition, GraphStatus, RunStatus

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_agent_code() -> str:
    section = README.read_text().split("## Bring your own agent", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_readme_agent_is_complete_and_calls_its_tool() -> None:
    code = readme_agent_code()
    user_lines = [line for line in code.splitlines() if line.strip() and not line.startswith("#")]
    assert len(user_lines) < 30, len(user_lines)
    namespace: dict[str, Any] = {}
    exec(compile(code, "my_agents.py", "exec"), namespace)

    [agent] = namespace["agents"]
    assert isinstance(agent, Agent) and agent.runner is not None
    result = await agent.runner.run(
        AgentDefinition(name=agent.agent_id), "Count the words of this task", session_id="t-1"
    )
    assert result.status is RunStatus.COMPLETED and result.output == "6"
    assert result.tools_called == ["count_words"]


def readme_graph_code() -> str:
    section = README.read_text().split("### A graph with a person in the middle", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_readme_graph_is_complete_and_stops_for_a_person_on_a_long_draft() -> None:
    code = readme_graph_code()
    user_lines = [line for line in code.splitlines() if line.strip() and not line.startswith("#")]
    assert len(user_lines) < 30, len(user_lines)
    namespace: dict[str, Any] = {}
    exec(compile(code, "my_graphs.py", "exec"), namespace)

    [graph] = namespace["graphs"]
    state_type = namespace["Draft"]
    short = await graph.execute(state_type(input="wind"))
    assert short.path == ["write", "publish"] and short.state.output.startswith("A short note on wind.")
    waiting = await graph.execute(state_type(input="solar " * 40))
    assert waiting.waiting_at == "approve" and waiting.status is GraphStatus.WAITING_FOR_HUMAN
    done = await graph.resume(waiting, "yes")
    assert done.path == ["write", "approve", "publish"] and done.state.output.endswith("(yes)")
