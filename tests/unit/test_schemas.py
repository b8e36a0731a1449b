import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agora.core.messages import Topic
from agora.core.schemas import CONTRACTS, README, SCHEMA_DIR, UNBOUNDED_LISTS, readme_section, render
from agora.runtime import interfaces
from agora.runtime.actor_interface import AgoraActorInterface, wire_name
from agora.runtime.actor_interface import actor_methods as actor_methods_of

SERVICES = Path(__file__).resolve().parents[2] / "services" / "agora"
UNBOUNDED_STRING_KINDS = ("enum", "const", "format")
"""A string with one of these is bounded by what it may be (a name of a fixed set, a date-time)."""


def test_committed_json_schemas_match_the_models() -> None:
    for filename, text in render().items():
        path = SCHEMA_DIR / filename
        assert path.is_file(), f"{path} missing: run python -m agora.core.schemas"
        assert path.read_text() == text, f"{path} is stale: run python -m agora.core.schemas"


def test_the_contracts_table_in_proto_readme_matches_the_models() -> None:
    assert readme_section() in README.read_text(), f"{README} is stale: run python -m agora.core.schemas"


def unbounded_nodes(node: Any, where: str) -> Iterator[str]:
    """`Model.field` (with `[]` per list level) of every string without `maxLength` and every
    list without `maxItems` in one JSON Schema."""
    if isinstance(node, list):
        for item in node:
            yield from unbounded_nodes(item, where)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind == "string" and "maxLength" not in node and not any(k in node for k in UNBOUNDED_STRING_KINDS):
        yield where
    if kind == "array" and "maxItems" not in node:
        yield where
    for key, value in node.items():
        if key == "$defs":
            for name, definition in value.items():
                yield from unbounded_nodes(definition, name)
        elif key == "properties":
            for name, schema in value.items():
                yield from unbounded_nodes(schema, f"{where}.{name}")
        elif key in ("items", "prefixItems"):
            yield from unbounded_nodes(value, f"{where}[]")
        else:
            yield from unbounded_nodes(value, where)


def test_every_string_and_list_of_every_schema_has_its_bound() -> None:
    unbounded: dict[str, set[str]] = {}
    for filename, text in render().items():
        schema = json.loads(text)
        for where in unbounded_nodes(schema, schema.get("title", filename)):
            unbounded.setdefault(where, set()).add(filename)
    surprising = {where: files for where, files in unbounded.items() if where not in UNBOUNDED_LISTS}
    assert not surprising, (
        f"strings or lists without a bound (bound them as agora.core.limits does): {surprising}"
    )
    assert set(unbounded) == set(UNBOUNDED_LISTS), "UNBOUNDED_LISTS names a list that now has its bound"


def test_the_schema_walk_finds_what_it_must() -> None:
    schema = {
        "title": "M",
        "properties": {
            "free": {"type": "string"},
            "when": {"type": "string", "format": "date-time"},
            "kind": {"type": "string", "enum": ["a"]},
            "ids": {"type": "array", "maxItems": 3, "items": {"type": "string"}},
            "nested": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]},
        },
        "$defs": {"N": {"properties": {"many": {"type": "array", "items": {"type": "integer"}}}}},
    }
    assert sorted(unbounded_nodes(schema, "M")) == ["M.free", "M.ids[]", "N.many"]


def test_the_table_names_topics_routes_and_actor_methods_that_exist() -> None:
    source = "\n".join(path.read_text() for path in SERVICES.rglob("*.py"))
    routes = {
        (method.upper(), re.sub(r"\{[^}]*\}", "{}", path))
        for method, path in re.findall(r'@app\.(get|post|put|delete)\("([^"]+)"', source)
    }
    actor_methods = {
        wire_name(method)
        for interface in vars(interfaces).values()
        if isinstance(interface, type) and issubclass(interface, AgoraActorInterface)
        for method in actor_methods_of(interface).values()
    }
    for name, contract in CONTRACTS.items():
        for topic in re.findall(r"topic `([^`]+)`", contract.travels):
            assert topic in {t.value for t in Topic}, (name, topic)
        for method, path in re.findall(r"`(GET|POST|PUT|DELETE) (/v1/[^`?]*)", contract.travels):
            assert (method, re.sub(r"\{[^}]*\}", "{}", path)) in routes, (name, method, path)
        for first, more in re.findall(r"actor `(\w+)`((?:, `\w+`(?! actor))*)", contract.travels):
            for method in [first, *re.findall(r"`(\w+)`", more)]:
                assert method in actor_methods, (name, method)
