"""The watch on unacknowledged awards: a listing of every award whose acknowledgment has not
come, swept by the task board's replicas.

An award waits for its acknowledgment for a window (`AGORA_AWARD_ACK_SECONDS`, or the task's
shorter deadline). A Dapr reminder per award kept that wait durably, but it cost two scheduler
operations on every task (armed with the decision, dropped with the acknowledgment) while almost
every award is acknowledged within milliseconds. Instead, the `Task` actor lists its award under
the status index's pseudo-status `awaiting-acknowledgment` as `<due epoch ms>|<task id>` once the
award is committed, in the same index write as the task's status and before the award is
announced, and takes the entry out once the acknowledgment is committed. A failure between the
commit and that write is redone when the decision is asked for again (the broker redelivers the
task until its decision is acknowledged). Entries are group-committed with the index's other
moves, so a burst of awards costs a few writes, not one per award.

Every replica of the task board sweeps the listing every `AGORA_AWARD_SWEEP_SECONDS` (1 s): each
entry past its due time is handed to its `Task` actor (`award_window_due`), which does what the
reminder did (announce an award whose publish failed; pass an unacknowledged award to the
next-best bid, or fail the task) when the entry names its current unacknowledged award, and
drops the entry otherwise. The listing is in the state store, so an award decided just before a
crash is still watched after it; two replicas handing over the same entry are serialized by the
actor, and the second finds nothing to do. A window therefore ends up to one sweep late.

A window that ran out while the board could not read its own store (its sweeps failing) ran out
while no acknowledgment could reach the board either: the agent's runtime acknowledges through
the same store. So once its sweeps succeed again, a replica waits one whole window
(`grace_s`, the board's acknowledgment window) before it hands over an entry that came due
during or after its outage, so that runtimes whose acknowledgments failed meanwhile, and are
retried by their broker's redelivery, are heard first. Entries due before the outage began are
handed over as always.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime

from agora.core.errors import NotFound
from agora.core.messages import AwardWindowDue
from agora.runtime.interfaces import TaskInterface
from agora.runtime.status_index import StatusIndex

log = logging.getLogger(__name__)

AWARD_WATCH = "awaiting-acknowledgment"
"""The status index's pseudo-status listing unacknowledged awards (task statuses are upper case)."""
DEFAULT_SWEEP_SECONDS = 1.0
HANDED_OVER_AT_ONCE = 16
"""Due entries handed to their actors at once by one sweep."""


def watch_entry(task_id: str, due: datetime) -> str:
    """An award's entry in the watch: its due time in epoch milliseconds (13 digits, so entries
    sort by it), then the task id."""
    return f"{round(due.timestamp() * 1000):013d}|{task_id}"


def parse_watch_entry(entry: str) -> tuple[int, str]:
    """(due epoch ms, task id) of a watch entry."""
    due, _, task_id = entry.partition("|")
    return int(due), task_id


class AwardWatch:
    """Sweeps the watch: entries past their due time go to their `Task` actors."""

    def __init__(self, index: StatusIndex, tasks: Callable[[str], TaskInterface]) -> None:
        self._index = index
        self._tasks = tasks
        self._handing_over: set[str] = set()
        """Entries whose actor call is still under way (a slow call is not repeated meanwhile)."""

    async def sweep_forever(self, interval_s: float, grace_s: float = 0.0) -> None:
        outage = Outage(grace_s)
        while True:
            await asyncio.sleep(interval_s)
            now_ms = _now_ms()
            try:
                await self.sweep(outage.cutoff_ms(now_ms))
            except Exception as exc:  # the store away for a moment: the next sweep tries again
                outage.failed(now_ms)
                log.warning("sweeping the award watch failed", extra={"reason": repr(exc)[:300]})
            else:
                outage.succeeded(now_ms)

    async def sweep(self, now_ms: int | None = None) -> list[str]:
        """Hand every entry due by `now_ms` (default: now) to its actor; the entries handed over."""
        now_ms = _now_ms() if now_ms is None else now_ms
        due = [
            entry
            for entry in await self._index.list(AWARD_WATCH)
            if entry not in self._handing_over and _is_due(entry, now_ms)
        ]
        slots = asyncio.Semaphore(HANDED_OVER_AT_ONCE)

        async def hand_over(entry: str) -> None:
            async with slots:
                self._handing_over.add(entry)
                try:
                    await self._hand_over(entry)
                finally:
                    self._handing_over.discard(entry)

        await asyncio.gather(*(hand_over(entry) for entry in due))
        return due

    async def _hand_over(self, entry: str) -> None:
        _, task_id = parse_watch_entry(entry)
        try:
            await self._tasks(task_id).award_window_due(AwardWindowDue(watch_entry=entry))
        except NotFound:
            await self._index.discard(entry, AWARD_WATCH)  # the task is gone: nothing to watch
        except Exception as exc:
            log.warning(
                "an award's window could not be closed; the next sweep tries again",
                extra={"task_id": task_id, "reason": repr(exc)[:300]},
            )


class Outage:
    """A replica's account of its sweeps: since when they fail, and until when, after they
    succeed again, entries that came due since the outage began wait (see the module)."""

    def __init__(self, grace_s: float) -> None:
        self.grace_ms = round(grace_s * 1000)
        self.began_ms: int | None = None
        """When the sweeps began to fail (None: they succeed)."""
        self.ended_ms: int | None = None
        """When they succeeded again after the last outage."""

    def failed(self, now_ms: int) -> None:
        # A failure within the grace of the last outage continues it: its entries wait still.
        if self.began_ms is None:
            self.began_ms = now_ms
        self.ended_ms = None

    def succeeded(self, now_ms: int) -> None:
        if self.began_ms is not None and self.ended_ms is None:
            self.ended_ms = now_ms
            log.warning(
                "the award watch reads its store again; awards due since it could not wait a window",
                extra={"outage_s": (now_ms - self.began_ms) / 1000, "grace_s": self.grace_ms / 1000},
            )

    def cutoff_ms(self, now_ms: int) -> int:
        """Entries due by this instant are handed over."""
        if self.began_ms is None:
            return now_ms
        if self.ended_ms is not None and now_ms >= self.ended_ms + self.grace_ms:
            self.began_ms = self.ended_ms = None
            return now_ms
        return min(now_ms, self.began_ms)


def _now_ms() -> int:
    return round(time.time() * 1000)


def _is_due(entry: str, now_ms: int) -> bool:
    try:
        due_ms, _ = parse_watch_entry(entry)
    except ValueError:
        return False
    return due_ms <= now_ms
