"""Fuzzing every HTTP API from its OpenAPI schema (redis profile, a system of its own, every
service its own app): for each operation, requests with odd path and query values and bodies
that are junk, schema-valid, or schema-valid with one field broken, sent through the console's
sidecar as a person's tool would. Every answer is a success or a typed 4xx with a reason:
never a 5xx, never a traceback; every app stays up."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from agora.harness import LocalCluster
from agora.harness.system import CONSOLE, SERVICES
from agora.llm.offline import SchemaValueGenerator
from tests.integration.helpers import replicas_of

pytestmark = pytest.mark.integration

CASES_PER_OPERATION = 12
ODD_STRINGS = [
    "",
    " ",
    "x" * 300,
    "../../etc/passwd",
    "a|b",
    "%00",
    "ünïcødé",
    "null",
    "-1",
    "1e309",
    "{}",
    "a/b",
]
JUNK: list[Any] = [
    None,
    0,
    -1,
    1e308,
    True,
    "text",
    [],
    {},
    [[[[[]]]]],
    {"a": {"b": {"c": None}}},
    "x" * 20_000,
]


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster("redis", run_dir=tmp_path_factory.mktemp("fuzz-http")) as cluster:
        for spec in [*SERVICES, CONSOLE]:
            cluster.add_service(spec)
        yield cluster


def resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not ref:
        return schema
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    resolved: dict[str, Any] = node
    return resolved


def body_for(schema: dict[str, Any], root: dict[str, Any], rng: random.Random) -> Any:
    """Junk, a schema-valid body, or a valid body with one field broken."""
    kind = rng.choice(["junk", "valid", "broken"])
    if kind == "junk":
        return rng.choice(JUNK)
    components = {**root, **{k: v for k, v in resolve(schema, root).items()}}
    seed = hashlib.sha256(str(rng.random()).encode()).digest()
    try:
        valid = SchemaValueGenerator(components, seed).generate()
    except ValueError:
        return rng.choice(JUNK)
    if kind == "broken" and isinstance(valid, dict) and valid:
        field = rng.choice(sorted(valid))
        valid[field] = rng.choice(JUNK)
    return valid


def operations(cluster: LocalCluster) -> list[tuple[str, str, str, dict[str, Any], dict[str, Any]]]:
    """(app id, method, path template, operation, whole schema) for every public operation."""
    found = []
    for replica in cluster.replicas:
        if replica.spec.module is None or replica.index:
            continue
        schema = httpx.get(f"{replica.app_url}/openapi.json", timeout=10).json()
        for path, methods in schema.get("paths", {}).items():
            for method, operation in methods.items():
                if path.startswith("/v1/"):
                    found.append((replica.spec.app_id, method.upper(), path, operation, schema))
    return found


def test_no_request_to_any_api_gets_a_5xx_or_a_traceback(system: LocalCluster) -> None:
    console = replicas_of(system, "console")[0]
    rng = random.Random(20261122)
    ops = operations(system)
    assert len(ops) >= 15, [(a, m, p) for a, m, p, _, _ in ops]
    failures = []
    with httpx.Client(timeout=30) as http:
        for app_id, method, template, operation, schema in ops:
            for _ in range(CASES_PER_OPERATION):
                path = template
                params: dict[str, str] = {}
                for parameter in operation.get("parameters", []):
                    value = rng.choice(
                        [*ODD_STRINGS, f"fuzz-{rng.randrange(10**6)}", str(rng.randrange(-5, 600))]
                    )
                    if parameter["in"] == "path":
                        path = path.replace("{" + parameter["name"] + "}", quote(value, safe="") or "x")
                    elif parameter["in"] == "query" and rng.random() < 0.7:
                        params[parameter["name"]] = value
                content: bytes | None = None
                body_schema = (
                    operation.get("requestBody", {})
                    .get("content", {})
                    .get("application/json", {})
                    .get("schema")
                )
                if body_schema is not None:
                    content = json.dumps(body_for(body_schema, schema, rng)).encode()
                response = http.request(
                    method,
                    console.invoke_url(path.lstrip("/"), app_id),
                    params=params,
                    content=content,
                    headers={"content-type": "application/json"},
                )
                text = response.text
                typed = response.status_code < 400 or _typed_refusal(response)
                if response.status_code >= 500 or "Traceback" in text or not typed:
                    failures.append((app_id, method, path, params, response.status_code, text[:300]))
    assert not failures, "\n".join(map(str, failures[:12]))
    for replica in system.replicas:
        if replica.spec.module is not None:
            assert httpx.get(f"{replica.app_url}/healthz", timeout=5).status_code == 200, replica.name


def _typed_refusal(response: httpx.Response) -> bool:
    """A refusal that says what is wrong: the app's `{"error", "message"}` or Dapr's own
    `{"errorCode", "message"}` (a route or method the app does not serve)."""
    try:
        body = response.json()
    except ValueError:
        return False
    return (
        isinstance(body, dict)
        and bool(body.get("message"))
        and bool(body.get("error") or body.get("errorCode"))
    )
