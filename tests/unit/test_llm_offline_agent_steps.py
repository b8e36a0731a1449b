"""The offline model as an agent: it calls only the tools the request lists (the one that fits
the task), answers in words of the task, and does the same every time."""

from __future__ import annotations

import json
import re
from typing import Any

from agora.llm import ChatMessage, OfflineModelClient
from agora.llm.offline import is_agent_step, listed_tools
from agora.sdk import tool
from agora.sdk._runner import REACT_STEP_SCHEMA, AgentDefinition, RunStatus, react_protocol
from agora.sdk.runner import AgentRunner, RunnerConfig
from agora.sdk.tools import ToolExecutor


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
def search_papers(query: str) -> str:
    """Search this week's papers on a topic."""
    return f"3 papers on {query}"


TOOLS = ToolExecutor([add, search_papers])
PLACEHOLDER = re.compile(r"\b(answer|tool|thought)-[0-9a-f]{16}\b")
"""What the schema generator makes of a string field: never an agent's words."""
TASKS = [f"Compile quarterly report {i} from the ledgers" for i in range(20)]


def opening(
    task: str, tools: ToolExecutor = TOOLS, agent: str = "You are a careful agent."
) -> list[ChatMessage]:
    return [
        ChatMessage(role="system", content=f"{agent}\n\n{react_protocol(tools)}"),
        ChatMessage(role="user", content=task),
    ]


async def step(messages: list[ChatMessage]) -> dict[str, Any]:
    completion = await OfflineModelClient().complete(messages, json_schema=REACT_STEP_SCHEMA)
    answer: dict[str, Any] = json.loads(completion.text)
    return answer


def test_the_step_schema_and_the_listed_tools_are_recognised() -> None:
    assert is_agent_step(REACT_STEP_SCHEMA)
    assert not is_agent_step({"type": "object", "properties": {"action": {"type": "string"}}})
    listed = listed_tools(opening("anything"))
    assert [t.name for t in listed] == ["add", "search_papers"]
    assert listed[0].parameters["required"] == ["a", "b"]
    assert listed_tools(opening("anything", ToolExecutor())) == []


async def test_it_calls_the_listed_tool_that_fits_the_task_with_the_task_s_numbers() -> None:
    called = await step(opening("Add 19 and 23"))
    assert called["action"] == "tool" and called["tool"] == "add"
    assert called["arguments"] == {"a": 19.0, "b": 23.0}
    searched = await step(opening("Find this week's papers on agent coordination"))
    assert searched["tool"] == "search_papers"
    assert searched["arguments"] == {"query": "Find this week's papers on agent coordination"}


async def test_after_the_tool_s_result_it_answers_with_it_and_calls_no_tool_again() -> None:
    asked = opening("What is 19 + 23?")
    called = (await OfflineModelClient().complete(asked, json_schema=REACT_STEP_SCHEMA)).text
    messages = [
        *asked,
        ChatMessage(role="assistant", content=called),
        ChatMessage(role="user", content="Result of tool add: 42.0"),
        ChatMessage(role="system", content="Reflect on the last step before the next."),
    ]
    final = await step(messages)
    assert final["action"] == "final" and final["tool"] == ""
    verdict = "Done" if final["succeeded"] else "Could not finish"
    assert final["answer"] == f"{verdict}: What is 19 + 23?; add gave 42.0"
    # A person skipped the held tool call: no result, and the tool is not asked for again.
    skipped = [
        *asked,
        ChatMessage(role="assistant", content=called),
        ChatMessage(role="user", content="skip"),
    ]
    assert (await step(skipped))["action"] == "final"


async def test_without_tools_it_answers_at_once_in_the_task_s_words() -> None:
    answers = [await step(opening(task, ToolExecutor())) for task in TASKS]
    assert {a["action"] for a in answers} == {"final"}
    for task, answer in zip(TASKS, answers, strict=True):
        assert answer["answer"] == f"{'Done' if answer['succeeded'] else 'Could not finish'}: {task}"
        assert not PLACEHOLDER.search(json.dumps(answer)), answer
    # Some tasks fail (failure paths have something to do), not most.
    assert 0 < sum(not a["succeeded"] for a in answers) < len(TASKS) / 2 + 2


async def test_whether_a_task_is_done_does_not_depend_on_which_agent_runs_it() -> None:
    for task in TASKS:
        scout = await step(opening(task, ToolExecutor(), agent="You are Fast Scout."))
        writer = await step(opening(task, ToolExecutor(), agent="You are Report Writer."))
        assert scout["succeeded"] == writer["succeeded"], task


async def run(task: str) -> Any:
    runner = AgentRunner(OfflineModelClient(), TOOLS, config=RunnerConfig(max_iterations=4))
    return await runner.run(
        AgentDefinition(name="agent", instructions="Use the tools."), task, session_id="s"
    )


async def test_an_agent_run_calls_only_listed_tools_and_ends_the_same_way_every_time() -> None:
    names = {t.name for t in TOOLS.tools}
    for task in ["What is 19 + 23?", *TASKS[:5]]:
        first, again = await run(task), await run(task)
        assert first.tools_called and set(first.tools_called) <= names, first.tools_called
        assert all(result.error is None for result in first.tool_results), first.tool_results
        assert first.iterations == 2 and first.status in (RunStatus.COMPLETED, RunStatus.FAILED)
        assert task in first.output and not PLACEHOLDER.search(first.output), first.output
        assert (first.status, first.output, first.tools_called, first.iterations) == (
            again.status, again.output, again.tools_called, again.iterations,
        )  # fmt: skip
