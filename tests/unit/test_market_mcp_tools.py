"""The console's MCP tools without a system: a key's person is who acts, a viewer's key is
refused before anything is sent, and a service's refusal reaches the client as its code and
message (an unreachable sidecar as UNAVAILABLE), never as a trace."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.fastmcp.exceptions import ToolError

from agora.console.api_keys import load_api_keys
from agora.console.auth import Person, Role
from agora.console.mcp_server import (
    DECIDE_SCOPE,
    READ_SCOPE,
    SCOPES_OF_ROLE,
    KeyVerifier,
    MarketTools,
    market_mcp,
)
from agora.core.acceptance import DisputeVerdict
from agora.core.errors import NotFound
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.runtime.sidecar import DaprError

TOKEN = "operator-token-of-the-console-for-tests"


@contextmanager
def acting_as(role: Role) -> Iterator[None]:
    """What the SDK's bearer middleware leaves for a request with alice's key."""
    token = AccessToken(token=TOKEN, client_id="alice", scopes=SCOPES_OF_ROLE[role])
    reset = auth_context_var.set(AuthenticatedUser(token))
    try:
        yield
    finally:
        auth_context_var.reset(reset)


class Escalations:
    def __init__(self, refusal: Exception | None = None) -> None:
        self.resumed: list[Any] = []
        self.refusal = refusal

    async def resume(self, escalation_id: str, request: Any) -> Any:
        if self.refusal is not None:
            raise self.refusal
        self.resumed.append((escalation_id, request))
        return {"escalation_id": escalation_id}


def tools(escalations: Escalations) -> MarketTools:
    return MarketTools(None, None, None, None, escalations)  # type: ignore[arg-type]


SKIP = EscalationResponse(action=EscalationAction.SKIP)


async def test_a_viewer_key_reads_and_a_decider_key_also_decides() -> None:
    verifier = KeyVerifier(load_api_keys(None, TOKEN, Person(name="victor", role=Role.VIEWER)))
    viewer = await verifier.verify_token(TOKEN)
    assert viewer is not None and viewer.scopes == [READ_SCOPE] and viewer.client_id == "victor"
    verifier = KeyVerifier(load_api_keys(None, TOKEN, Person(name="alice", role=Role.DECIDER)))
    decider = await verifier.verify_token(TOKEN)
    assert decider is not None and decider.scopes == [READ_SCOPE, DECIDE_SCOPE]
    assert await verifier.verify_token("another-token-nobody-was-given-here") is None


async def test_a_viewer_is_refused_before_anything_is_sent() -> None:
    escalations = Escalations()
    with acting_as(Role.VIEWER), pytest.raises(ToolError, match=r"^FORBIDDEN"):
        await tools(escalations).decide_escalation("esc-1", SKIP)
    assert escalations.resumed == []


async def test_a_decision_names_the_keys_person() -> None:
    escalations = Escalations()
    with acting_as(Role.DECIDER):
        await tools(escalations).decide_escalation("esc-1", SKIP, why="fine")
    ((escalation_id, request),) = escalations.resumed
    assert escalation_id == "esc-1" and request.who == "alice" and request.why == "fine"


@pytest.mark.parametrize(
    ("refusal", "said"),
    [
        (NotFound("no escalation esc-1"), "NOT_FOUND: no escalation esc-1"),
        (DaprError(500, "ERR_DIRECT_INVOKE", "connection refused"), "UNAVAILABLE"),
    ],
)
async def test_a_refusal_is_the_tools_error_by_code(refusal: Exception, said: str) -> None:
    server = market_mcp(tools(Escalations(refusal)), load_api_keys(None), "http://127.0.0.1:8080")
    with acting_as(Role.DECIDER), pytest.raises(ToolError) as raised:
        await server.call_tool(
            "decide_escalation", {"escalation_id": "esc-1", "decision": SKIP.model_dump(mode="json")}
        )
    assert said in str(raised.value), raised.value
    assert "Traceback" not in str(raised.value)


class Board:
    def __init__(self) -> None:
        self.disputed: list[Any] = []

    async def dispute(self, task_id: str, dispute: Any) -> Any:
        self.disputed.append((task_id, dispute))
        return {"task_id": task_id}


async def test_a_dispute_names_the_keys_person_and_a_viewer_s_is_refused_before_anything_is_sent() -> None:
    board = Board()
    tools = MarketTools(board, None, None, None, None)  # type: ignore[arg-type]
    with acting_as(Role.VIEWER), pytest.raises(ToolError, match=r"^FORBIDDEN"):
        await tools.dispute_task("t1", DisputeVerdict.FAILED, "the ledger shows 43")
    assert board.disputed == []
    with acting_as(Role.DECIDER):
        await tools.dispute_task("t1", DisputeVerdict.FAILED, "the ledger shows 43")
    [(task_id, dispute)] = board.disputed
    assert (task_id, dispute.disputed_by, dispute.verdict) == ("t1", "alice", DisputeVerdict.FAILED)
    assert dispute.reason == "the ledger shows 43"
