"""Every activity and workflow is declared once with its types (`ActivityRef`, `WorkflowRef`) and
reached only through that declaration: no step is scheduled or registered by its name outside
the workflow host, every declaration is registered by exactly one app, and the names the runs in
flight have in their histories stay as they are. Read from the source, without Dapr."""

from __future__ import annotations

import ast
import functools
import importlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agora.runtime.workflows import ActivityRef, WorkflowRef

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "services"
SOURCES = [SERVICES / "agora", ROOT / "bench", ROOT / "examples"]
HOST = SERVICES / "agora" / "runtime" / "workflows.py"

ENGINE_CALLS = frozenset(
    {
        "call_activity",
        "register_activity",
        "call_child_workflow",
        "register_workflow",
        "wait_for_external_event",
    }
)
"""The engine's own ways to schedule or register a step by its name: only the workflow host uses
them, for the declared references."""
REGISTRATIONS = frozenset({"activity", "workflow"})
"""`WorkflowHost.activity(ref, work)`, `WorkflowHost.workflow(ref, steps)`."""
DECLARATIONS = frozenset({"ActivityRef", "WorkflowRef"})


@functools.cache
def sources() -> list[tuple[Path, ast.Module]]:
    """Every Python file of the services, the benchmarks and the examples, parsed."""
    paths = sorted(path for root in SOURCES for path in root.rglob("*.py"))
    return [(path, ast.parse(path.read_text())) for path in paths]


def calls(tree: ast.AST, attributes: frozenset[str]) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in attributes
    ]


def named_by_string(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def violations(tree: ast.AST, path: Path) -> list[str]:
    """Where a step is scheduled or registered other than through its declared reference."""
    found = []
    for call in calls(tree, ENGINE_CALLS):
        assert isinstance(call.func, ast.Attribute)
        if path != HOST:
            found.append(f"{path}:{call.lineno}: {call.func.attr}( outside the workflow host")
        elif call.args and named_by_string(call.args[0]):
            found.append(f"{path}:{call.lineno}: {call.func.attr}( with a name written out")
    for call in calls(tree, REGISTRATIONS):
        if call.args and named_by_string(call.args[0]):
            found.append(f"{path}:{call.lineno}: registered by a string, not by its reference")
    return found


def test_a_step_scheduled_or_registered_by_its_name_is_found() -> None:
    elsewhere = SERVICES / "agora" / "planner" / "workflow.py"
    assert violations(ast.parse("ctx.call_activity(SAVE.name, input=step)"), elsewhere)
    assert violations(ast.parse('ctx.wait_for_external_event("decision.e1")'), elsewhere)
    assert violations(ast.parse('host.activity("plan.save", work)'), elsewhere)
    assert violations(ast.parse('host.workflow(f"plan_{kind}", steps)'), elsewhere)
    assert violations(ast.parse('ctx.call_child_workflow("subgoal_run", input=job)'), HOST)
    assert not violations(ast.parse("host.activity(SAVE, work)"), elsewhere)
    assert not violations(ast.parse("ctx.call_activity(self.name, input=argument)"), HOST)


def test_no_step_is_scheduled_or_registered_by_its_name_outside_the_workflow_host() -> None:
    found = [v for path, tree in sources() for v in violations(tree, path)]
    assert found == []


@dataclass(frozen=True)
class Site:
    path: Path
    line: int


def module_of(path: Path) -> Any:
    parts = path.relative_to(SERVICES).with_suffix("").parts
    return importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))


def declared() -> dict[int, tuple[Any, Site]]:
    """Every module-level `ActivityRef`/`WorkflowRef` of the services, by identity."""
    found: dict[int, tuple[Any, Site]] = {}
    for path, tree in sources():
        if not path.is_relative_to(SERVICES):
            continue
        for node in tree.body:
            value: ast.expr | None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign):
                targets, value = [node.target], node.value
            else:
                continue
            if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
                continue
            if value.func.id in DECLARATIONS:
                for target in targets:
                    assert isinstance(target, ast.Name), (
                        f"{path}:{node.lineno}: declare a reference by a name"
                    )
                    ref = getattr(module_of(path), target.id)
                    found[id(ref)] = (ref, Site(path, node.lineno))
    return found


def registered() -> list[tuple[Any, Site]]:
    """What each `host.activity(...)`/`host.workflow(...)` of the services registers, as its first
    argument reads in its module."""
    found = []
    for path, tree in sources():
        if not path.is_relative_to(SERVICES):
            continue
        for call in calls(tree, REGISTRATIONS):
            if len(call.args) < 2:
                continue
            site = Site(path, call.lineno)
            expression = ast.Expression(call.args[0])
            try:
                ref = eval(compile(expression, str(path), "eval"), vars(module_of(path)))
            except NameError:
                raise AssertionError(f"{site}: register a reference declared at its module's level") from None
            if isinstance(ref, ActivityRef | WorkflowRef):
                found.append((ref, site))
    return found


def test_every_declared_activity_and_workflow_is_registered_by_exactly_one_host() -> None:
    declarations = declared()
    registrations = registered()
    times = Counter(id(ref) for ref, _ in registrations)

    assert len(declarations) == sum(len(names) for names in HISTORY_NAMES.values()), "every one is found"
    never = [f"{ref!r} at {site}" for key, (ref, site) in declarations.items() if times[key] == 0]
    assert never == [], "declared, never registered: no app would run it"
    twice = [f"{ref!r}" for key, (ref, _) in declarations.items() if times[key] > 1]
    assert twice == [], "registered twice: two apps would take the same work"
    undeclared = [f"{ref!r} at {site}" for ref, site in registrations if id(ref) not in declarations]
    assert undeclared == [], "registered without a module-level declaration"


def test_no_two_activities_or_workflows_share_a_name() -> None:
    refs = [ref for ref, _ in declared().values()]
    for kind in (ActivityRef, WorkflowRef):
        names = Counter(ref.name for ref in refs if isinstance(ref, kind))
        assert [name for name, count in names.items() if count > 1] == []


HISTORY_NAMES = {
    "activity": [
        "agent.deadline", "agent.execute", "agent.report", "agent.resume",
        "debate.announce", "debate.answer", "debate.calibrate", "debate.decision-on-record",
        "debate.fail", "debate.gate", "debate.judge", "debate.round", "debate.route", "debate.save",
        "debate.stop",
        "graph.check_wait", "graph.decide", "graph.decision-on-record", "graph.fail", "graph.step",
        "graph.wait_ended",
        "plan.announce", "plan.decision-on-record", "plan.draft", "plan.estimate", "plan.fail",
        "plan.replan", "plan.save", "plan.start_wave", "plan.stop", "plan.synthesize",
        "subgoal.check", "subgoal.dispatch", "subgoal.lookahead", "subgoal.verify",
    ],
    "workflow": ["agent_run", "debate_run", "graph_run", "plan_run", "subgoal_run"],
}  # fmt: skip
"""The names in the histories of the runs in flight: renaming one breaks them."""


def test_the_names_in_the_histories_of_runs_in_flight_are_kept() -> None:
    refs = [ref for ref, _ in declared().values()]
    assert {
        "activity": sorted(ref.name for ref in refs if isinstance(ref, ActivityRef)),
        "workflow": sorted(ref.name for ref in refs if isinstance(ref, WorkflowRef)),
    } == HISTORY_NAMES
