"""The reminders that keep an agent's work from being lost: one per run under way (`run:<task
id>`, carrying the award) and one per decision not yet applied (`decided:<escalation id>`,
carrying the decision), both firing every `RUN_WATCHDOG` until the agent is done with them."""

from __future__ import annotations

from datetime import timedelta

__all__ = [
    "DECISION_REMINDER_PREFIX",
    "RUN_REMINDER_PREFIX",
    "RUN_WATCHDOG",
    "decision_reminder",
    "run_reminder",
]

RUN_REMINDER_PREFIX = "run:"
DECISION_REMINDER_PREFIX = "decided:"
"""A person's decision on a parked task, kept as a reminder (carrying the decision) from before
its delivery is acknowledged until the agent applied it."""
RUN_WATCHDOG = timedelta(seconds=30)
"""How soon a run that did not start on delivery (the worker was busy) or was cut short by a
crash of the worker (or its sidecar) starts: a reminder kept by the Dapr scheduler fires this
long after the award came, and every period after, until the run's outcome is announced or
the task is parked. A run still going when it fires holds
the actor's turn, so the reminder waits for it and then finds the run over."""


def run_reminder(task_id: str) -> str:
    return RUN_REMINDER_PREFIX + task_id


def decision_reminder(escalation_id: str) -> str:
    return DECISION_REMINDER_PREFIX + escalation_id
