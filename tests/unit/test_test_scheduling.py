"""How `make test` shares the test files between its two workers: a file is a unit of work, and
the files that start whole systems of their own run together, one after another."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import WHOLE_SYSTEM_FILES, WHOLE_SYSTEM_GROUP, file_group_of

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
MARKED = re.compile(r"pytest\.mark\.whole_system\b")


def test_the_whole_system_files_are_exactly_those_marked_whole_system() -> None:
    marked = {path.name for path in INTEGRATION.glob("test_*.py") if MARKED.search(path.read_text())}
    assert marked == WHOLE_SYSTEM_FILES


def test_a_file_is_one_unit_and_the_whole_system_files_are_one_together() -> None:
    assert file_group_of("tests/unit/test_models.py::test_x") == "tests/unit/test_models.py"
    assert file_group_of("tests/unit/test_models.py::TestA::test_y[1]") == "tests/unit/test_models.py"
    assert file_group_of("tests/integration/test_market.py::test_z") == "tests/integration/test_market.py"
    assert {file_group_of(f"tests/integration/{name}::test_w") for name in WHOLE_SYSTEM_FILES} == {
        WHOLE_SYSTEM_GROUP
    }
