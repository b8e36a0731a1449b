"""docs/architecture.md's error codes are the code's: every code it names exists, and every code
an API may answer is in its table with its HTTP status."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from typing import TypeVar

import agora
from agora.core.errors import AgoraError
from agora.runtime.errors import ServiceError
from agora.runtime.service import HTTP_ERROR_CODES, OTHER_HTTP_ERROR_CODE

T = TypeVar("T")
ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
CODE = re.compile(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)`")
SETTING_PREFIX = "AGORA_"
"""Backticked upper-case names starting with this are settings (environment variables), not codes."""


def _import_every_module() -> None:
    """Error types register by being defined, some beside the service that raises them.
    `__main__` modules are left out: importing one starts its service."""
    for module in pkgutil.walk_packages(agora.__path__, "agora."):
        if not module.name.endswith(".__main__"):
            importlib.import_module(module.name)


def _subclasses(root: type[T]) -> list[type[T]]:
    """`root` and its subclasses defined in Agora's own modules (tests define some of their own)."""
    found: list[type[T]] = []
    stack = [root]
    while stack:
        cls = stack.pop()
        if cls.__module__.startswith("agora."):
            found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


def codes_in_the_code() -> dict[str, set[int | None]]:
    """Every error code, with the HTTP statuses it is answered with (None: whatever status the
    framework raised)."""
    _import_every_module()
    statuses: dict[str, set[int | None]] = {}
    for domain in _subclasses(AgoraError):
        statuses.setdefault(domain.code, set()).add(domain.http_status)
    for service in _subclasses(ServiceError):
        statuses.setdefault(service.code, set()).add(service.status_code)
    for status, code in HTTP_ERROR_CODES.items():
        statuses.setdefault(code, set()).add(status)
    statuses.setdefault(OTHER_HTTP_ERROR_CODE, set()).add(None)
    return statuses


def error_section() -> str:
    text = ARCHITECTURE.read_text()
    start = text.index("## Errors and bounds")
    return text[start : text.index("### Bounds", start)]


def documented_statuses() -> dict[str, str]:
    """The error table: code -> its HTTP status cell."""
    rows = re.findall(r"^\| `([A-Z_]+)` \| ([^|]+) \|", error_section(), flags=re.MULTILINE)
    return {code: status.strip() for code, status in rows}


def test_every_code_the_error_section_names_exists() -> None:
    known = codes_in_the_code()
    named = {code for code in CODE.findall(error_section()) if not code.startswith(SETTING_PREFIX)}
    assert named, "the error section names no codes"
    assert not named - set(known), f"named in docs/architecture.md but defined nowhere: {named - set(known)}"


def test_every_code_is_documented_with_its_status() -> None:
    documented = documented_statuses()
    for code, statuses in codes_in_the_code().items():
        assert len(statuses) == 1, f"{code} is answered with several statuses: {statuses}"
        assert code in documented, f"{code} is missing from the error table of docs/architecture.md"
        [status] = statuses
        if status is not None:
            assert documented[code] == str(status), (
                f"{code}: documented {documented[code]}, answered {status}"
            )
