"""Checker apps: a team's own test of a task's output, called by the task board
(`agora.core.acceptance.CheckerApp`)."""

from agora.core.acceptance import CheckerApp
from agora.core.contracts import CheckAnswer, CheckRequest
from agora.sdk._checker import CheckerSettings, CheckFunction, checker_app, serve_checker

__all__ = [
    "CheckAnswer",
    "CheckFunction",
    "CheckRequest",
    "CheckerApp",
    "CheckerSettings",
    "checker_app",
    "serve_checker",
]
