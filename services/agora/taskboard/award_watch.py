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

    async def sweep_forever(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.sweep()
            except Exception as exc:  # the store away for a moment: the next sweep tries again
                log.warning("sweeping the award watch failed", extra={"reason": repr(exc)[:300]})

    async def sweep(self, now_ms: int | None = None) -> list[str]:
        """Hand every entry past its due time to its actor; the entries handed over."""
        now_ms = round(time.time() * 1000) if now_ms is None else now_ms
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


def _is_due(entry: str, now_ms: int) -> bool:
    try:
        due_ms, _ = parse_watch_entry(entry)
    except ValueError:
        return False
    return due_ms <= now_ms
