"""Tools from typed functions: their schema from the signature, and a call that goes wrong comes
back to the model as the call's result, never as the run's end."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from agora.sdk import Tool, tool
from agora.sdk.tools import ToolCall, ToolExecutor


@tool
def add(a: float, b: float = 1.0) -> float:
    """Add two numbers."""
    return a + b


class Reading(BaseModel):
    path: str
    lines: int


@tool(timeout_s=0.05)
async def slow_read(path: str) -> Reading:
    """Read a file slowly."""
    await asyncio.sleep(1)
    return Reading(path=path, lines=0)


@tool
def broken(x: int) -> int:
    """Always fails."""
    raise RuntimeError(f"cannot handle {x}")


def test_a_tool_s_schema_comes_from_its_signature_and_its_description_from_its_docstring() -> None:
    assert add.name == "add" and add.description == "Add two numbers."
    assert add.parameters["properties"] == {
        "a": {"type": "number", "title": "A"},
        "b": {"type": "number", "title": "B", "default": 1.0},
    }
    assert add.parameters["required"] == ["a"]
    assert add.parameters["additionalProperties"] is False


def test_a_function_without_annotations_or_with_star_args_is_refused() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    def star(*values: int) -> int:
        return sum(values)

    with pytest.raises(ValueError, match="needs a type annotation"):
        Tool(untyped)
    with pytest.raises(ValueError, match=r"\*args"):
        Tool(star)


async def test_a_call_runs_the_function_with_validated_arguments() -> None:
    result = await ToolExecutor([add]).execute(ToolCall(name="add", arguments={"a": "2", "b": 3}))
    assert result.ok and result.output == "5.0"


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (ToolCall(name="nope"), "UnknownTool: no tool named 'nope' (tools: add, broken, slow_read)"),
        (ToolCall(name="add", arguments={"a": "two"}), "InvalidArguments: a: Input should be a valid number"),
        (
            ToolCall(name="add", arguments={"a": 1, "c": 2}),
            "InvalidArguments: c: Extra inputs are not permitted",
        ),
        (ToolCall(name="broken", arguments={"x": 7}), "RuntimeError: cannot handle 7"),
        (
            ToolCall(name="slow_read", arguments={"path": "a"}),
            "Timeout: slow_read did not finish within 0.05 s",
        ),
    ],
)
async def test_whatever_goes_wrong_comes_back_as_the_call_s_result(call: ToolCall, error: str) -> None:
    result = await ToolExecutor([add, broken, slow_read]).execute(call)
    assert not result.ok and result.error is not None and result.error.startswith(error)
    assert result.for_model().startswith("error: ")


def test_two_tools_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="two tools are named 'add'"):
        ToolExecutor([add, Tool(add.function)])


@tool
async def at_once() -> str:
    """Answers after one turn of the event loop."""
    await asyncio.sleep(0)
    return "done"


async def test_a_run_cancelled_as_its_tool_finishes_is_cancelled_not_carried_on() -> None:
    # A run's deadline cancels it; the cancel may land in the very turn its tool finishes
    # (Python 3.11's asyncio.wait_for then returned the tool's result and dropped the cancel).
    executor = ToolExecutor([at_once])
    for turns in range(12):
        running = asyncio.create_task(executor.execute(ToolCall(name="at_once")))
        for _ in range(turns):
            await asyncio.sleep(0)
        if running.done():
            continue
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
