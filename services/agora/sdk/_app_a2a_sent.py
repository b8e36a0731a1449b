"""What an agent app sent its A2A agents, in the state store (`A2AAgent.sent`): a run taken up
again on any replica, after its app was lost, finds there whether the agent may have its
message already, and which task of the agent's it is."""

from __future__ import annotations

from agora.runtime.state import StateRepository
from agora.sdk._a2a import A2ASent

__all__ = ["SENT_NAMESPACE", "StoredSentMessages"]

SENT_NAMESPACE = "a2a:sent"


class StoredSentMessages:
    """Each message by its id (the award's task and attempt are in it), kept for the app's
    retention: past any run of the award."""

    def __init__(self, repository: StateRepository[A2ASent], retention_seconds: int) -> None:
        self._repository = repository
        self._retention_seconds = retention_seconds

    async def sent(self, message_id: str) -> A2ASent | None:
        kept = await self._repository.get(message_id)
        return kept.value if kept is not None else None

    async def keep(self, sent: A2ASent) -> None:
        await self._repository.save(sent.message_id, sent, ttl_seconds=self._retention_seconds)
