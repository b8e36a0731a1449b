"""The bodies services exchange over HTTP and actor calls, defined once for both sides.

Topic payloads live in `agora.core.messages`; the domain records they carry (`TaskRecord`,
`EscalationRecord`, `CapabilityProfile`, ...) beside their rules. Everything here is what one
service sends another or answers it: the receiving side validates into the same type the
calling side built, and `agora.runtime.clients` gives callers typed methods over them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from agora.core.acceptance import Verdict
from agora.core.escalation.checkpoints import CheckpointTrigger, CheckpointVerdict
from agora.core.escalation.decisions import AnyResponse, CheckpointAction, EscalationAction
from agora.core.escalation.digest import DIGEST_PATTERN
from agora.core.escalation.record import AbortSummary, EscalationRecord, EscalationStatus, PartialProgress
from agora.core.limits import (
    MAX_CANDIDATES,
    MAX_ID_CHARS,
    MAX_ITEMS,
    MAX_PAGE_SIZE,
    Identifier,
    IdRef,
    Name,
    NameRef,
    Note,
    Text,
)
from agora.core.market import AllocationStatus, Bid, Probability, TaskOutcome, TaskSpec
from agora.core.models import CapabilityProfile
from agora.core.outcomes.effectiveness import PatternEffectiveness
from agora.core.uncertainty.belief import SessionBelief, StepUncertainty
from agora.core.uncertainty.policy import UncertaintyAction, UncertaintyLevel
from agora.core.uncertainty.propagation import StepType

# -- registry ------------------------------------------------------------------------------------


class RegisteredAgent(CapabilityProfile):
    """`GET /v1/agents/{id}` (and each agent of `GET /v1/agents`, the answer of
    `POST /v1/agents`): the profile as registered, when its lease runs out, and, while the
    agent is suspended from bidding, until when and why."""

    lease_expires_at: datetime | None = None
    """When the registration lapses unless renewed (None only for a registration stored before
    every registration had a lease)."""
    suspended_until: datetime | None = None
    """Set while the agent is suspended: it is listed, but no filter offers it for tasks."""
    suspension_reason: Note | None = None


class AgentList(BaseModel):
    """`GET /v1/agents`: every registered agent, by id, suspended ones too."""

    agents: list[RegisteredAgent]
    """Not paged: as many as are registered."""


class FilterAnswer(BaseModel):
    """`POST /v1/agents/filter`: the capable agents, best first."""

    agents: list[CapabilityProfile] = Field(max_length=MAX_CANDIDATES)
    filtered_out: list[Identifier] = Field(default_factory=list, max_length=MAX_ITEMS)
    """Ids of registered agents not kept (at most 100; all of them when fewer)."""
    filtered_out_count: int = 0


class Deregistered(BaseModel):
    """`DELETE /v1/agents/{id}`: whether the agent was registered until this call."""

    deregistered: bool


# -- task board ----------------------------------------------------------------------------------


class TaskList(BaseModel):
    """`GET /v1/tasks?status=...`: the ids of the tasks in one status."""

    status: AllocationStatus
    task_ids: list[Identifier]
    """Not paged: every task the board holds in that status."""


class TaskPublished(BaseModel):
    """The console's MCP tool `publish_task`: the task went to the market's topic (its decision
    follows; `show_task` reads it)."""

    task_id: Identifier
    event_id: str = Field(max_length=MAX_ID_CHARS, description="The CloudEvent id it was published as.")


# -- A2A agents joined through a running agent app ---------------------------------------------------

MAX_JOINED_A2A_AGENTS = 100
"""A2A agents one agent app takes on through its API (`PUT /v1/a2a-agents/{agent_id}`)."""
MAX_CARD_URL_CHARS = 2048


class A2AAgentJoin(BaseModel):
    """`PUT /v1/a2a-agents/{agent_id}` on an agent app (`agora a2a join`): put the A2A agent whose
    Agent Card is at `card_url` on the market as `agent_id`, reached through the app's sidecar;
    the price and step count override the card's terms."""

    model_config = ConfigDict(extra="forbid")

    card_url: str = Field(min_length=1, max_length=MAX_CARD_URL_CHARS)
    price_per_step_usd: float | None = Field(default=None, ge=0.0, le=1_000.0)
    max_steps: int | None = Field(default=None, ge=1, le=10_000)


class A2AAgentJoined(A2AAgentJoin):
    """An A2A agent an agent app took on through its API, as the app keeps it."""

    agent_id: Identifier


class A2AAgentsJoined(BaseModel):
    """`GET /v1/a2a-agents` on an agent app: the A2A agents it took on through its API (not those
    of its files or settings), the same in every replica of the app."""

    agents: list[A2AAgentJoined] = Field(default_factory=list, max_length=MAX_JOINED_A2A_AGENTS)


# -- checks ---------------------------------------------------------------------------------------


class CheckRequest(BaseModel):
    """`POST` to a task's checker app (`CheckerApp.method`, by service invocation from the task
    board): the task and the outcome its agent reported (without the award's token)."""

    model_config = ConfigDict(extra="forbid")

    spec: TaskSpec
    outcome: TaskOutcome


class CheckAnswer(BaseModel):
    """A checker app's answer: whether the output passes the task's check, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    passed: bool
    reason: Note = Field(min_length=1)


# -- reputation ----------------------------------------------------------------------------------


class OutcomeReport(BaseModel):
    """`Reputation` actor `apply_outcome`: a task's outcome, whether the task's rules count it
    as a success (a partial outcome does when the task allows partial results), and the bid that
    won the task, whose self-report and cost estimate the outcome calibrates."""

    outcome: TaskOutcome
    counts_as_success: bool
    winning_bid: Bid | None = None
    verdict: Verdict | None = Field(
        default=None,
        description="What the task's check found of the outcome; the reputation learns from it "
        "where there is one, and from the agent's own word otherwise.",
        exclude_if=lambda verdict: verdict is None,
    )
    revision: int = Field(
        default=0,
        ge=0,
        le=1,
        description="0 for the outcome as the board recorded it; 1 for its verdict as a dispute "
        "revised it (the reputation then corrects what it counted, once).",
        exclude_if=lambda revision: revision == 0,
    )


MAX_OUTCOMES_APPLIED_AT_ONCE = 100


class OutcomeReports(BaseModel):
    """`Reputation` actor `apply_outcomes`: outcomes of one agent's tasks that ended together,
    applied in one turn and one write, in order (each task's outcome once)."""

    model_config = ConfigDict(extra="forbid")

    reports: list[OutcomeReport] = Field(min_length=1, max_length=MAX_OUTCOMES_APPLIED_AT_ONCE)


# -- escalation ----------------------------------------------------------------------------------


class ResumeRequest(BaseModel):
    """`POST /v1/escalations/{id}/resume`: a person's decision, who made it and why (kept in the
    audit trail)."""

    decision: AnyResponse
    who: Name
    why: Note = ""
    context_digest: str | None = Field(
        default=None,
        max_length=64,
        pattern=DIGEST_PATTERN,
        description="The context digest of the escalation as the decision-maker saw it "
        "(agora.core.escalation.digest); when given, the decision applies only if the escalation "
        "still shows the same, else 409 CONTEXT_CHANGED.",
    )


class Decision(BaseModel):
    """`Escalation` actor `resolve`: the decision to apply, with who made it and why."""

    response: AnyResponse
    who: Name
    why: Note = ""
    progress: PartialProgress | None = None
    context_digest: str | None = Field(
        default=None, max_length=64, pattern=DIGEST_PATTERN, description="See ResumeRequest.context_digest."
    )


class DeadlineExtension(BaseModel):
    """`POST /v1/escalations/{id}/deadline` and `Escalation` actor `extend_deadline`: a later
    deadline for a waiting escalation (its default decision unchanged), who moved it and why."""

    deadline: AwareDatetime
    who: Name
    why: Note = ""
    context_digest: str | None = Field(
        default=None, max_length=64, pattern=DIGEST_PATTERN, description="See ResumeRequest.context_digest."
    )


class EscalationList(BaseModel):
    """`GET /v1/escalations?status=...`: one page of the escalations in a status, or with no
    status of every escalation kept, the newest first, narrowed by `kind`, `older_than_minutes`
    and `below_confidence` when given."""

    status: EscalationStatus | None = Field(
        default=None, description="The status listed; None: every status."
    )
    total: int = Field(
        description="How many escalations the listing has (the filter aside); `escalations` is one page of "
        "those that match."
    )
    escalations: list[EscalationRecord] = Field(max_length=MAX_PAGE_SIZE)


# -- uncertainty monitor -------------------------------------------------------------------------

SessionStatus = Literal["RUNNING", "WAITING_FOR_HUMAN", "ABORTED"]


class Continuation(BaseModel):
    """How a session went on after a person (or a deadline) decided."""

    escalation_id: IdRef
    action: EscalationAction | CheckpointAction
    next_prompt: Text | None = None
    guidance: Note | None = None
    decided_by: NameRef
    at: datetime


class SessionState(BaseModel):
    """`GET /v1/sessions/{id}`: a session's belief state and where it stands."""

    belief: SessionBelief | None = None
    status: SessionStatus = "RUNNING"
    escalation_id: IdRef | None = None
    awaiting_outcome: IdRef | None = None
    """The escalation whose decision the next step will prove right or wrong."""
    continuations: list[Continuation] = Field(default_factory=list)
    """One per decision the session received, for as long as the session lives (not capped)."""
    abort_summary: AbortSummary | None = None


class AgentLearning(BaseModel):
    """`GET /v1/agents/{agent_id}/learning` (agent apps, the worker among them):
    what an agent learnt from its recent runs: the patterns they show (added to the prompts of
    relevant tasks) and how runs fared with each pattern applied against without."""

    agent_id: Identifier
    outcomes: int = Field(ge=0, description="Recent runs the agent learns from.")
    patterns: list[Text] = Field(default_factory=list, max_length=MAX_ITEMS)
    effectiveness: list[PatternEffectiveness] = Field(default_factory=list, max_length=MAX_ITEMS)


class SessionSummary(BaseModel):
    """`GET /v1/sessions/{id}/summary`: a compact summary of a session, fit for a session's
    metadata."""

    overall_level: UncertaintyLevel
    cumulative_confidence: float
    total_steps: int
    high_uncertainty_steps: int
    last_step_id: IdRef | None = None
    last_action: UncertaintyAction | None = None
    status: SessionStatus


class StepReport(BaseModel):
    """`POST /v1/sessions/{id}/llm-responses` and `/tool-calls`: one step of an agent."""

    step_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    text: Text = ""
    prompt: Text | None = None
    step_type: StepType = "llm_call"
    tool_name: Name | None = None


class StepVerdict(BaseModel):
    """The monitor's answer to a step: its uncertainty, the action, where the session stands."""

    step: StepUncertainty
    action: UncertaintyAction
    status: SessionStatus
    escalation_id: IdRef | None = None

    @property
    def parked(self) -> str | None:
        """The escalation the session now waits on, if the step paused it."""
        return self.escalation_id if self.status == "WAITING_FOR_HUMAN" else None


class CheckpointRequest(BaseModel):
    """`POST /v1/sessions/{id}/checkpoints`: a step about to run, checked against the
    session's checkpoint triggers first."""

    step: int = Field(ge=0)
    prompt: Text
    retry_count: int = Field(default=0, ge=0)
    triggers: list[CheckpointTrigger] = Field(default_factory=list, max_length=MAX_ITEMS)
    """Triggers for this check on top of the service's configured ones."""


class CheckpointAnswer(BaseModel):
    """The monitor's answer to a checkpoint: the verdict, where the session stands, and the
    escalation it waits on when a trigger required confirmation."""

    verdict: CheckpointVerdict
    status: SessionStatus
    escalation_id: IdRef | None = None


class BidSolicitation(BaseModel):
    """`POST /v1/bids` on an agent's app: the market asks one of the app's agents to bid for a
    task, to answer within `respond_within_ms`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: Identifier
    task: TaskSpec
    respond_within_ms: int = Field(gt=0, le=60_000)


class BidOffer(BaseModel):
    """An agent app's answer to a `BidSolicitation`: its own estimate. The market makes the bid
    from it, with the task and agent it asked about (never ones the answer names)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    self_reported_success_prob: Probability = Field(ge=0.0, le=1.0)
    estimated_cost_usd: float = Field(ge=0.0, le=1_000_000.0)
    estimated_steps: int = Field(ge=0, le=10_000)
    rationale: Note = ""
