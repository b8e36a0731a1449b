"""A service app whose one workflow activity raises an error nobody foresaw, for the runs whose
input contains a marker: how a run that breaks down for an unforeseen reason ends.

    BROKEN_APP=agora.planner.app BROKEN_ACTIVITY=plan.draft BROKEN_MARKER=[break] \
        python -m tests.integration.apps.broken_activity

Every other activity, and this one for every other run, works as in the real app (the app is
the real one; only the registration of that activity is wrapped)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from agora.runtime.workflows import ActivityRef, WorkflowHost


class InjectedDefect(RuntimeError):
    """Stands for a bug: not a transient failure, not a typed refusal."""


def main() -> None:
    broken, marker = os.environ["BROKEN_ACTIVITY"], os.environ["BROKEN_MARKER"]
    register = WorkflowHost.activity

    def activity(
        host: WorkflowHost, ref: ActivityRef[Any, Any], work: Callable[[Any], Awaitable[Any]]
    ) -> None:
        async def maybe_broken(argument: BaseModel) -> Any:
            if marker in argument.model_dump_json():
                raise InjectedDefect(f"{ref.name} hit an unforeseen case")
            return await work(argument)

        register(host, ref, maybe_broken if ref.name == broken else work)

    WorkflowHost.activity = activity  # type: ignore[method-assign,assignment]
    importlib.import_module(os.environ["BROKEN_APP"]).main()


if __name__ == "__main__":
    main()
