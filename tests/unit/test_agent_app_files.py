"""The agents and graphs an agent app serves, read from the Python files that define them: a
file's `agents` list (else its module-level agents), and a file defining neither agents nor
graphs, or listing something else, is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agora.sdk._app_files import file_list, load_agents, load_app, load_apps

HANDLER = """
from agora.sdk import Agent
from agora.sdk._agent import HandlerResult

async def done(award):
    return HandlerResult(success=True)

"""


def written(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(HANDLER + body)
    return path


def test_a_file_s_agents_list_is_what_it_serves(tmp_path: Path) -> None:
    path = written(
        tmp_path,
        "listed",
        'listed = Agent("listed", handler=done, skills=["s"])\n'
        'other = Agent("other", handler=done, skills=["s"])\n'
        "agents = [listed]\n",
    )

    assert [a.agent_id for a in load_agents(path)] == ["listed"]


def test_without_a_list_every_module_level_agent_is_served(tmp_path: Path) -> None:
    path = written(
        tmp_path,
        "loose",
        'first = Agent("first", handler=done, skills=["s"])\n'
        'second = Agent("second", handler=done, skills=["s"])\n',
    )

    agents, graphs = load_app(path)

    assert ([a.agent_id for a in agents], graphs) == (["first", "second"], [])


def test_the_agents_of_several_files_are_served_together(tmp_path: Path) -> None:
    one = written(tmp_path, "one", 'agents = [Agent("a1", handler=done, skills=["s"])]\n')
    two = written(tmp_path, "two", 'agents = [Agent("a2", handler=done, skills=["s"])]\n')

    agents, graphs = load_apps(file_list(f"{one}{os.pathsep}{os.pathsep}{two}"))

    assert ([a.agent_id for a in agents], graphs) == (["a1", "a2"], [])


def test_a_file_defining_no_agents_and_no_graphs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="defines no agents and no graphs"):
        load_app(written(tmp_path, "empty", "x = 1\n"))


def test_an_agents_list_naming_something_else_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="`agents` lists something that is not a Agent"):
        load_app(written(tmp_path, "mixed", 'agents = [Agent("a", handler=done, skills=["s"]), "b"]\n'))


def test_a_file_that_is_not_python_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "agents.txt"
    path.write_text("agents = []\n")

    with pytest.raises(ValueError, match="is not a Python file"):
        load_app(path)
