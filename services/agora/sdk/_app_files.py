"""The agents and graphs an agent app serves, loaded from the Python files that define them."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from agora.sdk._a2a import A2AAgent
from agora.sdk._agent import Agent
from agora.sdk._graph import CompiledGraph

__all__ = ["a2a_agents", "file_list", "load_agents", "load_app", "load_apps"]

T = TypeVar("T")


def load_agents(path: Path) -> list[Agent]:
    """The agents a Python file defines: its `agents` list, else every module-level `Agent`."""
    agents, _ = load_app(path)
    if not agents:
        raise ValueError(f"{path} defines no agents (an `agents` list of `Agent`, or module-level `Agent`s)")
    return agents


def load_apps(paths: Sequence[Path]) -> tuple[list[Agent], list[CompiledGraph[Any]]]:
    """The agents and graphs of several files (`load_app` each), together."""
    agents: list[Agent] = []
    graphs: list[CompiledGraph[Any]] = []
    for path in paths:
        more_agents, more_graphs = load_app(path)
        agents += more_agents
        graphs += more_graphs
    return agents, graphs


def a2a_agents(value: str) -> list[Agent]:
    """The A2A agents a setting names: `name=card-url` entries separated by commas."""
    agents: list[Agent] = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        name, equals, url = entry.partition("=")
        if not equals or not name.strip() or not url.strip():
            raise ValueError(f"an A2A agent is named as name=card-url, not {entry!r}")
        agents.append(A2AAgent(name.strip(), url.strip()))
    return agents


def file_list(value: str) -> list[Path]:
    """The files named in a setting that may name several (separated like PATH entries)."""
    return [Path(entry) for entry in value.split(os.pathsep) if entry]


def load_app(path: Path) -> tuple[list[Agent], list[CompiledGraph[Any]]]:
    """What a Python file puts in an agent app: its agents (its `agents` list, else every
    module-level `Agent`) and its graphs (its `graphs` list, else every module-level compiled
    graph). One of the two may be empty, not both."""
    spec = importlib.util.spec_from_file_location(f"agora_agents_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agents = _declared(module, "agents", Agent)
    graphs = _declared(module, "graphs", CompiledGraph)
    if not agents and not graphs:
        raise ValueError(f"{path} defines no agents and no graphs (an `agents` or `graphs` list)")
    return agents, graphs


def _declared(module: Any, name: str, kind: type[T]) -> list[T]:
    declared = getattr(module, name, None)
    found = (
        list(declared) if declared is not None else [v for v in vars(module).values() if isinstance(v, kind)]
    )
    if not all(isinstance(item, kind) for item in found):
        raise ValueError(f"`{name}` lists something that is not a {kind.__name__}")
    return found
