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


ERRORS_BY_CODE: dict[str, type[AgoraError]] = {
    cls.code: cls for cls in (AgoraError, IllegalTransition, NoStateFound, ConflictingTask, InvalidOutcome)
}


def error_from(code: str, message: str) -> AgoraError:
    return ERRORS_BY_CODE.get(code, AgoraError)(message)
