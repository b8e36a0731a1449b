"""docs/reference.md, checked against the code: every default its table lists as matching the
reference has, in the code, the reference's value; and every difference it lists with a code
value still has that value, so the page cannot go stale either way.

A table row names the code by an importable location, `module:Path`: `Path` is dotted
attributes from the module (`TaskSpec.min_success_threshold`: a pydantic field's default, a
default factory called; a dataclass field's default; a class attribute, an enum member, a
constant), optionally indexed by a literal key (`DEFAULT_RECOVERY["unknown"]`), or ends in
`name(param)`: the default of parameter `param` of the function, method or class `name`
(a class: its `__init__`). Values are Python literals in backticks; an enum compares by its
value or its name, a tuple as the list it holds."""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import inspect
import math
import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

REFERENCE_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
MATCHING_HEADING = "## Defaults that match the reference"
DIFFERING_HEADING = "## Defaults and names that differ"

_LOCATION = re.compile(r"^[a-z_][\w.]*:[A-Za-z_][\w.\[\]\"'-]*(\(\w+\))?$")
_STEP = re.compile(r"\.?([A-Za-z_]\w*)|\[([^\]]+)\]")


class Row(NamedTuple):
    reference: str
    value: str
    location: str


def table(heading: str, value_column: str, location_column: str) -> list[Row]:
    """The rows of every table in the section under `heading` (up to the next `## ` heading;
    its `###` subsections included), by the named columns' cells."""
    lines = REFERENCE_PAGE.read_text().splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    rows: list[Row] = []
    header: list[str] | None = None
    for line in lines[start:end]:
        if not line.startswith("|"):
            header = None
            continue
        cells = _cells(line)
        if header is None:
            header = cells
        elif not all(set(cell) <= set("-: ") for cell in cells):
            rows.append(
                Row(cells[0], cells[header.index(value_column)], cells[header.index(location_column)])
            )
    assert rows, f"no table rows under {heading!r}"
    return rows


def _cells(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [cell.strip().replace("\\|", "|") for cell in cells]


def _unquoted(cell: str) -> str | None:
    """The text of a cell that is one backticked span, else None."""
    match = re.fullmatch(r"`([^`]*)`", cell)
    return match.group(1) if match else None


def resolve(location: str) -> Any:
    """The code's value at `location` (see the module docstring)."""
    assert _LOCATION.match(location), f"not a code location: {location!r}"
    module_name, _, path = location.partition(":")
    parameter = None
    if path.endswith(")"):
        path, _, parameter = path[:-1].partition("(")
    value: Any = importlib.import_module(module_name)
    position = 0
    while position < len(path):
        step = _STEP.match(path, position)
        assert step, f"cannot read {path[position:]!r} of {location!r}"
        position = step.end()
        name, key = step.groups()
        value = _attribute(value, name) if name else value[ast.literal_eval(key)]
    if parameter is None:
        return value
    target = value.__init__ if inspect.isclass(value) else value
    found = inspect.signature(target).parameters[parameter].default
    assert found is not inspect.Parameter.empty, f"{location}: {parameter} has no default"
    return found


def _attribute(value: Any, name: str) -> Any:
    """`value.name`, or the default of field `name` when `value` is a model or dataclass."""
    if inspect.isclass(value) and issubclass(value, BaseModel) and name in value.model_fields:
        field = value.model_fields[name]
        if field.default_factory is not None:
            return field.default_factory()  # type: ignore[call-arg]
        assert field.default is not PydanticUndefined, f"{value.__name__}.{name} is required"
        return field.default
    if inspect.isclass(value) and dataclasses.is_dataclass(value):
        members = {member.name: member for member in dataclasses.fields(value)}
        if name in members:
            member = members[name]
            if member.default_factory is not dataclasses.MISSING:
                return member.default_factory()
            return member.default
    return getattr(value, name)


def same(code: Any, reference: Any) -> bool:
    if isinstance(code, enum.Enum):
        return reference in (code.value, code.name)
    if isinstance(code, tuple | list) and isinstance(reference, tuple | list):
        return len(code) == len(reference) and all(same(c, r) for c, r in zip(code, reference, strict=True))
    if isinstance(code, float) and isinstance(reference, float):
        return math.isclose(code, reference, rel_tol=1e-12, abs_tol=1e-12)
    return type(code) is type(reference) and bool(code == reference)


def matching_rows() -> list[Any]:
    rows = table(MATCHING_HEADING, "reference value", "code")
    params = []
    for row in rows:
        location = _unquoted(row.location)
        assert location is not None, f"{row.reference}: the code cell is not one `location`"
        params.append(pytest.param(row, id=location))
    return params


def differing_rows() -> list[Any]:
    """Differences whose code cell is a location and whose code value is one literal."""
    rows = table(DIFFERING_HEADING, "code value", "code")
    checked = []
    for row in rows:
        location, value = _unquoted(row.location), _unquoted(row.value)
        if location is not None and _LOCATION.match(location) and value is not None:
            checked.append(pytest.param(row, id=location))
    return checked


def test_the_page_lists_defaults_of_both_kinds() -> None:
    assert len(matching_rows()) >= 100
    assert len(differing_rows()) >= 3


@pytest.mark.parametrize("row", matching_rows())
def test_a_default_listed_as_matching_has_the_reference_s_value_in_the_code(row: Row) -> None:
    reference = ast.literal_eval(_unquoted(row.value) or row.value)
    code = resolve(row.location.strip("`"))
    assert same(code, reference), f"{row.reference}: the reference says {reference!r}, the code has {code!r}"


@pytest.mark.parametrize("row", differing_rows())
def test_a_listed_difference_still_has_the_value_the_page_gives(row: Row) -> None:
    stated = ast.literal_eval(row.value.strip("`"))
    code = resolve(row.location.strip("`"))
    assert same(code, stated), f"{row.reference}: the page says the code has {stated!r}, it has {code!r}"


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("agora.core.market:TaskSpec.min_success_threshold", 0.5),
        ("agora.core.market:TaskSpec.preferred_skills", []),
        ("agora.core.scoring:BidScorer(alpha)", 0.35),
        ("agora.sdk._graph:MarketNode.timeout_seconds", 900),
        ("agora.core.triage.recovery:DEFAULT_RECOVERY['unknown'].description", "Escalate"),
        ("agora.core.models:ModelTier.FAST", "fast"),
    ],
)
def test_a_location_reads_fields_parameters_keys_and_members(location: str, expected: Any) -> None:
    assert same(resolve(location), expected)
    assert not same(resolve(location), "something else")
