"""Typed domain errors. Each has a stable `code`, so an error raised inside an actor or a
service on one side of Dapr is raised again as the same type on the other side."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel


class AgoraError(Exception):
    code: ClassVar[str] = "AGORA_ERROR"
    permanent: ClassVar[bool] = True
    """A domain rule refused the request: the same request fails the same way every time, so a
    message that raised it is dead-lettered at once instead of being retried."""
    http_status: ClassVar[int] = 400
    """The HTTP status an API answers this error with (the body carries `code`): each error
    type states its own, so every app maps errors the same way."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @classmethod
    def from_message(cls, message: str) -> AgoraError:
        """The error as it arrives from the other side of Dapr: code and message only. Error
        types whose constructor needs more (their details stay on the side that raised it)
        override this."""
        return cls(message)


class IllegalTransition(AgoraError):
    """A task was asked to move to a status its lifecycle does not allow from where it is."""

    code = "ILLEGAL_TRANSITION"
    http_status = 409


class NoStateFound(AgoraError):
    """The addressed task (or other actor-held record) does not exist."""

    code = "NO_STATE_FOUND"
    http_status = 404


class ConflictingTask(AgoraError):
    """A task id was posted again with a different specification."""

    code = "CONFLICTING_TASK"
    http_status = 409


class InvalidOutcome(AgoraError):
    """An outcome that does not fit the task (wrong agent, task not allocated...)."""

    code = "INVALID_OUTCOME"
    http_status = 422


class InvalidInput(AgoraError):
    """An actor method's argument failed validation (the message names the fields)."""

    code = "INVALID_ARGUMENT"
    http_status = 422


class ConflictingRequest(AgoraError):
    """An id already names a run (a plan, a debate) that was asked for with a different request;
    the same request again is accepted as a repeat."""

    code = "CONFLICTING_REQUEST"
    http_status = 409


def conflict_between(kind: str, run_id: str, earlier: BaseModel, later: BaseModel) -> ConflictingRequest:
    """The refusal of `later` under an id `earlier` already holds, naming the fields that differ."""
    fields = type(earlier).model_fields
    differing = [name for name in fields if getattr(earlier, name) != getattr(later, name, None)]
    return ConflictingRequest(
        f"{kind} {run_id} already exists with a different request (differs in: {', '.join(differing)}); "
        "the same request again is a repeat, another request needs another id"
    )


def _error_types(root: type[AgoraError] = AgoraError) -> dict[str, type[AgoraError]]:
    found = {root.code: root}
    for sub in root.__subclasses__():
        found.update(_error_types(sub))
    return found


def error_from(code: str, message: str) -> AgoraError:
    """The typed error for `code`: any AgoraError subclass defined anywhere registers itself
    by being defined, so domain modules keep their errors next to their rules."""
    return _error_types().get(code, AgoraError).from_message(message)
