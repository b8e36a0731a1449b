"""The `WorkerAgent` actor's escalation ladder and learning, on the SDK's mock actor runtime
with a scripted model (no sidecar, no network)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

import pytest
from pydantic import BaseModel

from agora.core.contracts import AgentLearning
from agora.core.escalation.ladder import EscalationConfig
from agora.core.market import Bid, TaskOutcome, TaskSpec
from agora.core.messages import EscalationResolved, TaskAwarded
from agora.core.models import CapabilityProfile
from agora.core.outcomes.prompts import PROMPT_HEADING
from agora.core.outcomes.record import OutcomeStatus
from agora.llm import ChatMessage
from agora.runtime.pubsub import Publisher
from agora.runtime.sidecar import DaprSidecar
from agora.worker.actors import WorkerAgent, WorkerDeps
from agora.worker.reminders import RUN_WATCHDOG, decision_reminder, run_reminder
from agora.worker.runs import ParkedTask
from tests.unit.helpers import FakeModel, answer_of, hosted


class ScriptedModel(FakeModel):
    """Answers each step as scripted: `finish` with the next success flag; analyses on request."""

    def __init__(self, successes: Sequence[bool]) -> None:
        super().__init__()
        self._successes = list(successes)
        self.analyses = 0

    def answer(self, messages: Sequence[ChatMessage], json_schema: dict[str, Any] | None) -> str:
        if (json_schema or {}).get("title") == "FailureAnalysis":
            self.analyses += 1
            return json.dumps({"cause": "the search hit a paywall", "next_approach": "use the preprint"})
        succeeded = self._successes.pop(0) if self._successes else True
        return json.dumps(
            {
                "thought": "searching the archive",
                "action": "finish",
                "observation": "found it" if succeeded else "the search returned nothing",
                "succeeded": succeeded,
                "confidence": 0.9,
            }
        )


class RecordingPublisher:
    def __init__(self) -> None:
        self.sent: list[BaseModel] = []

    async def publish(self, topic: str, payload: BaseModel, *, message_id: str | None = None) -> str:
        self.sent.append(payload)
        return message_id or ""


PROFILE = CapabilityProfile.model_validate(
    {"agent_id": "a1", "agent_name": "Ada", "skill_tags": ["web_search"], "max_steps": 4}
)


def award(task_id: str) -> TaskAwarded:
    spec = TaskSpec.model_validate(
        {
            "task_id": task_id,
            "description": "Find the paper on agent markets",
            "required_skills": ["web_search"],
        }
    )
    bid = Bid(task_id=task_id, agent_id="a1", self_reported_success_prob=0.8, estimated_cost_usd=0.1,
              estimated_steps=1)  # fmt: skip
    return TaskAwarded.model_validate(
        {"task_id": task_id, "agent_id": "a1", "spec": spec, "bid": bid,
         "score": {"bid_id": bid.bid_id, "agent_id": "a1", "raw_success_prob": 0.8,
                   "calibrated_success_prob": 0.8, "reputation_score": 0.5, "cost_score": 0.5,
                   "composite": 0.6, "ucb_bonus": 0.0, "final_score": 0.6},
         "award_token": "award-token-0123456789"}
    )  # fmt: skip


def agent(model: ScriptedModel, ladder: EscalationConfig) -> WorkerAgent:
    deps = WorkerDeps(
        profiles={"a1": PROFILE},
        model=model,
        publisher=cast(Publisher, RecordingPublisher()),
        sidecar=cast(DaprSidecar, None),  # nothing here parks a task
        triage_failures=True,
        triage_repeat_limit=100,
        escalation=ladder,
    )
    return hosted(WorkerAgent, "a1", deps)


def outcome_of(answer: object) -> TaskOutcome:
    outcome = answer_of(answer).result
    assert isinstance(outcome, TaskOutcome), answer
    return outcome


async def test_failed_attempts_climb_the_ladder_retry_analysis_notice_then_abort() -> None:
    ladder = EscalationConfig(retry_limit=2, agent_analysis_attempts=1, notify_attempts=1, max_attempts=4)
    model = ScriptedModel([False, False, False, False])
    worker = agent(model, ladder)
    await worker._on_activate()

    done = outcome_of(await worker.execute(award("t1")))

    assert not done.actual_success
    assert done.summary.startswith("aborted after 4 failed attempts")
    assert model.analyses == 1  # attempt 2 was analysed before attempt 3
    last_prompt = " ".join(m.content for m in model.asked[-1])
    assert "Your analysis: the search hit a paywall Next approach: use the preprint" in last_prompt
    [learnt] = worker.state.learning
    assert learnt.final_status is OutcomeStatus.ABORTED and learnt.retry_count == 4
    assert learnt.validation_pass_rate is None and learnt.completion_mode_used is None


async def test_a_failure_the_next_attempt_fixes_ends_the_ladder() -> None:
    ladder = EscalationConfig(retry_limit=3)
    worker = agent(ScriptedModel([False, True]), ladder)
    await worker._on_activate()
    done = outcome_of(await worker.execute(award("t1")))
    assert done.actual_success
    [learnt] = worker.state.learning
    assert learnt.retry_count == 1 and not learnt.success_without_retry


async def test_an_agent_learns_from_its_runs_and_tracks_what_the_lessons_did() -> None:
    ladder = EscalationConfig(retry_limit=3)
    # Six runs that each fail once before succeeding: a recurring failure, a pattern.
    model = ScriptedModel([False, True] * 6 + [True])
    worker = agent(model, ladder)
    await worker._on_activate()
    for i in range(6):
        await worker.execute(award(f"t{i}"))
    assert all(PROMPT_HEADING not in m.content for p in model.asked[:10] for m in p)

    outcome_of(await worker.execute(award("t6")))
    system = model.asked[-1][0].content
    assert PROMPT_HEADING in system  # the lesson went into the new task's prompt
    applied = worker.state.learning[-1].patterns_applied
    assert applied and all(p in system for p in applied)
    assert worker.state.learning[-1].success_without_retry

    report = answer_of(await worker.learning()).result
    assert isinstance(report, AgentLearning) and report.outcomes == 7
    assert report.patterns
    # Applied from the sixth run on (five runs are the least a pattern is drawn from): the sixth
    # still failed once, the seventh did not; none of the five runs before had it.
    [effect] = [e for e in report.effectiveness if e.applied_count]
    assert (effect.applied_count, effect.applied_successes) == (2, 1)
    assert (effect.baseline_count, effect.baseline_successes) == (5, 0)
    assert effect.lift == 0.5


async def test_a_redelivered_award_is_not_run_again_but_its_outcome_is_announced_again() -> None:
    model = ScriptedModel([True])
    worker = agent(model, EscalationConfig())
    await worker._on_activate()
    first = outcome_of(await worker.execute(award("t1")))
    calls = len(model.asked)
    again = outcome_of(await worker.execute(award("t1")))
    assert again == first and len(model.asked) == calls
    assert len(worker.state.learning) == 1
    publisher = cast(RecordingPublisher, worker.deps.publisher)
    assert publisher.sent == [first, first]


def reminders(worker: WorkerAgent) -> set[str]:
    return set(worker._state_manager._mock_reminders)  # type: ignore[attr-defined]


async def watched(worker: WorkerAgent, task: TaskAwarded) -> None:
    """What the worker does before it acknowledges an award: the run's reminder, carrying it."""
    await worker.register_reminder(
        run_reminder(task.task_id), task.model_dump_json().encode(), RUN_WATCHDOG, RUN_WATCHDOG
    )


async def test_a_run_removes_its_reminder_once_its_outcome_is_out() -> None:
    worker = agent(ScriptedModel([True]), EscalationConfig())
    await worker._on_activate()
    await watched(worker, award("t1"))
    outcome_of(await worker.execute(award("t1")))
    assert reminders(worker) == set()


async def test_a_run_cut_short_by_a_crash_is_started_again_by_its_reminder() -> None:
    """The worker died after it registered the run's reminder: the reminder runs the award."""
    model = ScriptedModel([True])
    worker = agent(model, EscalationConfig())
    await worker._on_activate()
    task = award("t1")
    await watched(worker, task)

    await worker.receive_reminder("run:t1", task.model_dump_json().encode(), RUN_WATCHDOG, RUN_WATCHDOG)

    publisher = cast(RecordingPublisher, worker.deps.publisher)
    [outcome] = publisher.sent
    assert isinstance(outcome, TaskOutcome) and outcome.task_id == "t1" and outcome.actual_success
    assert reminders(worker) == set()
    # A late firing of the same reminder runs nothing (it announces the outcome again).
    calls = len(model.asked)
    await worker.receive_reminder("run:t1", task.model_dump_json().encode(), RUN_WATCHDOG, RUN_WATCHDOG)
    assert len(model.asked) == calls and publisher.sent == [outcome, outcome]


async def test_an_outcome_committed_but_not_announced_is_announced_by_the_reminder() -> None:
    worker = agent(ScriptedModel([True]), EscalationConfig())
    await worker._on_activate()
    task = award("t1")
    done = outcome_of(await worker.execute(task))
    publisher = cast(RecordingPublisher, worker.deps.publisher)
    publisher.sent.clear()  # as if the worker died between its commit and the publish
    await worker.receive_reminder("run:t1", task.model_dump_json().encode(), RUN_WATCHDOG, RUN_WATCHDOG)
    assert publisher.sent == [done]


def parked(worker: WorkerAgent, task: TaskAwarded, escalation_id: str) -> EscalationResolved:
    """`task` parked for a person under `escalation_id`; the person's decision: skip."""
    worker.state.parked[task.task_id] = ParkedTask(
        award=task, transcript=[], steps=1, escalation_id=escalation_id
    )
    return EscalationResolved.model_validate(
        {"escalation_id": escalation_id, "waiting_party": {"kind": "session", "id": task.task_id},
         "decision": {"kind": "escalation", "action": "skip"}, "decided_by": "ops@example.com",
         "status": "RESOLVED"}
    )  # fmt: skip


async def held(worker: WorkerAgent, resolved: EscalationResolved) -> bytes:
    """What the worker does before it acknowledges a decision: its reminder, carrying it."""
    state = resolved.model_dump_json().encode()
    await worker.register_reminder(
        decision_reminder(resolved.escalation_id), state, RUN_WATCHDOG, RUN_WATCHDOG
    )
    return state


async def test_a_decision_whose_resume_never_came_is_applied_by_its_reminder() -> None:
    worker = agent(ScriptedModel([]), EscalationConfig())
    await worker._on_activate()
    resolved = parked(worker, award("t1"), "t1.1")
    state = await held(worker, resolved)

    await worker.receive_reminder(decision_reminder("t1.1"), state, RUN_WATCHDOG, RUN_WATCHDOG)

    publisher = cast(RecordingPublisher, worker.deps.publisher)
    [outcome] = publisher.sent
    assert (
        isinstance(outcome, TaskOutcome) and outcome.partial and outcome.summary == "skip by ops@example.com"
    )
    assert worker.state.parked == {} and reminders(worker) == set()
    # The resume call that comes late (or the reminder again) changes nothing.
    assert answer_of(await worker.resume(resolved)).result is None
    assert publisher.sent == [outcome] and reminders(worker) == set()


async def test_a_resume_cut_short_once_the_task_left_parked_leaves_it_to_its_run_reminder() -> None:
    worker = agent(ScriptedModel([]), EscalationConfig())
    await worker._on_activate()
    resolved = parked(worker, award("t1"), "t1.1")
    await held(worker, resolved)
    held_at_commit: list[set[str]] = []

    async def crash_at_commit(ttl_seconds: int | None = None) -> None:
        held_at_commit.append(reminders(worker))
        raise RuntimeError("the worker died here")

    worker.commit = crash_at_commit  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        await worker.resume(resolved)
    # Whichever side of its commit it died on, a reminder brings the task back.
    assert held_at_commit == [{run_reminder("t1"), decision_reminder("t1.1")}]
