"""A plan as people read it: its waves as a tree, each subgoal with its status, attempts and
who ran it (`agora plan show`, the `make run` demo)."""

from __future__ import annotations

from agora.core.limits import one_line
from agora.core.planning import SubGoalStatus
from agora.core.plans.record import PlanRecord

MARKS = {
    SubGoalStatus.PENDING: "·",
    SubGoalStatus.RUNNING: "▶",
    SubGoalStatus.COMPLETED: "✓",
    SubGoalStatus.FAILED: "✗",
    SubGoalStatus.SKIPPED: "-",
}


def plan_lines(record: PlanRecord, *, width: int = 100) -> list[str]:
    plan = record.plan
    version = f" v{plan.version}" if plan else ""
    cost = f"${record.cost_usd:.4f}"
    budget = record.request.config.cost_budget_usd
    spent = f"{cost} of ${budget:.4f}" if budget is not None and not record.budget_lifted else cost
    head = f"{record.plan_id}{version}: {record.state}  replans {record.replans}  cost {spent}"
    lines = [head, f"  task: {one_line(record.request.task, width - 8)}"]
    if plan is None:
        if record.stop is not None:
            stop = record.stop
            return [*lines, f"  waiting for a person: escalation {stop.escalation_id} ({stop.detail})"]
        return [*lines, f"  {record.reason}" if record.reason else "  (planning)"]
    by_id = {s.id: s for s in plan.subgoals}
    agents: dict[str, str] = {}
    for attempt in record.attempts:
        if attempt.agent_id:
            agents[attempt.subgoal_id] = attempt.agent_id
    for index, wave in enumerate(record.waves):
        lines.append(f"  wave {index + 1}")
        for position, subgoal_id in enumerate(wave):
            subgoal = by_id[subgoal_id]
            branch = "└─" if position == len(wave) - 1 else "├─"
            waived = " (waived)" if subgoal_id in record.waived else ""
            who = f" by {agents[subgoal_id]}" if subgoal_id in agents else ""
            tries = f" (attempts {subgoal.attempts})" if subgoal.attempts > 1 else ""
            detail = (
                subgoal.output_summary
                if subgoal.status is SubGoalStatus.COMPLETED
                else subgoal.failure_reason
            )
            text = f"  {branch} {MARKS[subgoal.status]} {subgoal_id:<20} {subgoal.status}{waived}{who}{tries}"
            lines.append(text + (f": {one_line(detail, width - len(text) - 2)}" if detail else ""))
    if record.stop is not None:
        lines.append(f"  waiting for a person: escalation {record.stop.escalation_id} ({record.stop.detail})")
    if record.result is not None:
        if record.result.final_output:
            lines.append(f"  result: {one_line(record.result.final_output, width - 10)}")
        if record.reason:
            lines.append(f"  reason: {record.reason}")
    return lines
