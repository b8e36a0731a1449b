"""The `make run` demo: the worker's sample agents are registered; the demo asks the registry
a capability question, sends a malformed command (dead-lettered), publishes a few tasks to
the intake topic and prints each allocation (winner and scores) and outcome (with what the
agent said), gives an agent app's agent (the example calculator) a task it wins by its own bid
and does with its tool, checked by the market (the agent's claim and the verdict beside it),
runs the example review graph until it waits for a person, submits a plan and prints its waves
as they run, runs two debates (one converges, one waits for a person), and parks an uncertain
session for a person. It sends contract models and reads every answer as the contract model its
route answers; an error answer stops it with a readable account (`CliError`)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from agora.cli.problems import CliError, describe_refusal
from agora.cli.tasks import verdict_text
from agora.cli.text import MAX_TEXT_CHARS, one_line, shorten
from agora.core.acceptance import Acceptance, ExpectedAnswer, MatchMode
from agora.core.contracts import FilterAnswer, SessionState, StepReport, StepVerdict
from agora.core.debate.config import DebateConfig, DebaterConfig
from agora.core.debate.record import DebateRecord, DebateState
from agora.core.debate.request import DebateRequest
from agora.core.market import TERMINAL_STATUSES, AllocationStatus, ModelBill, TaskSpec
from agora.core.messages import Topic
from agora.core.models import CapabilityQuery
from agora.core.plans.record import FINAL_STATES, PlanRecord, PlanState
from agora.core.plans.request import PlanRequest
from agora.core.task_lifecycle import TaskRecord
from agora.debate.view import debate_lines
from agora.planner.view import plan_lines
from agora.sdk import GraphState
from agora.sdk._graph_runs import GraphRunRecord, GraphRunState

__all__ = [
    "AGENT_APP_TASK",
    "DEMO_DEBATES",
    "DEMO_GRAPH_RUN",
    "DEMO_PLAN",
    "DEMO_SESSION",
    "SAMPLE_TASKS",
    "graph_continuation",
    "invoker",
    "run_demo",
    "session_continuation",
]

Answer = TypeVar("Answer", bound=BaseModel)

SAMPLE_TASKS: list[TaskSpec] = [
    TaskSpec(task_id="demo-papers", description="Summarise this week's papers on agent coordination",
             required_skills=["web_search"], preferred_skills=["summarize"], budget_usd=0.05,
             min_success_threshold=0.2),
    TaskSpec(task_id="demo-churn", description="Query last month's churn by plan and explain the trend",
             required_skills=["sql"], preferred_skills=["python"], min_success_threshold=0.2),
    TaskSpec(task_id="demo-brief", description="Write a one-page brief on the churn findings",
             required_skills=["write"], preferred_skills=["summarize"], min_success_threshold=0.2),
    TaskSpec(task_id="demo-molecule", description="Simulate the binding energy of a ligand",
             required_skills=["quantum_chemistry"]),
]  # fmt: skip

CAPABILITY_QUESTION = CapabilityQuery(required_skills=["web_search"], preferred_skills=["summarize"])

MALFORMED_REGISTRATION: dict[str, Any] = {"kind": "register", "profile": {"agent_id": "", "skill_tags": []}}
"""A registration no contract model can hold (that is the point): the registry dead-letters it."""


def invoker(dapr_http: str, app_id_for: Callable[[str], str]) -> Callable[[str, str], str]:
    def invoke(service: str, path: str) -> str:
        return f"{dapr_http}/v1.0/invoke/{app_id_for(service)}/method/{path}"

    return invoke


def _answer(response: httpx.Response, answer: type[Answer], target: str) -> Answer:
    """The body of a successful answer as its contract model; an error answer as a `CliError`."""
    _accepted(response, target)
    return answer.model_validate(response.json())


def _accepted(response: httpx.Response, target: str) -> None:
    if response.status_code >= 400:
        raise CliError(describe_refusal(response, target))


def _publish(http: httpx.Client, publish: str, topic: str, message: BaseModel) -> None:
    _accepted(http.post(f"{publish}/{topic}", json=message.model_dump(mode="json")), f"topic {topic}")


def run_demo(
    dapr_http: str, app_id_for: Callable[[str], str], *, patience: float = 1.0, model: str | None = None
) -> None:
    """`patience` multiplies every wait: a real model on this machine answers in seconds where
    the offline one answers at once. `model`: the OpenAI-compatible model the debaters ask
    (None: the offline model, whose debates end as the README shows)."""
    _PATIENCE.set(patience)
    invoke = invoker(dapr_http, app_id_for)
    publish = f"{dapr_http}/v1.0/publish/agora-pubsub"
    with httpx.Client(timeout=30) as http:
        found = _wait(functools.partial(_capable_agents, http, invoke("registry", "v1/agents/filter")))
        print("\nRegistry: filter_capable(required=['web_search'], preferred=['summarize']):")
        for rank, agent in enumerate(found, 1):
            print(f"  {rank}. {agent.agent_id:<12} tier={agent.model_tier:<9} {agent.skill_tags}")
        malformed = http.post(f"{publish}/{Topic.REGISTRY_COMMANDS}", json=MALFORMED_REGISTRATION)
        _accepted(malformed, f"topic {Topic.REGISTRY_COMMANDS}")
        print("  (a malformed registration was dead-lettered to agora.deadletter with its validation errors)")

        for spec in SAMPLE_TASKS:
            _publish(http, publish, Topic.TASKS, spec)
        print(f"\nMarket: published {len(SAMPLE_TASKS)} tasks to agora.tasks")
        bills = []
        for spec in SAMPLE_TASKS:
            url = invoke("taskboard", f"v1/tasks/{spec.task_id}")
            record = _wait(functools.partial(_settled_at, http, url))
            _print_task(record)
            if record.allocation is not None and record.allocation.model_bill is not None:
                bills.append(record.allocation.model_bill)
        if bills:
            print(f"  the market's model, per decision: {_bill_text(*bills)}")
        print("\nInspect any task with: .venv/bin/agora task show demo-papers")
        _agent_app_task(http, invoke, publish)
        _a2a_agent_task(http, invoke, publish)
        _run_a_graph(http, invoke)
        _run_a_plan(http, invoke, publish)
        _debate(http, invoke, publish, model)
        _pause_a_session(http, invoke)


AGENT_APP_TASK = TaskSpec(
    task_id="demo-sum",
    description="What is 19 + 23?",
    required_skills=["arithmetic"],
    min_success_threshold=0.2,
    acceptance=Acceptance(check=ExpectedAnswer(match=MatchMode.NUMBER, expected="42")),
)
"""A task for an agent app's agent (the example calculator bids for it and calls its tool),
checked by the market: its answer's last number must be 42."""


def _agent_app_task(http: httpx.Client, invoke: Callable[[str, str], str], publish: str) -> None:
    """A task only an SDK agent can do, when one is on the market: it bids for itself, wins,
    and works with its own tools."""
    question = CapabilityQuery(required_skills=AGENT_APP_TASK.required_skills)
    answered = http.post(invoke("registry", "v1/agents/filter"), json=question.model_dump(mode="json"))
    if not _answer(answered, FilterAnswer, "registry").agents:
        return
    _publish(http, publish, Topic.TASKS, AGENT_APP_TASK)
    print(f"\nAgent app: published {AGENT_APP_TASK.task_id} {AGENT_APP_TASK.description!r} to agora.tasks")
    url = invoke("taskboard", f"v1/tasks/{AGENT_APP_TASK.task_id}")
    record: TaskRecord = _wait(functools.partial(_settled_at, http, url))
    history = " → ".join(change.status for change in record.history)
    print(f"  {AGENT_APP_TASK.task_id:<14} {record.status:<9} {history}")
    allocation, outcome = record.allocation, record.outcome
    bid = allocation.winning_bid if allocation is not None else None
    if bid is not None:
        whose = f"the market's estimate ({bid.fallback_reason})" if bid.fallback else "its own bid"
        print(
            f"    winner {bid.agent_id} by {whose}: {bid.rationale!r} "
            f"(p {bid.self_reported_success_prob:.2f}, ${bid.estimated_cost_usd:.4f})"
        )
    if outcome is not None:
        tools = ", ".join(outcome.tools_called) or "none"
        tokens = outcome.input_tokens + outcome.output_tokens
        print(
            f"    outcome: {_how_it_ended(record)} in {_steps(outcome.actual_steps)}, "
            f"${outcome.actual_cost_usd:.4f}, {tokens} tokens: {outcome.summary!r}; tools called: {tools}"
        )
        _print_verdict(record)


A2A_AGENT_TASK = TaskSpec(
    task_id="demo-stats",
    description="The market awards each task to the best bid. The best bid wins the task.",
    required_skills=["text-stats"],
    min_success_threshold=0.2,
)
"""A task for the example A2A agent (`agora run` starts it beside the example agents)."""


def _a2a_agent_task(http: httpx.Client, invoke: Callable[[str, str], str], publish: str) -> None:
    """A task only an A2A agent can do, when one is on the market: the market estimates its bid,
    the task goes to it as an A2A message, its status updates become the task's progress and its
    artifact the outcome."""
    # An agent app registers its agents (reading an A2A agent's card) before it is ready, so
    # one on the market is there by now.
    question = CapabilityQuery(required_skills=A2A_AGENT_TASK.required_skills)
    answered = http.post(invoke("registry", "v1/agents/filter"), json=question.model_dump(mode="json"))
    if not _answer(answered, FilterAnswer, "registry").agents:
        return
    _publish(http, publish, Topic.TASKS, A2A_AGENT_TASK)
    print(f"\nA2A agent: published {A2A_AGENT_TASK.task_id} {A2A_AGENT_TASK.description!r} to agora.tasks")
    url = invoke("taskboard", f"v1/tasks/{A2A_AGENT_TASK.task_id}")
    record: TaskRecord = _wait(functools.partial(_settled_at, http, url))
    print(f"  {A2A_AGENT_TASK.task_id:<14} {record.status:<9} {' → '.join(c.status for c in record.history)}")
    for attempt in record.awards:
        notes = "; ".join(note.text for note in attempt.progress) or "none"
        print(f"    {attempt.agent_id} said over A2A as it worked: {notes}")
    if record.outcome is not None:
        print(f"    outcome: {_how_it_ended(record)}: {record.outcome.summary!r}")
        _print_verdict(record)


DEMO_GRAPH_RUN = "demo-review"
DEMO_NOTE = "home solar batteries in Spain: prices, payback, subsidies"


def _run_a_graph(http: httpx.Client, invoke: Callable[[str, str], str]) -> None:
    """A run of the example review graph, when an agent app serves it: it counts the note's
    words with a tool, sends a long note to the market for research, and stops at its human
    node for a person's decision."""
    url = invoke("agents", f"v1/graphs/review/runs/{DEMO_GRAPH_RUN}")
    started = http.put(url, json={"input": DEMO_NOTE})
    if started.status_code == 404:
        return  # no agent app serves the review graph
    _accepted(started, "agents")
    print(f"\nGraph: run {DEMO_GRAPH_RUN} of the review graph on {DEMO_NOTE!r}")
    record: GraphRunRecord = _wait(functools.partial(_graph_settled, http, url), timeout=60)
    print(f"  {record.status}: {' → '.join(record.path)}")
    state = GraphState.model_validate_json(record.state)
    research = state.market.get("research")
    if research is not None:
        by = f" by {research.agent_id}" if research.agent_id else ""
        print(f"    market node: task {research.task_id} {research.status}{by}: {research.summary!r}")
    if record.escalation_id is not None:
        print(f"    it waits at {record.waiting_at!r} for a person: escalation {record.escalation_id}")
        print(f"    decide it in the console, or: .venv/bin/agora escalations resume {record.escalation_id} "
              "--action retry --why 'publish it'")  # fmt: skip


def graph_continuation(http: httpx.Client, invoke: Callable[[str, str], str]) -> str | None:
    """A line describing how the demo's graph run ended once a person decided; else None."""
    response = http.get(invoke("agents", f"v1/graphs/review/runs/{DEMO_GRAPH_RUN}"))
    if response.status_code != 200:
        return None
    record = GraphRunRecord.model_validate(response.json())
    if record.status in (GraphRunState.RUNNING, GraphRunState.WAITING_FOR_HUMAN):
        return None
    output = GraphState.model_validate_json(record.state).output
    return f"graph run {DEMO_GRAPH_RUN} {record.status}: {' → '.join(record.path)}; {output!r}"


def _graph_settled(http: httpx.Client, url: str) -> GraphRunRecord | None:
    response = http.get(url)
    if response.status_code != 200:
        return None
    record = GraphRunRecord.model_validate(response.json())
    return record if record.status is not GraphRunState.RUNNING else None


def _capable_agents(http: httpx.Client, url: str) -> list[Any]:
    """The agents the registry finds for the demo's capability question (none until the sample
    agents are registered)."""
    answered = http.post(url, json=CAPABILITY_QUESTION.model_dump(mode="json"))
    return list(_answer(answered, FilterAnswer, "registry").agents)


DEMO_PLAN = PlanRequest(
    plan_id="demo-plan",
    task="Write a market report on home solar batteries in Spain with sources, data and checked findings",
    skills=["web_search", "summarize", "write", "sql", "python"],
    min_success_threshold=0.2,
)


def _run_a_plan(http: httpx.Client, invoke: Callable[[str, str], str], publish: str) -> None:
    """A plan request on agora.plans: the planner drafts subgoals in waves, each goes to the
    market, is verified, and the results are synthesized; printed as it progresses."""
    _publish(http, publish, Topic.PLANS, DEMO_PLAN)
    print(f"\nPlanner: published plan {DEMO_PLAN.plan_id} to {Topic.PLANS}")
    url = invoke("planner", f"v1/plans/{DEMO_PLAN.plan_id}")
    shown: list[str] = []
    deadline = time.monotonic() + 60 * _PATIENCE.get()
    while time.monotonic() < deadline:
        response = http.get(url)
        if response.status_code == 200:
            record = PlanRecord.model_validate(response.json())
            lines = plan_lines(record)
            if lines != shown:
                print("\n".join("  " + line for line in lines), flush=True)
                shown = lines
            if record.state in FINAL_STATES or record.state is PlanState.WAITING_FOR_HUMAN:
                break
        time.sleep(0.5)
    print(f"  Watch it again with: .venv/bin/agora plan show {DEMO_PLAN.plan_id}")


DEMO_DEBATERS = [
    DebaterConfig(debater_id="d0", role_hint="You answer carefully."),
    DebaterConfig(debater_id="d1", role_hint="You are a skeptical devil's advocate."),
    DebaterConfig(debater_id="d2", role_hint="You look for what the others missed."),
]
DEMO_DEBATES = [
    DebateRequest(
        debate_id="demo-backup",
        question="Should the migration keep a backup of the orders table?",
        options=["keep a backup", "drop it now"],
        config=DebateConfig(debaters=DEMO_DEBATERS),
    ),
    DebateRequest(
        debate_id="demo-region",
        question="Which region should host the new cluster?",
        options=["eu-west", "us-east", "ap-south"],
        config=DebateConfig(debaters=DEMO_DEBATERS),
    ),
]
DEBATE_SETTLED = frozenset({DebateState.COMPLETED, DebateState.ABORTED, DebateState.WAITING_FOR_HUMAN})
"""The states the demo waits for a debate to reach."""


def _debate(http: httpx.Client, invoke: Callable[[str, str], str], publish: str, model: str | None) -> None:
    """Two debates on agora.debates: on the offline model one converges in its second round and
    one stays split and waits for a person; on a real model, as its debaters answer."""
    for request in DEMO_DEBATES:
        if model is not None:
            debaters = [d.model_copy(update={"backend": "openai", "model_id": model}) for d in DEMO_DEBATERS]
            request = request.model_copy(
                update={"config": request.config.model_copy(update={"debaters": debaters})}
            )
        _publish(http, publish, Topic.DEBATES, request)
    print(f"\nDebate: published {len(DEMO_DEBATES)} debates to {Topic.DEBATES}")
    for request in DEMO_DEBATES:
        url = invoke("debate", f"v1/debates/{request.debate_id}")
        record: DebateRecord = _wait(functools.partial(_debate_settled, http, url))
        print("\n".join("  " + line for line in debate_lines(record)))
        if record.escalation_id:
            command = f".venv/bin/agora escalations resume {record.escalation_id} --action modify_prompt"
            print(f"  Decide it: {command} \\")
            voted = record.result.final_answer if record.result is not None else ""
            answer = shorten(one_line(voted), 60) or "your answer"
            print(f'      --prompt "{answer}" --why "the team agreed"')


def _debate_settled(http: httpx.Client, url: str) -> DebateRecord | None:
    response = http.get(url)
    if response.status_code != 200:
        return None
    record = DebateRecord.model_validate(response.json())
    return record if record.state in DEBATE_SETTLED else None


DEMO_SESSION = "demo-session"


def _pause_a_session(http: httpx.Client, invoke: Callable[[str, str], str]) -> None:
    """An agent session reports a confident step, then a doubtful one: the uncertainty monitor
    parks it with the escalation service until a person decides."""
    report = invoke("uncertainty", f"v1/sessions/{DEMO_SESSION}/llm-responses")
    _answer(
        http.post(invoke("uncertainty", f"v1/sessions/{DEMO_SESSION}/reset")), SessionState, "uncertainty"
    )
    confident = StepReport(step_id="1", text="Found the orders table. Confidence: 95%")
    _answer(http.post(report, json=confident.model_dump(mode="json")), StepVerdict, "uncertainty")
    doubtful = StepReport(
        step_id="2",
        prompt="Migrate the orders table",
        text="I think dropping the old orders table is fine, but I am not sure. Confidence: 15%",
    )
    verdict = _answer(http.post(report, json=doubtful.model_dump(mode="json")), StepVerdict, "uncertainty")
    print(
        f"\nUncertainty: session {DEMO_SESSION} step 2 → {verdict.action} "
        f"(confidence {verdict.step.propagated_confidence:.2f}); it waits for a person."
    )
    print(f"  Decide it in the console (its address is at the top): escalation {verdict.escalation_id}.")
    print("  Or in another terminal:")
    print("    .venv/bin/agora escalations list")
    print(f"    .venv/bin/agora escalations show {verdict.escalation_id}")
    print(f"    .venv/bin/agora escalations resume {verdict.escalation_id} --action modify_prompt \\")
    print(
        '        --prompt "Migrate the orders table; keep the old one until verified" --why "no data loss"\n'
    )


def session_continuation(http: httpx.Client, invoke: Callable[[str, str], str]) -> str | None:
    """A line describing how the demo session went on, once a person decided; else None."""
    response = http.get(invoke("uncertainty", f"v1/sessions/{DEMO_SESSION}"))
    if response.status_code != 200:
        return None
    session = SessionState.model_validate(response.json())
    if not session.continuations:
        return None
    last = session.continuations[-1]
    prompt = f" with prompt {last.next_prompt!r}" if last.next_prompt else ""
    return f"session {DEMO_SESSION} continues: {last.action} by {last.decided_by}{prompt}"


def _settled_at(http: httpx.Client, url: str) -> TaskRecord | None:
    response = http.get(url)
    if response.status_code != 200:
        return None
    record = TaskRecord.model_validate(response.json())
    return record if record.status in TERMINAL_STATUSES else None


_PATIENCE: ContextVar[float] = ContextVar("demo_patience", default=1.0)


def _wait(fetch: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout * _PATIENCE.get()
    while time.monotonic() < deadline:
        found = fetch()
        if found:
            return found
        time.sleep(0.2)
    raise TimeoutError("the demo did not see the expected answer in time; see the logs")


def _how_it_ended(record: TaskRecord) -> str:
    """The task's end as the board decided it (its check's verdict where it has one), beside
    what the agent claimed when the two differ."""
    how = {AllocationStatus.COMPLETED: "succeeded", AllocationStatus.PARTIAL: "partial"}.get(
        record.status, "failed"
    )
    outcome = record.outcome
    if outcome is not None and outcome.actual_success != (record.status is AllocationStatus.COMPLETED):
        how += f" (the agent claimed {'success' if outcome.actual_success else 'failure'})"
    return how


def _print_verdict(record: TaskRecord) -> None:
    """The check's verdict beside the agent's claim, where the task has a check."""
    if record.verdict is not None and record.outcome is not None:
        claimed = "success" if record.outcome.actual_success else "failure"
        print(f"    the agent claimed {claimed}; verdict: {verdict_text(record.verdict)}")


def _print_task(record: TaskRecord) -> None:
    spec, allocation, outcome = record.spec, record.allocation, record.outcome
    history = " → ".join(change.status for change in record.history)
    print(f"  {spec.task_id:<14} {record.status:<9} {history}")
    score = allocation.winning_score if allocation is not None else None
    if allocation is not None and score is not None:
        print(
            f"    winner {allocation.winning_agent_id} of {len(allocation.all_scores)} bids: "
            f"final {score.final_score:.3f} = composite {score.composite:.3f} "
            f"+ ucb {score.ucb_bonus:.3f} (calibrated p {score.calibrated_success_prob:.2f}, "
            f"reputation {score.reputation_score:.2f})"
        )
    if allocation is not None and allocation.reject_reason:
        print(f"    rejected: {allocation.reject_reason}")
    if allocation is not None:
        for bid in allocation.all_bids:
            if bid.fallback:
                why = shorten(one_line(bid.fallback_reason or ""), 160)
                print(f"    {bid.agent_id}'s bid is a fallback: {why}")
    if outcome is not None:
        said = f": {shorten(one_line(outcome.summary), MAX_TEXT_CHARS)!r}" if outcome.summary else ""
        cost = f"${outcome.actual_cost_usd:.4f}"
        print(f"    outcome: {_how_it_ended(record)} in {_steps(outcome.actual_steps)}, {cost}{said}")
        _print_verdict(record)


def _bill_text(*bills: ModelBill) -> str:
    """A decision's model bill, or the average of several decisions'."""
    count = len(bills)
    calls = sum(b.model_calls for b in bills) / count
    prompt = sum(b.prompt_tokens for b in bills) / count
    completion = sum(b.completion_tokens for b in bills) / count
    seconds = sum(b.model_seconds for b in bills) / count
    return f"{calls:g} call(s), {prompt:g} prompt + {completion:g} completion tokens, {seconds:.2f} s"


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"
