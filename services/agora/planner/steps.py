"""The planner's model calls: estimate a task's complexity, make a plan, verify a subgoal's
result, replan after a failure, synthesize the final answer.

Every call asks the model for a structured answer (`complete_json`) and checks it: a plan the
model drafts is validated as a DAG (`agora.core.planning.validate_plan`), and one that does not
parse or does not validate is sent back with every problem named, up to `attempts` times,
before the planner gives up with `PlanNotMade`.

Each call goes to a model of the tier the plan's `PlanningConfig` names for it
(`agora.core.planning.model_tier`), through the SDK's `ModelRouter` (`PlannerModels`): the
tier's first model, then down the router's fallback chain when that one fails. A planner with
one model sends every tier to it.

`offline_answers` makes the deterministic offline model a planner too: it recognises these
prompts and answers with valid plans, verifications that follow the reported outcome, and
syntheses, so the embedded default and the tests plan without a network.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, Field

from agora.core.limits import MAX_ITEMS, MAX_NOTE_CHARS, MAX_SKILL_TAG_CHARS, Text
from agora.core.planning import (
    MAX_PLAN_SUBGOALS,
    SUBGOAL_ID_CHARS,
    InvalidPlan,
    Plan,
    PlanningCall,
    PlanningConfig,
    PlanNotMade,
    SubGoal,
    SubGoalId,
    VerificationResult,
    merge_replan,
    model_tier,
    validate_plan,
)
from agora.llm import (
    ChatMessage,
    Completion,
    ModelClient,
    ModelOutputInvalid,
    ToolChoice,
    ToolSpec,
    complete_json,
)
from agora.sdk import ModelRouter, ModelSpec, ModelTier
from agora.sdk.models import RoutingRule

PLAN_ATTEMPTS = 3
"""Drafts asked for before the planner gives up on a plan (the first and two corrections)."""
ANSWER_ATTEMPTS = 2
"""Calls for an estimate, a verdict, a look-ahead or a synthesis: the first, and one more that
tells the model what was wrong."""

ESTIMATE_PROMPT = "You estimate how many tool calls an AI agent needs for a task."
PLAN_PROMPT = "You plan long tasks for a market of AI agents as a DAG of subgoals."
REPLAN_PROMPT = "You repair a plan for a market of AI agents after a subgoal failed."
VERIFY_PROMPT = "You verify whether a subgoal's result meets its success criterion."
SYNTHESIZE_PROMPT = "You write the final answer to a task from the results of its subgoals."
LOOKAHEAD_PROMPT = "You look ahead: before an agent starts a subgoal, you simulate ways to do it."


def _tier_mark(tier: ModelTier) -> str:
    """What a call's step name carries to be routed to `tier` (see `PlannerModels`)."""
    return f"[tier:{tier.value}]"


class PlannerModels:
    """The planner's models, by tier: `for_call(config, call)` is a model client whose every
    call goes through a `ModelRouter` to a model of the tier `config` names for `call`, and on a
    failure down the router's fallback chain (by default balanced, fast, powerful). The router's
    rules route by a tier mark in the step name, so a tier without a model of its own falls
    back like any failed call."""

    def __init__(
        self,
        models: Sequence[ModelSpec],
        clients: Mapping[str, ModelClient],
        *,
        fallback_chain: Sequence[ModelTier] | None = None,
    ) -> None:
        rules = [RoutingRule(contains=_tier_mark(tier), tier=ModelTier(tier.value)) for tier in ModelTier]
        self.router = ModelRouter(models, clients, routing_rules=rules, fallback_chain=fallback_chain)
        self._clients = dict(clients)
        self.by_tier = len({self.router.candidates(_tier_mark(tier))[0].model_id for tier in ModelTier}) > 1
        """Whether the tiers go to different models (with one model, a call's tier changes nothing)."""

    @classmethod
    def single(cls, client: ModelClient) -> PlannerModels:
        """One model for every tier."""
        spec = ModelSpec(model_id=getattr(client, "model", None) or client.backend, tier=ModelTier.BALANCED)
        return cls([spec], {spec.model_id: client})

    def for_call(self, config: PlanningConfig, call: PlanningCall) -> ModelClient:
        return self.for_tier(model_tier(config, call), call)

    def for_tier(self, tier: ModelTier, call: PlanningCall) -> ModelClient:
        step = f"planning.{call.value} {_tier_mark(tier)}"
        first = self.router.candidates(step)[0]
        return _RoutedModel(self.router, step, self._clients[first.model_id].backend)


class _RoutedModel:
    """A `ModelClient` whose calls go through a router as one step (`ModelRouter.complete`).
    Planning asks for JSON and offers no tools."""

    supports_tools = False

    def __init__(self, router: ModelRouter, step: str, backend: str) -> None:
        self._router = router
        self.step = step
        self.backend = backend

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice = "auto",
    ) -> Completion:
        routed = await self._router.complete(
            self.step, messages, json_schema=json_schema, temperature=temperature, max_tokens=max_tokens
        )
        return routed.completion

    async def aclose(self) -> None:
        return None  # the clients stay their creator's to close


class ComplexityEstimate(BaseModel):
    estimated_steps: int = Field(ge=1, le=1000)
    rationale: str = Field(default="", max_length=500)


class SubGoalDraft(BaseModel):
    """A subgoal as the model proposes it (status and progress are the planner's)."""

    id: SubGoalId
    description: Text = Field(min_length=1)
    success_criterion: Text = Field(min_length=1)
    dependencies: list[SubGoalId] = Field(default_factory=list, max_length=MAX_PLAN_SUBGOALS)
    tool_hints: list[Annotated[str, Field(max_length=MAX_SKILL_TAG_CHARS)]] = Field(
        default_factory=list, max_length=MAX_ITEMS
    )
    fallback_strategy: Text = ""


class PlanDraft(BaseModel):
    subgoals: list[SubGoalDraft] = Field(min_length=1, max_length=MAX_PLAN_SUBGOALS)
    total_estimated_steps: int = Field(ge=0, le=10_000)


DRAFT_TEXT_CHARS = 120
"""The longest description, success criterion or fallback a draft's schema asks for: a subgoal
is a line, and a small model held to the full text limit writes until its output limit."""
DRAFT_TOKENS_PER_SUBGOAL = 200
"""A subgoal of a draft at its schema's bounds, as a model lays JSON out: SmolLM2-135M wrote
up to 180 tokens a subgoal (12 subgoals in 1,065 tokens, 4 in 729)."""
DRAFT_TOKENS_CEILING = 3072
"""The most a draft may write, whatever `max_subgoals` says: within a 4,096-token slot of the
local model server beside the prompt. A plan of more subgoals than fit is asked for in fewer."""


DRAFT_TOKENS_BASE = 64
"""A draft's tokens beside its subgoals: its braces and its step count."""
DRAFT_SUBGOALS_CEILING = (DRAFT_TOKENS_CEILING - DRAFT_TOKENS_BASE) // DRAFT_TOKENS_PER_SUBGOAL
"""The most subgoals one draft is asked for (15): those that fit its output limit."""


def drafted_subgoals(config: PlanningConfig) -> int:
    """The most subgoals a draft is asked for: the plan's `max_subgoals`, as many as fit."""
    return min(config.max_subgoals, DRAFT_SUBGOALS_CEILING)


def draft_max_tokens(config: PlanningConfig) -> int:
    """The output limit of a draft: room for each subgoal it may hold at its bounds (a limit
    below that cuts off a model that writes as many as it is allowed)."""
    return DRAFT_TOKENS_BASE + DRAFT_TOKENS_PER_SUBGOAL * drafted_subgoals(config)


DRAFT_TOOL_HINTS = 3
"""The most tool hints a draft's schema asks for per subgoal."""


def draft_schema(config: PlanningConfig, skills: Sequence[str] = ()) -> dict[str, Any]:
    """The schema a plan draft is asked for: `PlanDraft`'s, narrowed to what this plan may hold
    (at most `config.max_subgoals` subgoals, a line of text each, the id's length in its
    pattern, where llama.cpp's grammar, which drops `maxLength` beside a `pattern`, holds it),
    with the step count first, so an answer cut off at its output limit is cut in its subgoals
    rather than before its count; its tool hints among `skills` when the plan names some. The
    answer is still validated as a `PlanDraft`."""
    schema = copy.deepcopy(PlanDraft.model_json_schema())
    subgoal = schema["$defs"]["SubGoalDraft"]["properties"]
    slug = f"^[a-z][a-z0-9_]{{0,{SUBGOAL_ID_CHARS - 1}}}$"
    subgoal["id"]["pattern"] = slug
    subgoal["dependencies"]["items"]["pattern"] = slug
    subgoal["dependencies"]["maxItems"] = drafted_subgoals(config)
    for text in ("description", "success_criterion", "fallback_strategy"):
        subgoal[text]["maxLength"] = DRAFT_TEXT_CHARS
    subgoal["tool_hints"]["maxItems"] = DRAFT_TOOL_HINTS
    if skills:
        # A subgoal's hints are the skills its market task requires: one outside the skills the
        # plan was given finds no agent.
        subgoal["tool_hints"]["items"] = {"enum": list(dict.fromkeys(skills))}
    properties = schema["properties"]
    properties["subgoals"]["maxItems"] = drafted_subgoals(config)
    schema["properties"] = {"total_estimated_steps": properties["total_estimated_steps"], **properties}
    return schema


class VerificationAnswer(BaseModel):
    result: VerificationResult
    reason: str = Field(default="", max_length=MAX_NOTE_CHARS)


class SynthesisAnswer(BaseModel):
    final_output: Text


class CandidatePath(BaseModel):
    approach: str = Field(min_length=1, max_length=MAX_NOTE_CHARS)
    expected_outcome: str = Field(default="", max_length=MAX_NOTE_CHARS)
    confidence: float = Field(ge=0.0, le=1.0)
    """How likely the path meets the success criterion, as the model simulates it."""


class LookaheadAnswer(BaseModel):
    paths: list[CandidatePath] = Field(min_length=1, max_length=8)


async def estimate_complexity(model: ModelClient, task: str) -> int:
    """The model's estimate of the tool calls `task` needs."""
    messages = [
        ChatMessage(role="system", content=f"{ESTIMATE_PROMPT} Count the tool calls, not the words."),
        ChatMessage(role="user", content=f"Task: {task}"),
    ]
    estimate, _ = await complete_json(model, messages, ComplexityEstimate, attempts=ANSWER_ATTEMPTS)
    return estimate.estimated_steps


def _rules(config: PlanningConfig) -> str:
    return (
        f"Break the task into at most {drafted_subgoals(config)} subgoals. Each has an id (a snake_case slug "
        "of at most 20 characters: a lower-case letter, then lower-case letters, digits or underscores), "
        "a description, a verifiable success criterion, the ids of the subgoals it depends on (no "
        "cycles), tool hints, and a fallback strategy. Subgoals that do not depend on each other run "
        "at the same time on different agents."
    )


async def create_plan(
    model: ModelClient,
    task: str,
    config: PlanningConfig,
    *,
    skills: Sequence[str] = (),
    attempts: int = PLAN_ATTEMPTS,
) -> Plan:
    """A valid plan for `task`, drafted by the model and corrected until it validates."""
    messages = [
        ChatMessage(role="system", content=f"{PLAN_PROMPT} {_rules(config)}"),
        ChatMessage(role="user", content=f"Task: {task}\nSkills available: {', '.join(skills) or 'any'}"),
    ]
    return await _drafted(model, messages, config, attempts, lambda draft: _plan_of(task, draft), skills)


async def replan(
    model: ModelClient,
    plan: Plan,
    failed: SubGoal,
    config: PlanningConfig,
    *,
    skills: Sequence[str] = (),
    attempts: int = PLAN_ATTEMPTS,
) -> Plan:
    """The next version of `plan` after `failed` could not be completed: the model proposes the
    remaining subgoals (their tool hints among `skills`, when given); completed ones are kept as
    they are (`merge_replan`)."""
    current = json.dumps(
        [
            s.model_dump(mode="json", include={"id", "description", "dependencies", "tool_hints", "status"})
            for s in plan.subgoals
        ]
    )
    messages = [
        ChatMessage(role="system", content=f"{REPLAN_PROMPT} {_rules(config)} Keep completed subgoals."),
        ChatMessage(
            role="user",
            content=(
                f"Task: {plan.task}\nCurrent plan (version {plan.version}): {current}\n"
                f"Failed subgoal: {failed.id}: {failed.failure_reason or 'no reason given'}\n"
                f"Its fallback strategy: {failed.fallback_strategy or 'none'}\n"
                f"Skills available: {', '.join(skills) or 'any'}"
            ),
        ),
    ]
    return await _drafted(
        model,
        messages,
        config,
        attempts,
        lambda draft: merge_replan(plan, _plan_of(plan.task, draft), config),
        skills,
    )


async def _drafted(
    model: ModelClient,
    messages: list[ChatMessage],
    config: PlanningConfig,
    attempts: int,
    build: Callable[[PlanDraft], Plan],
    skills: Sequence[str] = (),
) -> Plan:
    problems: list[str] = []
    for _ in range(attempts):
        try:
            draft, completion = await complete_json(
                model,
                messages,
                PlanDraft,
                json_schema=draft_schema(config, skills),
                max_tokens=draft_max_tokens(config),
            )
        except ModelOutputInvalid as exc:
            problems = [f"the answer is not a valid plan draft: {exc.problem[:500]}"]
            answer = exc.text
        else:
            try:
                plan = build(draft)
                validate_plan(plan, config)
                return plan
            except InvalidPlan as exc:
                problems = exc.problems
                answer = completion.text
        messages = [
            *messages,
            ChatMessage(role="assistant", content=answer[:MAX_NOTE_CHARS]),
            ChatMessage(
                role="user", content="Fix these problems and answer again:\n- " + "\n- ".join(problems)
            ),
        ]
    raise PlanNotMade(f"no valid plan after {attempts} drafts: " + "; ".join(problems))


def _plan_of(task: str, draft: PlanDraft) -> Plan:
    return Plan(
        task=task,
        subgoals=[SubGoal(**d.model_dump()) for d in unrepeated(draft.subgoals)],
        total_estimated_steps=draft.total_estimated_steps,
    )


def unrepeated(subgoals: Sequence[SubGoalDraft]) -> list[SubGoalDraft]:
    """The draft's subgoals with what a small model repeats taken out where its meaning is
    plain: a subgoal that repeats an earlier one word for word is that one; one that reuses an
    earlier id for other work, when no subgoal depends on that id, gets the id with a number.
    An id that some subgoal depends on and that names two different subgoals is left for
    `validate_plan` to refuse: which one was meant cannot be told."""
    kept: list[SubGoalDraft] = []
    for subgoal in subgoals:
        if subgoal not in kept:
            kept.append(subgoal)
    depended_on = {dependency for s in kept for dependency in s.dependencies}
    used = {s.id for s in kept}
    seen: set[str] = set()
    renamed: list[SubGoalDraft] = []
    for subgoal in kept:
        if subgoal.id in seen and subgoal.id not in depended_on:
            number = 2
            while (candidate := f"{subgoal.id[: SUBGOAL_ID_CHARS - 1 - len(str(number))]}_{number}") in used:
                number += 1
            used.add(candidate)
            subgoal = subgoal.model_copy(update={"id": candidate})
        seen.add(subgoal.id)
        renamed.append(subgoal)
    return renamed


async def verify(model: ModelClient, subgoal: SubGoal, outcome: str, output: str) -> VerificationAnswer:
    """Whether a subgoal's result meets its success criterion: PASS, PARTIAL (retry) or FAIL. An
    answer that is not a verdict counts as FAIL with the reason; a model that cannot be reached
    raises (the caller retries)."""
    messages = [
        ChatMessage(role="system", content=f"{VERIFY_PROMPT} Answer PASS, PARTIAL or FAIL with a reason."),
        ChatMessage(
            role="user",
            content=(
                f"Subgoal: {subgoal.id}: {subgoal.description}\n"
                f"Success criterion: {subgoal.success_criterion}\n"
                f"Outcome: {outcome}\nResult: {output}"
            ),
        ),
    ]
    try:
        answer, _ = await complete_json(model, messages, VerificationAnswer, attempts=ANSWER_ATTEMPTS)
    except ModelOutputInvalid as exc:
        return VerificationAnswer(
            result=VerificationResult.FAIL, reason=f"the verifier could not answer: {exc}"
        )
    return answer


async def lookahead(
    model: ModelClient, task: str, subgoal: SubGoal, paths: int, previous_failure: str = ""
) -> CandidatePath | None:
    """FLARE-style lookahead: the model simulates `paths` ways to carry out `subgoal` and how
    each would end; the most promising one (highest confidence, first on ties) is the approach
    the agent is given. None when the answer holds no usable path (the subgoal then goes out
    without an approach); a model that cannot be reached raises."""
    failure = f"\nThe last attempt failed: {previous_failure}" if previous_failure else ""
    messages = [
        ChatMessage(
            role="system",
            content=f"{LOOKAHEAD_PROMPT} Propose {paths} distinct paths, each with its expected "
            "outcome and your confidence (0-1) that it meets the success criterion.",
        ),
        ChatMessage(
            role="user",
            content=(
                f"Task: {task}\nSubgoal: {subgoal.id}: {subgoal.description}\n"
                f"Success criterion: {subgoal.success_criterion}{failure}"
            ),
        ),
    ]
    try:
        answer, _ = await complete_json(model, messages, LookaheadAnswer, attempts=ANSWER_ATTEMPTS)
    except ModelOutputInvalid:
        return None
    return max(answer.paths[:paths], key=lambda path: path.confidence)


async def synthesize(model: ModelClient, plan: Plan) -> str:
    """The final answer, in one model call, from the completed subgoals' summaries."""
    results = "\n".join(f"- {s.id}: {s.output_summary}" for s in plan.subgoals if s.output_summary)
    messages = [
        ChatMessage(role="system", content=SYNTHESIZE_PROMPT),
        ChatMessage(role="user", content=f"Task: {plan.task}\nResults:\n{results or '(none)'}"),
    ]
    answer, _ = await complete_json(model, messages, SynthesisAnswer, attempts=ANSWER_ATTEMPTS)
    return answer.final_output


# -- the offline model as a planner ----------------------------------------------------------------

_OFFLINE_SHAPE = (
    ("research_sources", "Find the sources needed for", (), "the sources are listed"),
    ("collect_data", "Collect the data needed for", (), "the data is collected"),
    (
        "analyse",
        "Analyse the sources and data for",
        ("research_sources", "collect_data"),
        "findings are stated",
    ),
    ("outline", "Outline the answer to", ("research_sources",), "an outline exists"),
    ("write_draft", "Write the answer to", ("analyse", "outline"), "a complete draft exists"),
    ("check_facts", "Check the findings behind", ("analyse",), "every finding is checked"),
)
"""The offline planner's plan: six subgoals in three waves."""


def offline_answers(messages: Sequence[ChatMessage]) -> str | None:
    """The offline model's answers to the planner's prompts (None: not a planner prompt)."""
    if not messages:
        return None
    system, user = messages[0].content, messages[-1].content
    task = _field(messages[1].content if len(messages) > 1 else "", "Task") or "the task"
    if system.startswith(ESTIMATE_PROMPT):
        steps = 2 + len(task.split()) // 2  # "Say hello": 3 steps, no plan; a sentence-long task: a plan
        return json.dumps({"estimated_steps": steps, "rationale": "offline estimate from the task's length"})
    if system.startswith(PLAN_PROMPT):
        skills = [s.strip() for s in (_field(user, "Skills available") or "").split(",") if s.strip()]
        return json.dumps(_offline_plan(task, [] if skills == ["any"] else skills))
    if system.startswith(REPLAN_PROMPT):
        return json.dumps(_offline_replan(messages[1].content))
    if system.startswith(VERIFY_PROMPT):
        outcome = (_field(user, "Outcome") or "").lower()
        result = {"succeeded": "PASS", "partial": "PARTIAL"}.get(outcome, "FAIL")
        return json.dumps({"result": result, "reason": f"the agent reported: {outcome or 'nothing'}"})
    if system.startswith(LOOKAHEAD_PROMPT):
        subgoal = _field(user, "Subgoal") or "the subgoal"
        count = int(match.group(1)) if (match := re.search(r"Propose (\d+)", system)) else 2
        paths = [
            {
                "approach": f"{style} {subgoal.split(': ', 1)[-1]}"[:500],
                "expected_outcome": "the success criterion is met",
                "confidence": round(0.9 - 0.1 * index, 2),
            }
            for index, style in enumerate(
                ("Work step by step:", "Start from the sources:", "Draft, then check:")
            )
        ][: max(1, count)]
        return json.dumps({"paths": paths})
    if system.startswith(SYNTHESIZE_PROMPT):
        lines = [line[2:] for line in user.splitlines() if line.startswith("- ")]
        return json.dumps({"final_output": f"{task}: " + " ".join(lines) if lines else f"{task}: no results"})
    return None


def _field(text: str, name: str) -> str | None:
    match = re.search(rf"^{re.escape(name)}: (.*)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None


def _offline_plan(task: str, skills: list[str]) -> dict[str, object]:
    digest = hashlib.sha256(task.encode()).digest()
    subgoals = []
    for index, (subgoal_id, verb, dependencies, criterion) in enumerate(_OFFLINE_SHAPE):
        hints = [skills[(digest[index] + index) % len(skills)]] if skills else []
        subgoals.append(
            {
                "id": subgoal_id,
                "description": f"{verb}: {task}"[:500],
                "success_criterion": criterion,
                "dependencies": list(dependencies),
                "tool_hints": hints,
                "fallback_strategy": f"Try another way to {verb.lower()}: {task}"[:500],
            }
        )
    return {"subgoals": subgoals, "total_estimated_steps": 2 * len(subgoals)}


def _offline_replan(request: str) -> dict[str, object]:
    """The current plan again, the failed subgoal described by its fallback strategy."""
    current = json.loads(_field(request, f"Current plan (version {_version(request)})") or "[]")
    failed_id = (_field(request, "Failed subgoal") or "").split(":", 1)[0]
    fallback = _field(request, "Its fallback strategy") or "try another way"
    subgoals = [
        {
            "id": s["id"],
            "description": fallback if s["id"] == failed_id else s["description"],
            "success_criterion": f"{s['id']} is done",
            "dependencies": s["dependencies"],
            "tool_hints": s.get("tool_hints", []),
        }
        for s in current
    ]
    return {"subgoals": subgoals, "total_estimated_steps": 2 * len(subgoals)}


def _version(request: str) -> str:
    match = re.search(r"Current plan \(version (\d+)\)", request)
    return match.group(1) if match else "1"
