"""The runner's steps with a model that takes tools natively: a tool call is a step, its result
goes back as a `tool` message naming the call, and what a model gets wrong (arguments that are no
JSON object, an empty answer, one cut off at its limit) is told to it rather than ending the run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agora.llm import ChatMessage, Completion, ModelToolCall, ToolChoice, ToolSpec, TracedModelClient
from agora.sdk import tool
from agora.sdk.runner import AgentDefinition, AgentRunner, RunnerConfig, RunStatus
from agora.sdk.tools import ToolExecutor


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class ToolCallingModel(TracedModelClient):
    """Answers in order with the given completions; keeps each call's tools and tool choice."""

    backend = "tool-calling"
    model = "tool-calling"
    supports_tools = True

    def __init__(self, *answers: Completion) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[list[ChatMessage], list[str], ToolChoice]] = []

    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None,
        temperature: float,
        max_tokens: int | None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice = "auto",
    ) -> Completion:
        assert json_schema is None  # native steps ask for no JSON
        self.asked.append((list(messages), [t.name for t in tools], tool_choice))
        return self.answers.pop(0)


def calls(name: str, arguments: str, call_id: str = "c1") -> Completion:
    call = ModelToolCall(id=call_id, name=name, arguments=arguments)
    return Completion(text="", model="m", backend="b", finish_reason="tool_calls", tool_calls=[call])


def says(text: str, finish_reason: str = "stop") -> Completion:
    return Completion(text=text, model="m", backend="b", finish_reason=finish_reason)


async def run(model: ToolCallingModel, **config: Any) -> Any:
    runner = AgentRunner(model, ToolExecutor([add]), config=RunnerConfig(max_iterations=5, **config))
    return await runner.run(AgentDefinition(name="adder"), "What is 2 + 3?", session_id="s-1")


async def test_a_native_call_runs_the_tool_and_its_result_names_the_call() -> None:
    model = ToolCallingModel(calls("add", '{"a": 2, "b": 3}', "call-7"), says("5"))
    result = await run(model, tool_choice="required")
    assert (result.status, result.output, result.tools_called) == (RunStatus.COMPLETED, "5", ["add"])
    [(_, tools, first_choice), (second_messages, _, second_choice)] = model.asked
    assert tools == ["add"] and (first_choice, second_choice) == ("required", "auto")
    assert second_messages[-1] == ChatMessage(role="tool", content="5", tool_call_id="call-7")
    assert second_messages[-2].tool_calls[0].id == "call-7"


async def test_arguments_that_are_no_json_object_go_back_to_the_model_as_the_call_s_error() -> None:
    model = ToolCallingModel(calls("add", "2 and 3"), calls("add", '{"a": 2, "b": 3}', "c2"), says("5"))
    result = await run(model)
    assert result.status is RunStatus.COMPLETED and result.tools_called == ["add"]
    told = model.asked[1][0][-1]
    assert told.role == "tool" and told.tool_call_id == "c1" and "not one JSON object" in told.content


async def test_an_empty_or_cut_off_answer_is_asked_again_not_taken_as_final() -> None:
    model = ToolCallingModel(says("   "), says("The answer is", finish_reason="length"), says("5"))
    result = await run(model)
    assert (result.status, result.output, result.iterations) == (RunStatus.COMPLETED, "5", 3)
    assert "was empty" in model.asked[1][0][-1].content
    assert "cut off at its output limit" in model.asked[2][0][-1].content


class JsonStepsModel(ToolCallingModel):
    async def _complete(self, messages: list[ChatMessage], **kwargs: Any) -> Completion:  # type: ignore[override]
        assert kwargs["json_schema"] is not None and not kwargs["tools"]  # a step in text, no tools offered
        return self.answers.pop(0)


async def test_without_native_tools_the_runner_keeps_the_json_steps() -> None:
    model = JsonStepsModel(says('{"action": "final", "answer": "5"}'))
    result = await run(model, native_tools=False)
    assert result.status is RunStatus.COMPLETED and result.output == "5"
