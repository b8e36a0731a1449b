"""The SDK's front door: an `Agent` is its model, instructions, tools, skills and price, runs
directly, and is what an agent app serves; `agora.sdk.testing` scripts its model."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

import agora.sdk
from agora.core import topics
from agora.core.market import TaskSpec
from agora.llm import ModelUnavailable, OfflineModelClient
from agora.sdk import Agent, RunStatus, tool
from agora.sdk.app import HandlerResult
from agora.sdk.runner import AgentRunner
from agora.sdk.testing import FunctionModel, RecordingPublisher, ScriptedModel, call_tool, final

PUBLIC_MODULES = ["runner", "tools", "models", "crews", "graphs", "app", "errors", "testing", "dapr_agents"]


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def test_the_top_level_holds_at_most_thirty_names_and_each_public_module_exports_what_it_lists() -> None:
    assert len(agora.sdk.__all__) <= 30
    assert all(hasattr(agora.sdk, name) for name in agora.sdk.__all__)
    for module in PUBLIC_MODULES:
        public = importlib.import_module(f"agora.sdk.{module}")
        missing = [name for name in public.__all__ if not hasattr(public, name)]
        assert not missing, (module, missing)


async def test_an_agent_runs_its_tool_and_answers_with_a_scripted_model() -> None:
    model = ScriptedModel(call_tool("add", a=2, b=3), final("5"))
    agent = Agent("calc", model, instructions="Compute exactly.", tools=[add], skills=["arithmetic"])

    result = await agent.run("What is 2 + 3?")

    assert result.status is RunStatus.COMPLETED and result.output == "5"
    assert result.tools_called == ["add"]
    assert model.remaining == 0 and len(model.asked) == 2
    assert model.asked[0][0].role == "system" and "Compute exactly." in model.asked[0][0].content
    assert model.asked[1][-1].content.startswith("Result of tool add") and "5.0" in model.asked[1][-1].content


def test_run_sync_runs_from_code_without_an_event_loop() -> None:
    agent = Agent("calc", ScriptedModel(final("4")), skills=["arithmetic"])
    assert agent.run_sync("What is 2 + 2?").output == "4"


async def test_a_script_that_runs_out_says_so() -> None:
    agent = Agent("calc", ScriptedModel(call_tool("add", a=1, b=1)), tools=[add])
    with pytest.raises(ModelUnavailable, match="no answer left"):
        await agent.run("What is 1 + 1?")


async def test_a_function_model_answers_every_call_from_the_messages() -> None:
    def decide(messages: Any) -> Any:
        last = messages[-1].content
        return (
            final(last.split(": ", 1)[1]) if last.startswith("Result of tool") else call_tool("add", a=4, b=5)
        )

    agent = Agent("calc", FunctionModel(decide), tools=[add])
    assert (await agent.run("What is 4 + 5?")).output == "9.0"
    assert (await agent.run("And again?")).output == "9.0"


def test_the_profile_the_market_gets_comes_from_the_agent_s_own_words() -> None:
    agent = Agent(
        "calc", ScriptedModel(), tools=[add], price_per_step=0.002, max_steps=6, display_name="Calc"
    )
    assert agent.profile.agent_id == "calc" and agent.profile.agent_name == "Calc"
    assert agent.profile.skill_tags == ["add"], "the skills default to the tools' names"
    assert agent.profile.cost_per_step_usd == 0.002 and agent.profile.max_steps == 6
    assert agent.runner is not None and agent.runner.config.max_iterations == 6


async def test_its_default_bid_is_its_price_over_half_its_step_allowance() -> None:
    agent = Agent("calc", ScriptedModel(), tools=[add], price_per_step=0.01, max_steps=6)
    offer = await agent.bid(TaskSpec(task_id="t", description="add", required_skills=["add"]))
    assert offer.estimated_steps == 3 and offer.estimated_cost_usd == pytest.approx(0.03)


async def done(_: object) -> HandlerResult:
    return HandlerResult(success=True)


def test_contradictory_or_missing_parts_are_refused_when_the_agent_is_built() -> None:
    with pytest.raises(ValueError, match="name the skills it offers"):
        Agent("calc", ScriptedModel())
    with pytest.raises(ValueError, match="a handler does its own work"):
        Agent("calc", ScriptedModel(), skills=["x"], handler=done)
    with pytest.raises(ValueError, match="give a runner or a model"):
        Agent("calc", ScriptedModel(), skills=["x"], runner=AgentRunner(ScriptedModel()))
    with pytest.raises(ValueError, match="should match pattern"):
        Agent("no spaces allowed", ScriptedModel(), skills=["x"])


async def test_a_handler_s_agent_works_on_the_market_only() -> None:
    agent = Agent("doer", skills=["x"], handler=done)
    assert agent.runner is None
    with pytest.raises(ValueError, match="works through its handler"):
        await agent.run("anything")


def test_without_a_model_the_agent_uses_the_one_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AGORA_MODEL_BACKEND", raising=False)
    agent = Agent("calc", tools=[add])
    assert agent.runner is not None
    [client] = agent.runner.router._clients.values()
    assert isinstance(client, OfflineModelClient)
    monkeypatch.setenv("AGORA_MODEL_BACKEND", "openai")
    monkeypatch.delenv("AGORA_MODEL_OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="AGORA_MODEL_OPENAI_BASE_URL"):
        Agent("calc", tools=[add])


async def test_the_recording_publisher_keeps_each_publish_by_topic() -> None:
    publisher = RecordingPublisher()
    spec = TaskSpec(task_id="t", description="d", required_skills=["s"])
    await publisher.publish(topics.TASKS, spec, message_id="m-1")
    assert publisher.sent == [(topics.TASKS.name, spec, "m-1")]
    assert publisher.on(topics.TASKS) == [spec] and publisher.on(topics.TASK_OUTCOME) == []
