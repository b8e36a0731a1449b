"""Suites that must run in CI: a suite that cannot run on this machine is skipped on a
developer's machine and fails in CI (`.ci/run` sets CI=true), saying why either way."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def cannot_run(reason: str) -> NoReturn:
    """Stop the test: skipped here, failed in CI, with `reason`."""
    if IN_CI:
        pytest.fail(f"required in CI, and it cannot run here: {reason}", pytrace=False)
    pytest.skip(reason)
