"""The task board app: hosts `Task` actors and answers task queries."""

from __future__ import annotations

from fastapi import FastAPI
from pydantic import BaseModel

from agora.core.errors import NoStateFound
from agora.core.market import AllocationStatus
from agora.core.task_lifecycle import TaskRecord
from agora.runtime.actor import ActorClient
from agora.runtime.service import NotFound, ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings
from agora.runtime.status_index import IdSet, StatusIndex
from agora.taskboard.actors import ACTOR_TYPE, STATUS_INDEX_NAMESPACE, Task

APP_ID = "taskboard"


class TaskBoardSettings(ServiceSettings):
    app_id: str = APP_ID


class TaskList(BaseModel):
    status: AllocationStatus
    task_ids: list[str]


def taskboard_module() -> ServiceModule:
    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        index = Task.status_index = StatusIndex(ctx.repository(STATUS_INDEX_NAMESPACE, IdSet))
        actors = ActorClient(ctx.sidecar)

        @app.get("/v1/tasks", response_model=TaskList)
        async def list_tasks(status: AllocationStatus) -> TaskList:
            return TaskList(status=status, task_ids=await index.list(str(status)))

        @app.get("/v1/tasks/{task_id}", response_model=TaskRecord)
        async def show_task(task_id: str) -> TaskRecord:
            try:
                return TaskRecord.model_validate(await actors.call(ACTOR_TYPE, task_id, "get_task"))
            except NoStateFound as exc:
                raise NotFound(exc.message, task_id=task_id) from exc

    return ServiceModule("taskboard", setup=setup, actors=(Task,))


def create_app(settings: TaskBoardSettings | None = None) -> FastAPI:
    return create_service_app(settings or TaskBoardSettings(), [taskboard_module()])


def main() -> None:
    settings = TaskBoardSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
