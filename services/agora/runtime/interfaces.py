"""Every actor interface of Agora, in one place: the methods each actor type answers and the
contract models they take and return.

Hosts implement an interface (`class Task(PydanticActor[...], TaskInterface)`); callers
reach an actor through a proxy typed as the same interface (`ActorClient.proxy`, or an
`Actors` family: `await tasks(task_id).record_allocation(result)`), so a call is checked by
mypy against what the host declares, and an actor method is named as a string only here (the
`actormethod` names are the wire names Dapr routes by).

Each interface names `ActorInterface` among its direct bases as well: the Dapr actor runtime
builds an actor type's method table only from the classes that subclass it directly.
"""

from __future__ import annotations

from dapr.actor import ActorInterface

from agora.core.capacity import RunClaim, RunRelease, RunsView, WaitersForgotten
from agora.core.contracts import (
    CheckpointAnswer,
    CheckpointRequest,
    DeadlineExtension,
    Decision,
    OutcomeReport,
    OutcomeReports,
    SessionState,
    SessionSummary,
    StepReport,
    StepVerdict,
)
from agora.core.escalation.record import EscalationRecord, ParkRequest
from agora.core.market import AllocationResult, ReputationRecord, TaskOutcome, TaskSpec
from agora.core.messages import (
    ActorType,
    AwardAcknowledgement,
    AwardWindowDue,
    EscalationResolved,
    HandOver,
    ProgressNote,
    TaskCancel,
    TaskDecision,
    TaskDispute,
)
from agora.core.task_lifecycle import TaskRecord
from agora.runtime.actor_interface import AgoraActorInterface, actor_method

__all__ = [
    "AgentRunsInterface",
    "EscalationInterface",
    "ReputationInterface",
    "SessionUncertaintyInterface",
    "TaskInterface",
]


class TaskInterface(AgoraActorInterface, ActorInterface):
    """A task on the board, one actor per task id."""

    actor_type = ActorType.TASK

    @actor_method("post_task")
    async def post_task(self, spec: TaskSpec) -> TaskRecord: ...

    @actor_method("get_task")
    async def get_task(self) -> TaskRecord: ...

    @actor_method("decide")
    async def decide(self, decision: TaskDecision) -> TaskRecord: ...

    @actor_method("record_allocation")
    async def record_allocation(self, result: AllocationResult) -> TaskRecord: ...

    @actor_method("announce")
    async def announce(self) -> TaskRecord: ...

    @actor_method("acknowledge_award")
    async def acknowledge_award(self, acknowledgement: AwardAcknowledgement) -> TaskRecord: ...

    @actor_method("verify_award")
    async def verify_award(self, acknowledgement: AwardAcknowledgement) -> TaskRecord: ...

    @actor_method("note_progress")
    async def note_progress(self, note: ProgressNote) -> TaskRecord: ...

    @actor_method("mark_outcome")
    async def mark_outcome(self, outcome: TaskOutcome) -> TaskRecord: ...

    @actor_method("hand_over")
    async def hand_over(self, hand_over: HandOver) -> TaskRecord: ...

    @actor_method("cancel")
    async def cancel(self, cancel: TaskCancel) -> TaskRecord: ...

    @actor_method("dispute")
    async def dispute(self, dispute: TaskDispute) -> TaskRecord: ...

    @actor_method("person_decided")
    async def person_decided(self) -> TaskRecord: ...

    @actor_method("award_window_due")
    async def award_window_due(self, due: AwardWindowDue) -> TaskRecord: ...

    @actor_method("retry_queued")
    async def retry_queued(self) -> TaskRecord: ...

    @actor_method("rejudge_queued")
    async def rejudge_queued(self, result: AllocationResult) -> TaskRecord: ...


class AgentRunsInterface(AgoraActorInterface, ActorInterface):
    """An agent's runs in flight and the tasks waiting for a slot, one actor per agent id
    (`agora.core.capacity`)."""

    actor_type = ActorType.AGENT_RUNS

    @actor_method("claim")
    async def claim(self, claim: RunClaim) -> RunsView: ...

    @actor_method("release")
    async def release(self, release: RunRelease) -> RunsView: ...

    @actor_method("forget_waiters")
    async def forget_waiters(self, forgotten: WaitersForgotten) -> RunsView: ...

    @actor_method("view")
    async def view(self) -> RunsView: ...


class ReputationInterface(AgoraActorInterface, ActorInterface):
    """An agent's reputation, one actor per agent id."""

    actor_type = ActorType.REPUTATION

    @actor_method("get_record")
    async def get_record(self) -> ReputationRecord: ...

    @actor_method("apply_outcome")
    async def apply_outcome(self, report: OutcomeReport) -> ReputationRecord: ...

    @actor_method("apply_outcomes")
    async def apply_outcomes(self, batch: OutcomeReports) -> ReputationRecord: ...


class EscalationInterface(AgoraActorInterface, ActorInterface):
    """A parked escalation and its decision, one actor per escalation id."""

    actor_type = ActorType.ESCALATION

    @actor_method("park")
    async def park(self, request: ParkRequest) -> EscalationRecord: ...

    @actor_method("get")
    async def get(self) -> EscalationRecord: ...

    @actor_method("resolve")
    async def resolve(self, decision: Decision) -> EscalationRecord: ...

    @actor_method("extend_deadline")
    async def extend_deadline(self, extension: DeadlineExtension) -> EscalationRecord: ...


class SessionUncertaintyInterface(AgoraActorInterface, ActorInterface):
    """An agent session's uncertainty, one actor per session."""

    actor_type = ActorType.SESSION_UNCERTAINTY

    @actor_method("observe_llm_response")
    async def observe_llm_response(self, report: StepReport) -> StepVerdict: ...

    @actor_method("observe_tool_call")
    async def observe_tool_call(self, report: StepReport) -> StepVerdict: ...

    @actor_method("checkpoint")
    async def checkpoint(self, request: CheckpointRequest) -> CheckpointAnswer: ...

    @actor_method("get_belief_state")
    async def get_belief_state(self) -> SessionState: ...

    @actor_method("summary_metadata")
    async def summary_metadata(self) -> SessionSummary: ...

    @actor_method("reset")
    async def reset(self) -> SessionState: ...

    @actor_method("apply_decision")
    async def apply_decision(self, resolved: EscalationResolved) -> SessionState: ...
