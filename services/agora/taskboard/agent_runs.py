"""The `AgentRuns` actor: one per agent id, its book of runs in flight and of the tasks waiting
for one of its run slots (`agora.core.capacity.AgentRunsState`).

`Task` actors claim a slot before they commit an award and release it when the turn ends; the
actor answers every call with the book as it stands (`RunsView`). It calls no other actor, so a
`Task` actor waiting on it in its own turn can never be waited on in return.
"""

from __future__ import annotations

from datetime import UTC, datetime

from agora.core.capacity import AgentRunsState, RunClaim, RunRelease, RunsView, WaitersForgotten
from agora.runtime.actor_host import PydanticActor, actor_endpoint
from agora.runtime.interfaces import AgentRunsInterface


class AgentRuns(PydanticActor[AgentRunsState, None], AgentRunsInterface):
    state_model = AgentRunsState

    @actor_endpoint
    async def claim(self, claim: RunClaim) -> RunsView:
        granted, changed = self.state.claim(claim, datetime.now(UTC))
        if changed:
            await self.commit()
        return self.state.view(self.id.id, granted)

    @actor_endpoint
    async def release(self, release: RunRelease) -> RunsView:
        if self.state.release(release):
            await self.commit()
        return self.state.view(self.id.id)

    @actor_endpoint
    async def forget_waiters(self, forgotten: WaitersForgotten) -> RunsView:
        if self.state.forget(set(forgotten.task_ids)):
            await self.commit()
        return self.state.view(self.id.id)

    @actor_endpoint
    async def view(self) -> RunsView:
        return self.state.view(self.id.id)


ACTOR_TYPE = AgentRuns.__name__
