"""One error model: every error type has one code, an HTTP status and a stated meaning, every
process knows every code, and an error crosses Dapr as the same type."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import agora
from agora.core.errors import (
    AgoraError,
    ErrorBody,
    InvalidArgument,
    NotFound,
    Unavailable,
    error_for_status,
    error_from,
    error_table,
    with_error_table,
)
from agora.core.planning import InvalidPlan


def every_error_type() -> set[type[AgoraError]]:
    """Every AgoraError subclass defined anywhere in the code (every module imported)."""
    for module in pkgutil.walk_packages(agora.__path__, "agora."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: set[type[AgoraError]] = set()
    pending = [AgoraError]
    while pending:
        for sub in pending.pop().__subclasses__():
            found.add(sub)
            pending.append(sub)
    return {t for t in found if t.__module__.startswith("agora.")}


def test_every_code_has_one_type_a_status_and_a_meaning() -> None:
    table = error_table()
    assert set(table.values()) == every_error_type(), "an error type outside the table's modules"
    for code, error_type in table.items():
        assert code == code.upper() and " " not in code
        assert 400 <= error_type.http_status < 600, code
        assert (error_type.__doc__ or "").strip(), f"{code} states no meaning"


def test_a_refusal_is_permanent_and_a_server_failure_may_pass_on_a_retry() -> None:
    for code, error_type in error_table().items():
        if error_type.http_status < 500:
            assert error_type.permanent, code


def test_an_error_crosses_dapr_as_the_same_type_with_its_details() -> None:
    sent = InvalidArgument("invalid request", errors=[{"loc": ["body", "x"], "msg": "bad", "type": "t"}])
    body = ErrorBody.model_validate_json(sent.body().model_dump_json())
    received = error_from(body.error, body.message, body.details)
    assert type(received) is InvalidArgument and received.details == sent.details
    assert received.field_errors[0].loc == ["body", "x"]


def test_an_error_with_state_of_its_own_is_rebuilt_from_its_message() -> None:
    sent = InvalidPlan(["a cycle", "an unknown dependency"])
    received = error_from(sent.code, sent.message)
    assert isinstance(received, InvalidPlan) and received.problems == sent.problems


def test_the_web_framework_s_statuses_answer_with_the_edge_errors() -> None:
    assert type(error_for_status(404, "no route")) is NotFound
    assert error_for_status(405, "x").code == "METHOD_NOT_ALLOWED"
    assert error_for_status(418, "x").http_status == 400
    assert type(error_for_status(503, "x")) is Unavailable
    assert error_for_status(502, "x").http_status == 500


def test_the_documented_error_table_is_the_code_s() -> None:
    architecture = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
    document = architecture.read_text()
    assert with_error_table(document) == document, "run `python -m agora.core.errors` to update the table"


def test_every_code_the_docs_name_exists() -> None:
    architecture = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
    named = set(re.findall(r"`([A-Z][A-Z_]{3,})`", architecture.read_text()))
    codes = set(error_table())
    looks_like_codes = {n for n in named if n.endswith(("_FOUND", "_ARGUMENT", "_HELD", "_REQUEST", "_TASK"))}
    assert looks_like_codes <= codes
