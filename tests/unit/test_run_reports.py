"""A run's outcome on the board: a second end of the same award (the run ending itself at its
deadline while the workflow's timer ends it too) is taken as the end the board holds, not dead-
lettered; an outcome the board refuses for another reason goes to the dead-letter topic."""

from __future__ import annotations

from typing import Any, cast

from agora.core.errors import InvalidOutcome
from agora.core.market import TaskOutcome, TaskSpec
from agora.core.task_lifecycle import TaskRecord
from agora.sdk._app_activities import RunActivities
from agora.sdk._app_deadlines import RunDeadlines
from agora.sdk._app_run import AgentRunReport
from agora.sdk._runner import AgentStateStore

SPEC = TaskSpec(task_id="t-1", description="Wait for the tide", required_skills=["patience"])


def outcome(token: str, steps: int) -> TaskOutcome:
    return TaskOutcome(
        task_id="t-1", agent_id="dawdler", actual_success=False, actual_cost_usd=0.0, actual_steps=steps,
        summary="DEADLINE_EXCEEDED: stopped", award_token=token,
    )  # fmt: skip


class Board:
    """A task that holds `held` already: every other outcome is refused, as the board does."""

    def __init__(self, held: TaskOutcome) -> None:
        self.held = held

    async def mark_outcome(self, given: TaskOutcome) -> None:
        raise InvalidOutcome("task t-1 already has an outcome")

    async def get_task(self) -> TaskRecord:
        return TaskRecord(spec=SPEC, outcome=self.held)


class Letters:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def dead_letter(self, letter: Any) -> None:
        self.sent.append(letter)


def activities(board: Board, letters: Letters) -> RunActivities:
    return RunActivities(
        {},
        cast(AgentStateStore, None),
        None,
        None,
        cast(RunDeadlines, None),
        lambda task_id: cast(Any, board),
        cast(Any, letters),
        app_id="agents",
        dapr_http_endpoint="http://127.0.0.1:1",
        max_runs_in_flight=1,
    )


async def test_a_second_end_of_the_same_award_is_the_end_on_the_board_and_no_dead_letter() -> None:
    letters = Letters()
    runs = activities(Board(held=outcome("award-0000000000001", steps=7)), letters)
    await runs.report(AgentRunReport(outcome=outcome("award-0000000000001", steps=0)))
    assert letters.sent == []


async def test_an_outcome_of_another_award_the_board_refuses_is_dead_lettered_with_the_reason() -> None:
    letters = Letters()
    runs = activities(Board(held=outcome("award-0000000000001", steps=7)), letters)
    await runs.report(AgentRunReport(outcome=outcome("award-0000000000002", steps=0)))
    [letter] = letters.sent
    assert (
        letter.reason
        == "the task board refused the outcome: INVALID_OUTCOME: task t-1 already has an outcome"
    )
