"""The README's "Bring your own agent" is a complete agent app: its code, as written, defines
an agent whose runner calls its tool and answers with the tool's result, in under 30 lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agora.sdk import Agent, AgentDefinition, RunStatus

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
