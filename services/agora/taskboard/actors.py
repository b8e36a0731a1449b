"""The `Task` actor: one per task id, holding the task's spec, bids, status and outcome.

The actor runtime runs one call at a time per task, so lifecycle checks and writes never
interleave for a task; a status index (plain state keys) lets the board list tasks by status.
"""

import zlib
from typing import Any, ClassVar

from dapr.actor import ActorInterface, actormethod
from pydantic import BaseModel

from agora.core import task_lifecycle as lifecycle
from agora.core.errors import NoStateFound
from agora.core.market import AllocationResult, AllocationStatus, Bid, TaskOutcome, TaskSpec
from agora.core.task_lifecycle import TaskRecord
from agora.runtime.actor import PydanticActor, actor_endpoint
from agora.runtime.state import StateRepository

STATUS_INDEX_NAMESPACE = "taskboard:status"
STATUS_INDEX_SHARDS = 16
"""Each status's task ids are spread over this many keys, so concurrent status changes
rarely contend for one etag and no single list grows with the whole board."""


def status_index_keys(status: AllocationStatus | str) -> list[str]:
    return [f"{status}:{shard:02d}" for shard in range(STATUS_INDEX_SHARDS)]


def status_index_key(status: AllocationStatus | str, task_id: str) -> str:
    return f"{status}:{zlib.crc32(task_id.encode()) % STATUS_INDEX_SHARDS:02d}"


class TaskIds(BaseModel):
    task_ids: list[str] = []


class TaskSlot(BaseModel):
    record: TaskRecord | None = None


class TaskActorInterface(ActorInterface):
    @actormethod(name="post_task")
    async def post_task(self, spec: dict[str, Any]) -> dict[str, Any]: ...

    @actormethod(name="get_task")
    async def get_task(self) -> dict[str, Any]: ...

    @actormethod(name="start_bidding")
    async def start_bidding(self) -> dict[str, Any]: ...

    @actormethod(name="submit_bid")
    async def submit_bid(self, bid: dict[str, Any]) -> dict[str, Any]: ...

    @actormethod(name="get_bids_for_task")
    async def get_bids_for_task(self) -> dict[str, Any]: ...

    @actormethod(name="record_allocation")
    async def record_allocation(self, result: dict[str, Any]) -> dict[str, Any]: ...

    @actormethod(name="mark_award_published")
    async def mark_award_published(self) -> dict[str, Any]: ...

    @actormethod(name="update_task_status")
    async def update_task_status(self, status: str) -> dict[str, Any]: ...

    @actormethod(name="mark_outcome")
    async def mark_outcome(self, outcome: dict[str, Any]) -> dict[str, Any]: ...


class Task(PydanticActor[TaskSlot], TaskActorInterface):
    state_model = TaskSlot
    status_index: ClassVar[StateRepository[TaskIds] | None] = None
    """Set by the task board module at start-up."""

    def _record(self) -> TaskRecord:
        if self.state.record is None:
            raise NoStateFound(f"no task {self.id.id!r} on the board")
        return self.state.record

    async def _save(self, updated: TaskRecord) -> TaskRecord:
        previous = self.state.record.status if self.state.record else None
        if updated == self.state.record:
            return updated
        self.state.record = updated
        await self.commit()
        if previous != updated.status:
            await self._reindex(previous, updated.status)
        return updated

    async def _reindex(self, old: AllocationStatus | None, new: AllocationStatus) -> None:
        index = Task.status_index
        if index is None:
            return
        task_id = self.id.id
        if old is not None:
            await index.update(status_index_key(old, task_id), lambda ids: _without(ids, task_id))
        await index.update(status_index_key(new, task_id), lambda ids: _with(ids, task_id))

    @actor_endpoint
    async def post_task(self, spec: dict[str, Any]) -> TaskRecord:
        return await self._save(lifecycle.post(self.state.record, TaskSpec.model_validate(spec)))

    @actor_endpoint
    async def get_task(self) -> TaskRecord:
        return self._record()

    @actor_endpoint
    async def start_bidding(self) -> TaskRecord:
        record = self._record()
        if record.status is AllocationStatus.BIDDING:
            return record  # resumed after an interruption
        return await self._save(lifecycle.move(record, AllocationStatus.BIDDING))

    @actor_endpoint
    async def submit_bid(self, bid: dict[str, Any]) -> TaskRecord:
        return await self._save(lifecycle.add_bid(self._record(), Bid.model_validate(bid)))

    @actor_endpoint
    async def get_bids_for_task(self) -> list[dict[str, Any]]:
        return [bid.model_dump(mode="json") for bid in self._record().bids]

    @actor_endpoint
    async def record_allocation(self, result: dict[str, Any]) -> TaskRecord:
        return await self._save(lifecycle.allocate(self._record(), AllocationResult.model_validate(result)))

    @actor_endpoint
    async def mark_award_published(self) -> TaskRecord:
        return await self._save(self._record().model_copy(update={"award_published": True}))

    @actor_endpoint
    async def update_task_status(self, status: str) -> TaskRecord:
        return await self._save(lifecycle.move(self._record(), AllocationStatus(status)))

    @actor_endpoint
    async def mark_outcome(self, outcome: dict[str, Any]) -> TaskRecord:
        return await self._save(lifecycle.record_outcome(self._record(), TaskOutcome.model_validate(outcome)))


def _with(ids: TaskIds | None, task_id: str) -> TaskIds:
    current = ids or TaskIds()
    return current if task_id in current.task_ids else TaskIds(task_ids=[*current.task_ids, task_id])


def _without(ids: TaskIds | None, task_id: str) -> TaskIds | None:
    if ids is None:
        return None
    return TaskIds(task_ids=[i for i in ids.task_ids if i != task_id])


ACTOR_TYPE = Task.__name__  # the Dapr actor type is the class name
