"""The layers of the code, read from its imports: the core imports nothing but the core (and
nothing from Dapr), the runtime nothing above itself, the agent SDK nothing above the runtime
and the model clients, no service imports another, and no
module's imports lead back to it. Modules split by idea say their idea and their names."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

SERVICES_ROOT = Path(__file__).resolve().parents[2] / "services"
PACKAGE = SERVICES_ROOT / "agora"
SERVICES = {"registry", "taskboard", "reputation", "allocator", "worker", "uncertainty", "escalation",
            "planner", "debate", "console"}  # fmt: skip
ONE_IDEA_PER_MODULE = ["core/escalation", "core/outcomes", "core/uncertainty", "core/triage", "core/plans",
                       "core/debate", "worker", "cli", "console"]  # fmt: skip
"""Packages split one module per idea: each module has a docstring saying it and an `__all__`."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SERVICES_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imported(path: Path) -> Iterator[str]:
    """Every module `path` imports (`from a import b` imports `a`, and `a.b` when that is a
    module), wherever in the file."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


@cache
def graph() -> dict[str, frozenset[str]]:
    """Agora's modules and the Agora modules each imports."""
    known = modules()
    return {
        name: frozenset(target for target in imported(path) if target in known and target != name)
        for name, path in known.items()
    }


def layer(module: str) -> str:
    """`core`, `runtime`, `llm`, a service's name, `cli`, `harness`... (`agora` for the package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "agora"


def crossings(allowed: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} imports {target}"
        for module, targets in sorted(graph().items())
        for target in sorted(targets)
        if layer(module) in allowed and layer(target) not in allowed[layer(module)]
    ]


def test_the_core_imports_only_the_core_and_nothing_from_dapr() -> None:
    assert crossings({"core": {"core"}}) == []
    for name, path in modules().items():
        if layer(name) == "core":
            dapr = [m for m in imported(path) if m == "dapr" or m.startswith("dapr.")]
            assert dapr == [], f"{name} imports {dapr}"


def test_the_runtime_and_the_model_clients_import_nothing_above_them() -> None:
    assert crossings({"runtime": {"core", "runtime"}, "llm": {"core", "runtime", "llm"}}) == []


def test_the_agent_sdk_imports_nothing_above_it() -> None:
    assert crossings({"sdk": {"core", "runtime", "llm", "sdk"}}) == []


def test_no_service_imports_another() -> None:
    below = {"core", "runtime", "llm", "sdk"}  # agent runtimes (the worker) are built on the SDK
    assert crossings({service: below | {service} for service in SERVICES}) == []


def test_no_module_imports_lead_back_to_it() -> None:
    edges = graph()
    done: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycles.append([*path[path.index(module) :], module])
            return
        if module in done:
            return
        for target in sorted(edges[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(edges):
        visit(module, [])
    assert cycles == []


@pytest.mark.parametrize("folder", ONE_IDEA_PER_MODULE)
def test_a_module_of_one_idea_says_its_idea_and_its_names(folder: str) -> None:
    for path in sorted((PACKAGE / folder).glob("*.py")):
        if path.name == "__main__.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        assert ast.get_docstring(tree), f"{path.name}: no docstring saying its idea"
        names = [t.id for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign)
                 for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                 if isinstance(t, ast.Name)]  # fmt: skip
        assert "__all__" in names, f"{folder}/{path.name}: no __all__"
