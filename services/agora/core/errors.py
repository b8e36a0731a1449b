"""Typed domain errors. Each has a stable `code`, so an error raised inside an actor or a
service on one side of Dapr is raised again as the same type on the other side."""

from __future__ import annotations

from typing import ClassVar


class AgoraError(Exception):
    code: ClassVar[str] = "AGORA_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class IllegalTransition(AgoraError):
    """A task was asked to move to a status its lifecycle does not allow from where it is."""

    code = "ILLEGAL_TRANSITION"


class NoStateFound(AgoraError):
    """The addressed task (or other actor-held record) does not exist."""

    code = "NO_STATE_FOUND"


class ConflictingTask(AgoraError):
    """A task id was posted again with a different specification."""

    code = "CONFLICTING_TASK"


class InvalidOutcome(AgoraError):
    """An outcome that does not fit the task (wrong agent, task not allocated...)."""

    code = "INVALID_OUTCOME"


def _error_types(root: type[AgoraError] = AgoraError) -> dict[str, type[AgoraError]]:
    found = {root.code: root}
    for sub in root.__subclasses__():
        found.update(_error_types(sub))
    return found


def error_from(code: str, message: str) -> AgoraError:
    """The typed error for `code`: any AgoraError subclass defined anywhere registers itself
    by being defined, so domain modules keep their errors next to their rules."""
    error_type = _error_types().get(code, AgoraError)
    try:
        return error_type(message)
    except TypeError:  # an error type whose constructor wants more than a message
        error = error_type.__new__(error_type)
        AgoraError.__init__(error, message)
        return error
