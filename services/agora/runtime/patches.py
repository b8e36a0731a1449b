"""Every patch of Agora's workflows, in one place, with when it can go.

Dapr Workflow replays a run's code against the history the run recorded, so a change to the
steps a workflow takes would break the runs in flight. A patch (`ctx.is_patched(name)`) is true
for a run begun with the change and false for one begun before it, which keeps the steps its
history recorded. Each patch can be removed, together with the code of its false branch, once
no run begun before it can still be in flight: after a release that shipped it has run long
enough for every earlier run to end. Plans, debates and graph runs may wait for a person
without a bound of their own, so check before removing one: no run of that workflow in a
state other than ended was created before the release that brought the patch (the services'
listings, `GET /v1/plans?state=RUNNING`, `...?state=WAITING_FOR_HUMAN`, and the same for
debates; an agent run lives at most its task's deadline).
"""

from __future__ import annotations

from dataclasses import dataclass

from dapr.ext.workflow import DaprWorkflowContext


@dataclass(frozen=True)
class WorkflowPatch:
    name: str
    """Recorded in the history of every run begun with the change: never renamed."""
    workflow: str
    changed: str
    """What a run begun with the patch does differently."""

    def applies(self, ctx: DaprWorkflowContext) -> bool:
        """Whether this run was begun with the change (always, for a run begun after it)."""
        return bool(ctx.is_patched(self.name))


SAVES_RIDE_ALONG = WorkflowPatch(
    "plan.saves-ride-along",
    "plan_run",
    "The run's saves of its record go with its next step, side by side, instead of as a step of "
    "their own (a wave's start with its subgoals, a wave's end with the next wave's start).",
)
FIRST_ATTEMPTS_WITH_WAVE = WorkflowPatch(
    "plan.first-attempts-with-wave",
    "plan_run",
    "The step that starts a wave also posts the first attempt of each of its subgoals, after its "
    "look-ahead, beside starting their workflows, which wait for those tasks' ends at once (two to "
    "four workflow steps fewer from one wave to the next).",
)
NOT_PLANNED_STOPS = WorkflowPatch(
    "plan.not-planned-stops",
    "plan_run",
    "A plan whose drafts gave no valid plan waits for a person (who has it drafted again, or ends "
    "it) instead of ending FAILED at once.",
)
ROUNDS_IN_ONE_STEP = WorkflowPatch(
    "debate.rounds-in-one-step",
    "debate_run",
    "A round is one step (every debater asked side by side, each answer kept as it comes), which "
    "also saves the record as it stood before the round; the end is saved once. Before: an "
    "activity per answer and a save after each round.",
)
RUN_DEADLINES = WorkflowPatch(
    "agent_run.deadline",
    "agent_run",
    "Each step of an agent's run (executing, waiting for a person, resuming) races a durable timer "
    "at the run's deadline, and the run ends at its deadline when the timer fires first.",
)

_ON_RECORD = (
    "While it waits for a person's decision, the run also reads its escalation's record after a "
    "minute, then at intervals doubling up to ten minutes, and goes on with the decision it finds "
    "there when the decision's announcement has not reached it."
)
SINGLE_AGENT_GATED = WorkflowPatch(
    "debate.single-agent-gated",
    "debate_run",
    "A confident router's answer is acted on only when the gate lets it through (the conformal "
    "gate on its one position, or its calibrated confidence at the escalate threshold); otherwise "
    "the question is debated. Before: the router's answer was acted on at once.",
)
PLAN_DECISION_ON_RECORD = WorkflowPatch("plan.decision-on-record", "plan_run", _ON_RECORD)
DEBATE_DECISION_ON_RECORD = WorkflowPatch("debate.decision-on-record", "debate_run", _ON_RECORD)
GRAPH_DECISION_ON_RECORD = WorkflowPatch("graph_run.decision-on-record", "graph_run", _ON_RECORD)

PATCHES = (
    SAVES_RIDE_ALONG,
    FIRST_ATTEMPTS_WITH_WAVE,
    NOT_PLANNED_STOPS,
    ROUNDS_IN_ONE_STEP,
    RUN_DEADLINES,
    PLAN_DECISION_ON_RECORD,
    DEBATE_DECISION_ON_RECORD,
    GRAPH_DECISION_ON_RECORD,
)
