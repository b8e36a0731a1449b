"""Suspension from bidding: an agent that let an award lapse sits out for a while.

An award nobody acknowledges holds its task for the whole acknowledgment window before it
passes on. An agent whose runtime let one award lapse will most likely let the next one lapse
too (the runtime is gone, stuck, or was never there), so the registry keeps it out of
`filter_capable` for a backoff period: `FIRST_SUSPENSION_SECONDS` for the first lapse, twice
as long for each further one, at most `MAX_SUSPENSION_SECONDS`.

A further lapse is one of an award made after the previous suspension ended: the agent was
given another chance and let it lapse too. The awards it held when its runtime went away all
lapse one after another; they are one failure, counted once, whatever their number (counting
each would suspend for the maximum an agent whose runtime was away for seconds). Lapses are
counted together while they come within `LAPSES_FORGOTTEN_AFTER_SECONDS` of the end of the
previous suspension; after a longer good spell the count starts over.

A suspended agent stays registered and listed (with its suspension), and renewing its lease
does not lift the suspension: a runtime that renews but does not take awards is exactly the
case this guards against.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from agora.core.errors import AgoraError
from agora.core.limits import Identifier, Note

FIRST_SUSPENSION_SECONDS = 30
MAX_SUSPENSION_SECONDS = 15 * 60
LAPSES_FORGOTTEN_AFTER_SECONDS = 3600


class UnverifiedLapse(AgoraError):
    """A lapse notice the task board's record does not bear out (forged, or about an award that
    was acknowledged): the agent is not suspended."""

    code = "UNVERIFIED_LAPSE"
    http_status = 409


class Suspension(BaseModel):
    """Why and until when an agent is kept from bidding. Kept on its registration after it
    ends, so a lapse soon after counts as a further one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    until: datetime
    reason: Note
    lapses: int = Field(ge=1)
    """Lapses counted toward this suspension's length (1 for the first)."""
    task_id: Identifier
    """The task whose award lapsed last."""
    lapsed_at: datetime
    """When that award lapsed: a lapse no later than this one is already counted."""

    def in_effect(self, now: datetime) -> bool:
        return now < self.until


def suspension_seconds(lapses: int) -> int:
    """How long an agent is suspended after its `lapses`-th counted lapse."""
    if lapses < 1:
        raise ValueError("a suspension counts at least one lapse")
    doublings = min(lapses - 1, MAX_SUSPENSION_SECONDS.bit_length())  # no huge powers of two
    return min(FIRST_SUSPENSION_SECONDS << doublings, MAX_SUSPENSION_SECONDS)


def after_lapse(
    previous: Suspension | None, task_id: str, awarded_at: datetime, lapsed_at: datetime
) -> Suspension:
    """The agent's suspension once the award of `task_id`, made at `awarded_at`, lapsed at
    `lapsed_at`.

    An award made before the previous suspension ended changes nothing: it was held when that
    failure began (or is a redelivered notice, or one overtaken by a later lapse), and that
    failure is counted already."""
    if previous is not None and awarded_at < previous.until:
        return previous
    forgotten = timedelta(seconds=LAPSES_FORGOTTEN_AFTER_SECONDS)
    counts_on = previous is not None and lapsed_at - previous.until <= forgotten
    lapses = previous.lapses + 1 if previous is not None and counts_on else 1
    seconds = suspension_seconds(lapses)
    until = lapsed_at + timedelta(seconds=seconds)  # later than any previous end: awarded after it
    reason = (
        f"let the award of task {task_id} lapse unacknowledged "
        f"(lapse {lapses} in a row): suspended from bidding for {seconds} s"
    )
    return Suspension(until=until, reason=reason, lapses=lapses, task_id=task_id, lapsed_at=lapsed_at)
