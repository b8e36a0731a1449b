"""The `Task` actor: one per task id, holding the task's spec, bids, status and outcome.

The actor runtime runs one call at a time per task, so lifecycle checks and writes never
interleave for a task; a status index (plain state keys) lets the board list tasks by status.
"""

from typing import Any, ClassVar

from dapr.actor import ActorInterface, actormethod
from pydantic import BaseModel

from agora.core import task_lifecycle as lifecycle
from agora.core.errors import NoStateFound
from agora.core.market import AllocationResult, AllocationStatus, Bid, TaskOutcome, TaskSpec
from agora.core.task_lifecycle import TaskRecord
from agora.runtime.actor import PydanticActor, actor_endpoint
from agora.runtime.status_index import StatusIndex

STATUS_INDEX_NAMESPACE = "taskboard:status"


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
    status_index: ClassVar[StatusIndex | None] = None
    """Set by the task board module at start-up."""

    def _record(self) -> TaskRecord:
        if self.state.record is None:
            raise NoStateFound(f"no task {self.id.id!r} on the board")
        return self.state.record

    async def _save(self, updated: TaskRecord) -> TaskRecord:
        previous = self.state.record.status if self.state.record else None
        if updated == self.state.record:
            # Nothing new, as when a call that failed after its commit is retried: redo the step
            # that follows a commit, so such a failure cannot leave the task out of its listing.
            await self._reindex(None, updated.status)
            return updated
        self.state.record = updated
        await self.commit()
        if previous != updated.status:
            await self._reindex(previous, updated.status)
        return updated

    async def _reindex(self, old: AllocationStatus | None, new: AllocationStatus) -> None:
        if Task.status_index is not None:
            await Task.status_index.move(self.id.id, str(old) if old else None, str(new))

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


ACTOR_TYPE = Task.__name__  # the Dapr actor type is the class name
