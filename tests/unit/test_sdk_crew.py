"""Crews with the offline model: members one after another with their outputs accumulating, all
at once on the same task, a supervisor delegating to workers and writing the answer, and a
member that fails stopping the crew with CREW_MEMBER_FAILED."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from agora.core.errors import InvalidArgument, MarketAllocationFailed
from agora.core.limits import MAX_TEXT_CHARS
from agora.core.market import AllocationResult, AllocationStatus, TaskOutcome, TaskSpec
from agora.core.task_lifecycle import TaskRecord
from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import Crew, CrewMember, CrewMemberFailed, CrewPattern, MarketCrew
from agora.sdk.runner import AgentDefinition, AgentRunner, RunnerConfig


def answering(reply: str, seen: list[str] | None = None) -> AgentRunner:
    """A runner whose model answers `reply` at once, noting each task it is given in `seen`."""

    def model(messages: Sequence[ChatMessage]) -> str:
        task = messages[-1].content
        if seen is not None:
            seen.append(task)
        return json.dumps({"thought": "t", "action": "final", "answer": reply,
                           "confidence": 0.9})  # fmt: skip

    return AgentRunner(OfflineModelClient(overrides=model))


def member(name: str, runner: AgentRunner, role: str = "member", instructions: str = "") -> CrewMember:
    return CrewMember(AgentDefinition(name=name, instructions=instructions), runner, role=role)


async def test_a_sequential_crew_hands_each_member_the_work_so_far() -> None:
    seen: list[str] = []
    crew = Crew(
        [
            member("researcher", answering("three sources", seen)),
            member("writer", answering("a report", seen)),
        ],
        session_id="c-1",
    )

    result = await crew.run("Report on solar prices")

    assert result.pattern is CrewPattern.SEQUENTIAL
    assert result.outputs == {"researcher": "three sources", "writer": "a report"}
    assert result.final_output == "a report"
    assert seen[0] == "Report on solar prices"
    assert seen[1].startswith("Report on solar prices") and "[researcher]\nthree sources" in seen[1]
    assert [r.session_id for r in result.runs] == ["c-1.researcher", "c-1.writer"]
    assert (
        result.total_cost_usd == sum(r.total_cost_usd for r in result.runs) and result.duration_seconds >= 0
    )


async def test_a_parallel_crew_runs_every_member_on_the_same_task() -> None:
    seen: list[str] = []
    crew = Crew(
        [member("a", answering("from a", seen)), member("b", answering("from b", seen))],
        session_id="c-2",
        pattern=CrewPattern.PARALLEL,
    )

    result = await crew.run("Same task")

    assert seen == ["Same task", "Same task"]
    assert result.outputs == {"a": "from a", "b": "from b"}
    assert result.final_output == "a: from a\n\nb: from b"


async def test_a_hierarchical_crew_s_supervisor_delegates_to_named_workers_and_writes_the_answer() -> None:
    asked: list[str] = []

    def supervise(messages: Sequence[ChatMessage]) -> str:
        task = messages[-1].content
        asked.append(task)
        if task.startswith("You lead a crew"):
            plan = {"delegations": [{"worker": "finder", "task": "find the prices"},
                                    {"worker": "nobody", "task": "ignored"}]}  # fmt: skip
            return json.dumps(
                {"thought": "t", "action": "final", "answer": json.dumps(plan), "confidence": 0.9}
            )
        return json.dumps({"thought": "t", "action": "final", "answer": "the summary", "confidence": 0.9})

    found: list[str] = []
    idle: list[str] = []
    crew = Crew(
        [
            member("lead", AgentRunner(OfflineModelClient(overrides=supervise)), role="supervisor"),
            member("finder", answering("prices found", found), instructions="Finds prices."),
            member("idler", answering("unused", idle)),
        ],
        session_id="c-3",
        pattern=CrewPattern.HIERARCHICAL,
    )

    result = await crew.run("Summarise solar prices")

    assert "- finder (member): Finds prices." in asked[0] and "- idler (member)" in asked[0]
    assert found == ["find the prices"] and idle == [], "only the named worker runs, on its piece"
    assert "[finder]\nprices found" in asked[1]
    assert result.outputs == {"finder": "prices found", "lead": "the summary"}
    assert result.final_output == "the summary"
    assert result.runs[-1].session_id == "c-3.lead.synthesis"


async def test_a_supervisor_that_does_not_delegate_in_form_gives_every_worker_the_whole_task() -> None:
    workers_saw: list[str] = []
    crew = Crew(
        [
            member("lead", answering("just do it"), role="supervisor"),
            member("w1", answering("one", workers_saw)),
            member("w2", answering("two", workers_saw)),
        ],
        session_id="c-4",
        pattern=CrewPattern.HIERARCHICAL,
    )

    result = await crew.run("The whole task")

    assert workers_saw == ["The whole task", "The whole task"]
    assert set(result.outputs) == {"w1", "w2", "lead"}


async def test_a_member_that_fails_stops_the_crew_naming_it() -> None:
    def never_done(_: Sequence[ChatMessage]) -> str:
        return json.dumps({"thought": "t", "action": "tool", "tool": "missing", "arguments": {}})

    stuck = AgentRunner(OfflineModelClient(overrides=never_done), config=RunnerConfig(max_iterations=2))
    later: list[str] = []
    crew = Crew([member("stuck", stuck), member("after", answering("x", later))], session_id="c-5")

    with pytest.raises(CrewMemberFailed) as failed:
        await crew.run("Try")

    assert failed.value.code == "CREW_MEMBER_FAILED" and failed.value.details == {"member": "stuck"}
    assert "crew member stuck (member) failed: MAX_ITERATIONS_EXCEEDED" in failed.value.message
    assert later == [], "a sequential crew stops at the failed member"


async def test_a_failed_member_of_a_parallel_crew_cancels_the_others() -> None:
    def broken(_: Sequence[ChatMessage]) -> str:
        raise RuntimeError("model endpoint gone")

    crew = Crew(
        [
            member("ok", answering("fine")),
            member("broken", AgentRunner(OfflineModelClient(overrides=broken))),
        ],
        session_id="c-6",
        pattern=CrewPattern.PARALLEL,
    )

    with pytest.raises(CrewMemberFailed) as failed:
        await crew.run("Go")
    assert failed.value.details == {"member": "broken"}
    assert failed.value.message == "crew member broken (member) failed: RuntimeError: model endpoint gone"


def test_a_crew_is_checked_when_it_is_made() -> None:
    runner = answering("x")
    with pytest.raises(ValueError, match="at least one member"):
        Crew([], session_id="s")
    with pytest.raises(ValueError, match="distinct agent names"):
        Crew([member("a", runner), member("a", runner)], session_id="s")
    with pytest.raises(ValueError, match="exactly one member with role 'supervisor'"):
        Crew([member("a", runner), member("b", runner)], session_id="s", pattern=CrewPattern.HIERARCHICAL)
    with pytest.raises(ValueError, match="exactly one member with role 'supervisor'"):
        Crew([member("a", runner, role="supervisor")], session_id="s", pattern=CrewPattern.HIERARCHICAL)


async def test_a_task_over_the_bound_is_refused_before_any_member_runs() -> None:
    seen: list[str] = []
    crew = Crew([member("a", answering("x", seen))], session_id="s")
    with pytest.raises(InvalidArgument):
        await crew.run("x" * (MAX_TEXT_CHARS + 1))
    assert seen == []


class FakeMarket:
    """The market as a `MarketCrew` sees it: what was posted, and the board's record to show."""

    def __init__(self, ends_as: TaskRecord | None) -> None:
        self.posted: list[TaskSpec] = []
        self.ends_as = ends_as
        self.reads = 0

    async def post(self, spec: TaskSpec) -> None:
        self.posted.append(spec)

    async def task(self, task_id: str) -> TaskRecord | None:
        self.reads += 1
        if self.reads < 3 or self.ends_as is None:
            return None  # not on the board yet
        return self.ends_as.model_copy(update={"spec": self.posted[-1]})


def board_record(
    status: AllocationStatus, outcome: TaskOutcome | None, reason: str | None = None
) -> TaskRecord:
    spec = TaskSpec(task_id="t", description="d", required_skills=["arithmetic"])
    winner = "calculator" if outcome else None
    allocation = AllocationResult(task_id="t", status=status, winning_agent_id=winner, reject_reason=reason)
    return TaskRecord(spec=spec, status=status, allocation=allocation, outcome=outcome)


async def test_a_market_crew_posts_its_task_and_returns_the_winner_s_outcome() -> None:
    outcome = TaskOutcome(task_id="t", agent_id="calculator", actual_success=True, actual_cost_usd=0.002,
                          actual_steps=2, summary="5.0")  # fmt: skip
    market = FakeMarket(board_record(AllocationStatus.COMPLETED, outcome))
    crew = MarketCrew(
        [member("calculator", answering("x"))], session_id="mc-1", use_market=True, market=market
    )

    result = await crew.run_task_with_market("What is 2 + 3?", ["arithmetic"], budget_usd=0.05)

    [spec] = market.posted
    assert (spec.task_id, spec.description) == ("mc-1.market.1", "What is 2 + 3?")
    assert spec.required_skills == ["arithmetic"]
    assert spec.budget_usd == 0.05
    assert result.winner == "calculator" and result.succeeded and result.output == "5.0"


async def test_a_market_crew_raises_when_the_market_rejects_and_one_without_the_market_refuses() -> None:
    rejected = FakeMarket(board_record(AllocationStatus.REJECTED, None, "no capable agents"))
    crew = MarketCrew([member("a", answering("x"))], session_id="mc-2", use_market=True, market=rejected)
    with pytest.raises(MarketAllocationFailed, match="no capable agents") as refused:
        await crew.run_task_with_market("Anything", ["nothing"])
    assert refused.value.code == "MARKET_ALLOCATION_FAILED"

    plain = MarketCrew([member("a", answering("by hand"))], session_id="mc-3")
    assert (await plain.run("Task")).outputs == {"a": "by hand"}
    with pytest.raises(InvalidArgument, match="does not use the market"):
        await plain.run_task_with_market("Task", ["x"])
    with pytest.raises(ValueError, match="needs one"):
        MarketCrew([member("a", answering("x"))], session_id="mc-4", use_market=True)
