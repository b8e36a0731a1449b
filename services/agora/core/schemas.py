"""JSON Schemas of the pub/sub and API contracts, for clients not written in Python.

The pydantic models are the single definition; `python -m agora.core.schemas` writes their
schemas to proto/jsonschema/ and a unit test fails when the committed files drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from agora.core.contracts import (
    AgentLearning,
    AgentList,
    CheckpointAnswer,
    CheckpointRequest,
    Decision,
    Deregistered,
    EscalationList,
    FilterAnswer,
    OutcomeReport,
    RegisteredAgent,
    ResumeRequest,
    SessionState,
    SessionSummary,
    StepReport,
    StepVerdict,
    TaskList,
)
from agora.core.debate import (
    DebateAccepted,
    DebateCompleted,
    DebateList,
    DebateOutcome,
    DebateRecord,
    DebateRequest,
    DebateSubmission,
)
from agora.core.escalation.record import EscalationRecord, ParkRequest
from agora.core.market import TaskOutcome, TaskSpec
from agora.core.messages import (
    AwardAcknowledgement,
    AwardLapsed,
    DeadLetter,
    EscalationOutcome,
    EscalationResolved,
    RegistryChanged,
    RegistryCommand,
    TaskAwarded,
    TaskRejected,
)
from agora.core.models import CapabilityProfile, CapabilityQuery
from agora.core.plans import PlanAccepted, PlanCompleted, PlanList, PlanRecord, PlanRequest, PlanSubmission
from agora.core.task_lifecycle import TaskRecord

SCHEMA_DIR = Path(__file__).resolve().parents[3] / "proto" / "jsonschema"

CONTRACTS: dict[str, Any] = {
    "capability_profile": CapabilityProfile,
    "capability_query": CapabilityQuery,
    "registry_command": RegistryCommand,
    "registry_changed": RegistryChanged,
    "dead_letter": DeadLetter,
    "task_spec": TaskSpec,
    "task_awarded": TaskAwarded,
    "task_rejected": TaskRejected,
    "award_lapsed": AwardLapsed,
    "task_outcome": TaskOutcome,
    "award_acknowledgement": AwardAcknowledgement,
    "escalation_park_request": ParkRequest,
    "escalation_record": EscalationRecord,
    "escalation_resolved": EscalationResolved,
    "escalation_outcome": EscalationOutcome,
    "registered_agent": RegisteredAgent,
    "agent_list": AgentList,
    "filter_answer": FilterAnswer,
    "deregistered": Deregistered,
    "task_record": TaskRecord,
    "task_list": TaskList,
    "outcome_report": OutcomeReport,
    "escalation_resume_request": ResumeRequest,
    "escalation_decision": Decision,
    "escalation_list": EscalationList,
    "step_report": StepReport,
    "step_verdict": StepVerdict,
    "checkpoint_request": CheckpointRequest,
    "checkpoint_answer": CheckpointAnswer,
    "session_state": SessionState,
    "session_summary": SessionSummary,
    "agent_learning": AgentLearning,
    "plan_request": PlanRequest,
    "plan_submission": PlanSubmission,
    "plan_accepted": PlanAccepted,
    "plan_record": PlanRecord,
    "plan_list": PlanList,
    "plan_completed": PlanCompleted,
    "debate_request": DebateRequest,
    "debate_submission": DebateSubmission,
    "debate_accepted": DebateAccepted,
    "debate_record": DebateRecord,
    "debate_list": DebateList,
    "debate_completed": DebateCompleted,
    "debate_outcome": DebateOutcome,
}


def render() -> dict[str, str]:
    return {
        f"{name}.json": json.dumps(TypeAdapter(model).json_schema(), indent=2, sort_keys=True) + "\n"
        for name, model in CONTRACTS.items()
    }


def main() -> int:
    SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
    for filename, text in render().items():
        (SCHEMA_DIR / filename).write_text(text)
    print(f"wrote {len(CONTRACTS)} schemas to {SCHEMA_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
