"""Input files read as contract models: a YAML or JSON file of one item or a list, every item
validated before any is used, every problem reported with its file, item and field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from agora.cli.problems import CliError, validation_lines
from agora.cli.text import MAX_TEXT_CHARS, capped, one_line, shorten, shown

__all__ = ["load_models", "read_document"]

Model = TypeVar("Model", bound=BaseModel)


def read_document(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read it ({(exc.strerror or str(exc)).lower()})") from None
    except UnicodeDecodeError:
        raise CliError(f"{path}: not a text file (not UTF-8)") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliError(
                f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CliError(f"{path}: not valid YAML or JSON: {_yaml_problem(exc)}") from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        return f"{exc.problem or exc.context or 'cannot parse'}{where}"
    return shorten(one_line(exc), MAX_TEXT_CHARS)


def load_models(file: str, model: type[Model], id_field: str) -> list[Model]:
    """Every item of a YAML/JSON file (one mapping, or a list of them) as `model`; all items
    are checked before any is returned, and every problem is reported."""
    path = Path(file)
    loaded = read_document(path)
    kind = model.__name__
    if loaded is None:
        raise CliError(f"{path}: the file is empty; expected a {kind} or a list of them")
    items = loaded if isinstance(loaded, list) else [loaded]
    if not items:
        raise CliError(f"{path}: the list is empty; expected at least one {kind}")
    valid: list[Model] = []
    problems: list[str] = []
    for number, item in enumerate(items, 1):
        try:
            valid.append(model.model_validate(item))
        except ValidationError as exc:
            named = item.get(id_field) if isinstance(item, Mapping) else None
            label = f" ({id_field} {shown(named)})" if named is not None else ""
            problems.extend(validation_lines(f"{path}: item {number}{label}", exc))
    if problems:
        raise CliError("\n".join(capped(problems, indent="  ")))
    return valid
