"""A dapr-agents agent's runs each report their own steps and cost, also when the agent has no
state store of its own (dapr-agents then keeps one conversation for all its runs). The agent
and its workflow engine are stand-ins that behave as dapr-agents' do: no sidecar needed."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from dapr.ext.workflow import WorkflowStatus
from dapr_agents import AgentMetadata, AgentMetadataSchema

from agora.core.market import Bid, BidScore, TaskSpec
from agora.core.messages import TaskAwarded
from agora.sdk import _dapr_agents as adapter
from agora.sdk import dapr_agents


@dataclass
class Message:
    role: str
    content: str
    id: str


@dataclass
class Entry:
    messages: list[Message] = field(default_factory=list)


class StandInAgent:
    """What the adapter uses of a `DurableAgent`. Without a state store every run writes to one
    shared entry, and `get_state` answers it whatever the instance, as dapr-agents does."""

    name = "Archivist"
    agent_workflow_name = "dapr.agents.archivist.workflow"

    def __init__(self, *, state_store: object | None = None) -> None:
        self.state_store = state_store
        self.agent_metadata = AgentMetadataSchema(
            version="1.0.9", name=self.name, registered_at="2026-11-26T12:00:00+00:00",
            agent=AgentMetadata(appid="agents", type="DurableAgent", max_iterations=4),
        ).model_dump(mode="json")  # fmt: skip
        self.shared = Entry()
        self.per_instance: dict[str, Entry] = {}

    def register(self, runtime: Any) -> None:
        raise AssertionError("not started in these tests")

    def call_llm(self, ctx: Any, payload: dict[str, Any]) -> dict[str, Any]:
        """One model turn: the same message again for an activity run again (its id is made
        of the instance and the turn, as dapr-agents makes it of the activity's attempt)."""
        instance = ctx.workflow_id
        message_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{instance}:{payload['turn']}"))
        entry = self.per_instance.setdefault(instance, Entry()) if self.state_store else self.shared
        if all(m.id != message_id for m in entry.messages):
            entry.messages.append(Message("assistant", f"turn {payload['turn']}", message_id))
        return {"role": "assistant", "content": f"answer of {instance}", "id": message_id}

    def get_state(self, instance: str) -> Entry:
        return self.per_instance.get(instance, Entry()) if self.state_store else self.shared


@dataclass
class Context:
    workflow_id: str


@dataclass
class Ended:
    serialized_output: str
    runtime_status: WorkflowStatus = WorkflowStatus.COMPLETED
    failure_details: Any = None


class StandInEngine:
    """The workflow engine: scheduling an instance runs it, one `call_llm` activity per turn
    its task asks for (`turns: N`), the last one delivered twice."""

    def __init__(self, agent: StandInAgent) -> None:
        self.agent = agent
        self.ended: dict[str, Ended] = {}

    async def get_workflow_state(self, instance: str, fetch_payloads: bool) -> Ended | None:
        return self.ended.get(instance)

    async def schedule_new_workflow(self, workflow: str, input: dict[str, Any], instance_id: str) -> None:
        turns = int(input["task"].rsplit("turns: ", 1)[1])
        for turn in [*range(1, turns + 1), turns]:
            message = self.agent.call_llm(Context(instance_id), {"instance_id": instance_id, "turn": turn})
        self.ended[instance_id] = Ended(json.dumps(message))

    async def wait_for_workflow_completion(self, instance: str, **_: Any) -> Ended:
        return self.ended[instance]


def award(task_id: str, turns: int) -> TaskAwarded:
    bid = Bid(task_id=task_id, agent_id="archivist", self_reported_success_prob=0.9, estimated_cost_usd=0.1,
              estimated_steps=2)  # fmt: skip
    score = BidScore(
        agent_id="archivist", bid_id=bid.bid_id, raw_success_prob=0.9, calibrated_success_prob=0.9,
        reputation_score=0.5, cost_score=0.5, composite=0.5, ucb_bonus=0.0, final_score=0.5,
    )  # fmt: skip
    spec = TaskSpec(task_id=task_id, description=f"Find the records; turns: {turns}", required_skills=["s"])
    return TaskAwarded(task_id=task_id, agent_id="archivist", spec=spec, bid=bid, score=score,
                       award_token="t" * 32)  # fmt: skip


def on_market(agent: StandInAgent, monkeypatch: pytest.MonkeyPatch) -> Any:
    engine = StandInEngine(agent)
    monkeypatch.setattr(adapter, "DaprWorkflowClient", lambda: engine)
    market = dapr_agents.market_agent(agent, skills=["archive_search"], cost_per_step_usd=0.002)  # type: ignore[arg-type]
    assert market.handler is not None
    return market.handler


@pytest.mark.parametrize("store", [None, object()], ids=["no state store", "a state store"])
async def test_each_run_reports_its_own_turns_and_their_cost(
    store: object | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = on_market(StandInAgent(state_store=store), monkeypatch)
    reported = [await run(award(f"task-{i}", turns)) for i, turns in enumerate([1, 1, 3, 1])]
    assert [r.steps for r in reported] == [1, 1, 3, 1]
    assert [r.cost_usd for r in reported] == [0.002, 0.002, 0.006, 0.002]
    assert reported[2].success and reported[2].summary == "answer of dapr-agents.task-2"


async def test_an_award_s_step_run_again_reports_the_same_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = StandInAgent()
    run = on_market(agent, monkeypatch)
    first = await run(award("task-a", 2))
    again = await run(award("task-a", 2))  # the instance has ended: it is read, not run again
    assert first == again and first.steps == 2
    assert len(agent.shared.messages) == 2  # dapr-agents' own state, as it keeps it
