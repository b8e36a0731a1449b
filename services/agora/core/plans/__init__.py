"""A plan as the planner service runs it: the request, the record people watch, and the rules
that move a running plan from wave to wave.

`agora.core.planning` holds the plan itself (subgoals, waves, verification, replan merge);
this package adds what a service around it needs: `request.PlanRequest` (topic `agora.plans`
and `PUT /v1/plans/{id}`), `record.PlanRecord` (`GET /v1/plans/{id}`: the plan version, every
subgoal's status and attempts, replans, cost so far), `record.PlanCompleted` (topic
`agora.plan.completed`), what the plan's workflows hand each other and wait for (`workflow`),
and the pure steps the durable run takes (`run`: `begin_wave`, `end_wave`, `next_step`,
`apply_decision`, `finish`), so the run's decisions are tested without Dapr.

Choices made as users would expect them:

* a task estimated at or below `complexity_threshold` still gets a record and a result: a
  plan of one subgoal (`DIRECT_SUBGOAL_ID`) that goes to the market as the task itself, with
  `direct` set;
* the budget is `config.cost_budget_usd`, counted from what the market's agents report
  (`actual_cost_usd`); before each wave, a plan that has spent its budget stops for a person
  (or fails, with `escalate` off); each subgoal's task gets an equal share of what is left;
* a subgoal that still fails after its fallback and the last replan stops the plan for a
  person (`escalate`, the default) or stays FAILED, its dependents SKIPPED (`escalate` off);
* a person's decision on a stopped subgoal: `retry` runs it again (with `modified_prompt`
  as its description when given), `modify_prompt` runs it again with the new description,
  `skip` waives it (its dependents run without it), `abort` ends the plan: what completed is
  kept and summarized;
* on a budget stop, `retry` and `modify_prompt` lift the budget for the rest of the plan,
  `skip` ends the plan with what completed, `abort` aborts it.

Each name is imported from the module that holds its idea (`agora.core.plans.record`...);
this package exports nothing itself.
"""

__all__: list[str] = []
