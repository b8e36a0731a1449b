"""The catalogue of upgrade shims (`agora.runtime.upgrades`) names code that exists, and code
that mentions an earlier version is in it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from agora.runtime.upgrades import SHIMS

SERVICES = Path(__file__).resolve().parents[2] / "services" / "agora"
MENTIONS_AN_EARLIER_VERSION = re.compile(r"earlier versions?\b", re.IGNORECASE)


def resolve(where: str) -> object:
    module_name, _, qualified = where.partition(":")
    found: object = importlib.import_module(module_name)
    for part in qualified.split("."):
        fields = getattr(found, "model_fields", {})  # a pydantic field is no class attribute
        found = fields[part] if part in fields else getattr(found, part)
    return found


@pytest.mark.parametrize("where", [w for shim in SHIMS for w in shim.where])
def test_every_listed_place_exists(where: str) -> None:
    resolve(where)


def test_shim_names_are_unique_and_each_says_when_it_can_go() -> None:
    assert len({s.name for s in SHIMS}) == len(SHIMS)
    assert all(s.keeps and s.remove_when and s.where for s in SHIMS)


def test_every_module_that_mentions_an_earlier_version_holds_a_listed_shim() -> None:
    listed = {w.partition(":")[0] for shim in SHIMS for w in shim.where}
    catalogues = {"agora.runtime.upgrades", "agora.runtime.patches"}
    mentioning = {
        ".".join(path.relative_to(SERVICES.parent).with_suffix("").parts)
        for path in SERVICES.rglob("*.py")
        if MENTIONS_AN_EARLIER_VERSION.search(path.read_text())
    }
    assert mentioning - catalogues <= listed, sorted(mentioning - catalogues - listed)
