"""The market as an MCP server: Agora's operations as MCP tools over streamable HTTP at
`/mcp`, for an assistant that runs the market and answers its escalations.

A request carries an API key (`Authorization: Bearer <key>`, `agora.console.api_keys`); the
key's person is who acts. A viewer's key reads (`agora:read`); a decider's also publishes
tasks, submits plans, asks debates and decides escalations (`agora:decide`). The tools call the
services as the console does, through its sidecar (a task goes to the market through the task
board, whose sidecar shares the market's broker in every profile), so the market sees the console's identity
and its policies, and each decision records the key's person as who made it.

The server is stateless (each request stands alone, answered as JSON): any console replica
answers any request, and nothing is kept between them.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, ParamSpec, TypeVar

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field

from agora.console.api_keys import ApiKeys
from agora.console.auth import Role
from agora.core.acceptance import DisputeVerdict
from agora.core.contracts import AgentList, EscalationList, ResumeRequest, TaskList, TaskPublished
from agora.core.debate.record import DebateAccepted, DebateRecord
from agora.core.debate.request import DebateId, DebateSubmission
from agora.core.errors import AgoraError
from agora.core.escalation.decisions import AnyResponse
from agora.core.escalation.record import EscalationRecord, EscalationStatus
from agora.core.limits import Identifier, Note
from agora.core.market import AllocationStatus, TaskSpec
from agora.core.messages import TaskCancel, TaskDispute
from agora.core.plans.record import PlanAccepted, PlanRecord
from agora.core.plans.request import PlanId, PlanSubmission
from agora.core.task_lifecycle import TaskRecord
from agora.runtime.clients import (
    DebateClient,
    EscalationClient,
    PlannerClient,
    RegistryClient,
    TaskBoardClient,
)
from agora.runtime.sidecar import DaprError, SidecarUnavailable

__all__ = [
    "DECIDE_SCOPE",
    "MCP_PATH",
    "READ_SCOPE",
    "SCOPES_OF_ROLE",
    "KeyVerifier",
    "MarketTools",
    "market_mcp",
]

MCP_PATH = "/mcp"
READ_SCOPE = "agora:read"
DECIDE_SCOPE = "agora:decide"
SCOPES_OF_ROLE = {Role.VIEWER: [READ_SCOPE], Role.DECIDER: [READ_SCOPE, DECIDE_SCOPE]}
MAX_LISTED = 100

P = ParamSpec("P")
R = TypeVar("R")


class KeyVerifier:
    """The MCP SDK's token check, answered from the console's API keys."""

    def __init__(self, keys: ApiKeys) -> None:
        self._keys = keys

    async def verify_token(self, token: str) -> AccessToken | None:
        person = self._keys.person_of(token)
        if person is None:
            return None
        return AccessToken(token=token, client_id=person.name, scopes=SCOPES_OF_ROLE[person.role])


def _acting_person(needs: str) -> str:
    """The name of the key's person, when their key holds `needs`; a ToolError otherwise."""
    token = get_access_token()
    if token is None:  # the auth middleware lets no request through without a key
        raise ToolError("UNAUTHENTICATED: no API key")
    if needs not in token.scopes:
        raise ToolError(f"FORBIDDEN: {token.client_id} is a viewer; this tool needs a decider's key")
    return token.client_id


def _answered(tool: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """A tool whose refusals reach the client as its error: a service's typed error by code and
    message, an unreachable sidecar or service as UNAVAILABLE (never a traceback)."""

    @functools.wraps(tool)
    async def answered(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await tool(*args, **kwargs)
        except AgoraError as exc:
            raise ToolError(f"{exc.code}: {exc.message}") from None
        except DaprError as exc:
            raise ToolError(
                f"UNAVAILABLE: the service did not answer ({exc.error_code or exc.status_code})"
            ) from None
        except (SidecarUnavailable, TimeoutError):
            raise ToolError("UNAVAILABLE: the console's sidecar did not answer") from None

    return answered


class MarketTools:
    """The tools, each one call to a service (or one publish) through the console's sidecar."""

    def __init__(
        self,
        board: TaskBoardClient,
        registry: RegistryClient,
        planner: PlannerClient,
        debates: DebateClient,
        escalations: EscalationClient,
    ) -> None:
        self._board = board
        self._registry = registry
        self._planner = planner
        self._debates = debates
        self._escalations = escalations

    async def publish_task(self, task: TaskSpec) -> TaskPublished:
        """Publish a task to the market: agents bid, the market awards it or rejects it. The same
        task (same id and content) published again is one task."""
        _acting_person(DECIDE_SCOPE)
        return await self._board.publish(task)

    async def show_task(self, task_id: Identifier) -> TaskRecord:
        """A task: its status and history, the market's decision with every bid and score, and
        its outcome once it ended."""
        _acting_person(READ_SCOPE)
        return await self._board.get(task_id)

    async def cancel_task(self, task_id: Identifier, why: Note = "") -> TaskRecord:
        """Cancel a task that has not ended, as the key's person: one not decided yet is
        rejected, one an agent runs is stopped and fails. An ended task is refused."""
        who = _acting_person(DECIDE_SCOPE)
        return await self._board.cancel(task_id, TaskCancel(cancelled_by=who, reason=why))

    async def dispute_task(
        self, task_id: Identifier, verdict: DisputeVerdict, why: Annotated[Note, Field(min_length=1)]
    ) -> TaskRecord:
        """Dispute a finished task's outcome within its dispute window, as the key's person:
        its verdict and end become `verdict` (passed or failed), the agent's record is corrected
        once, and the history says who and why. Once per task; a late or second one is refused."""
        who = _acting_person(DECIDE_SCOPE)
        return await self._board.dispute(task_id, TaskDispute(disputed_by=who, reason=why, verdict=verdict))

    async def list_tasks(self, status: AllocationStatus) -> TaskList:
        """The ids of the tasks in one status."""
        _acting_person(READ_SCOPE)
        return await self._board.listed(status)

    async def list_agents(self) -> AgentList:
        """The agents on the market: their skills, price and lease."""
        _acting_person(READ_SCOPE)
        return await self._registry.agents()

    async def submit_plan(self, plan_id: PlanId, plan: PlanSubmission) -> PlanAccepted:
        """Have the planner split a task into subgoals and carry them out on the market. The
        same plan id with the same submission starts nothing new."""
        _acting_person(DECIDE_SCOPE)
        return await self._planner.submit(plan_id, plan)

    async def show_plan(self, plan_id: PlanId) -> PlanRecord:
        """A plan: its state, its subgoals and their tasks, its answer once it ended."""
        _acting_person(READ_SCOPE)
        return await self._planner.get(plan_id)

    async def ask_debate(self, debate_id: DebateId, debate: DebateSubmission) -> DebateAccepted:
        """Have debaters answer a question over rounds and agree on an answer. The same debate
        id with the same submission starts nothing new."""
        _acting_person(DECIDE_SCOPE)
        return await self._debates.ask(debate_id, debate)

    async def show_debate(self, debate_id: DebateId) -> DebateRecord:
        """A debate: its rounds, answers and the answer agreed on."""
        _acting_person(READ_SCOPE)
        return await self._debates.get(debate_id)

    async def list_escalations(
        self,
        status: EscalationStatus | None = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LISTED)] = 20,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> EscalationList:
        """The escalations waiting for a person (or in another status), the newest first."""
        _acting_person(READ_SCOPE)
        return await self._escalations.listed(status, limit, offset)

    async def show_escalation(self, escalation_id: Identifier) -> EscalationRecord:
        """One escalation: what is asked, its context, the choices, and its decision once made."""
        _acting_person(READ_SCOPE)
        return await self._escalations.get(escalation_id)

    async def decide_escalation(
        self,
        escalation_id: Identifier,
        decision: AnyResponse,
        why: Note = "",
        context_digest: Annotated[str | None, Field(max_length=64)] = None,
    ) -> EscalationRecord:
        """Decide an escalation (approve, reject, modify the prompt, reassign...), as the key's
        person. With `context_digest` (from `show_escalation`), it applies only if the
        escalation still shows what was seen."""
        who = _acting_person(DECIDE_SCOPE)
        request = ResumeRequest(decision=decision, who=who, why=why, context_digest=context_digest)
        return await self._escalations.resume(escalation_id, request)

    def tools(self) -> list[Callable[..., Awaitable[object]]]:
        return [
            self.publish_task,
            self.show_task,
            self.cancel_task,
            self.dispute_task,
            self.list_tasks,
            self.list_agents,
            self.submit_plan,
            self.show_plan,
            self.ask_debate,
            self.show_debate,
            self.list_escalations,
            self.show_escalation,
            self.decide_escalation,
        ]


def market_mcp(tools: MarketTools, keys: ApiKeys, public_url: str) -> FastMCP:
    """The MCP server with the market's tools, its keys checked by the SDK's bearer middleware."""
    server = FastMCP(
        "agora",
        instructions="Agora's market of agents: publish tasks, plans and debates, read them, and "
        "decide the escalations waiting for a person.",
        token_verifier=KeyVerifier(keys),
        auth=AuthSettings(
            # Keys are issued by the console itself (`python -m agora.console.api_keys`).
            issuer_url=public_url,  # type: ignore[arg-type]  # pydantic parses the URL
            resource_server_url=None,
            required_scopes=[READ_SCOPE],
        ),
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        # Every request needs a key a browser page cannot add to a request of another origin,
        # so a rebound host name gains nothing; the console is reached by many names
        # (Service, ingress) that a host allow-list would have to repeat.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    for tool in tools.tools():
        server.add_tool(_answered(tool), structured_output=True)
    return server
