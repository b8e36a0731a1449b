"""Where outcomes live: the `OutcomeStore` protocol a service implements over a Dapr state
store, and `InMemoryOutcomeStore` for tests and embedded use."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from agora.core.outcomes.record import StepOutcome

__all__ = ["InMemoryOutcomeStore", "OutcomeStore"]


class OutcomeStore(Protocol):
    """Where outcomes live. A service implements it over a Dapr state store; this module only
    needs these three operations."""

    async def add(self, outcome: StepOutcome) -> None:
        """Store the outcome; an outcome with the same `outcome_id` is replaced."""
        ...

    async def all(self) -> list[StepOutcome]:
        """Every outcome, in the order they were first recorded."""
        ...

    async def recent(self, n: int) -> list[StepOutcome]:
        """The last `n` recorded outcomes, oldest first."""
        ...


class InMemoryOutcomeStore:
    """`OutcomeStore` in a dict, for tests and embedded use."""

    def __init__(self, outcomes: Iterable[StepOutcome] = ()) -> None:
        self._outcomes: dict[str, StepOutcome] = {}
        for outcome in outcomes:
            self._outcomes[outcome.outcome_id] = outcome

    async def add(self, outcome: StepOutcome) -> None:
        self._outcomes[outcome.outcome_id] = outcome

    async def all(self) -> list[StepOutcome]:
        return list(self._outcomes.values())

    async def recent(self, n: int) -> list[StepOutcome]:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n!r}")
        return list(self._outcomes.values())[-n:] if n else []
