"""Dapr Workflow for the services whose work takes many steps and must survive crashes (plans,
debates): the app registers workflows and activities, the sidecar's workflow engine keeps
their history in the actor state store and drives them through the scheduler.

Why Dapr Workflow and not a home-made loop: a workflow's code is replayed from its recorded
history after a crash of the app or its sidecar, so each step's result (an activity, a
child workflow, an external event, a timer) is recorded once and never redone; waiting for a
market outcome or a person's decision is an external event, a deadline a durable timer.

`WorkflowHost` is the part every such service shares: one `WorkflowRuntime` on the app's own
sidecar (gRPC), started once the app is warm and stopped on shutdown. The runtime executes
activities on its own thread and event loop; `WorkflowHost.activity` runs each on the app's
loop instead, where the app's pooled sidecar client, state repositories and tracing live.
Activities take and return pydantic models (one type on both sides).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from dapr.ext.workflow import DaprWorkflowContext, RetryPolicy, WorkflowActivityContext, WorkflowRuntime
from dapr.ext.workflow.aio import DaprWorkflowClient
from dapr.ext.workflow.logger import LoggerOptions
from opentelemetry import context as otel_context
from opentelemetry.trace import Span
from pydantic import BaseModel, Field

from agora.runtime.state import StateRepository
from agora.runtime.status_index import StatusIndex
from agora.runtime.tracing import (
    current_traceparent,
    extract_context,
    record_finished_span,
    span_traceparent,
    stable_span_id,
    tracer,
)

log = logging.getLogger(__name__)

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel | None)
M = TypeVar("M", bound=BaseModel)

ACTIVITY_RETRY = RetryPolicy(
    first_retry_interval=timedelta(seconds=1),
    max_number_of_attempts=10,
    backoff_coefficient=2.0,
    max_retry_interval=timedelta(seconds=60),
)
"""Activities raise only when the world is out of reach (a sidecar, the state store, the
broker); expected refusals and a model that cannot answer come back as results. Ten attempts
over about six minutes, then the failure reaches the workflow, which fails (Dapr shows it
FAILED with the error)."""


class WorkflowHost:
    """The app's workflow runtime: register workflows and activities, then `start`."""

    def __init__(self, dapr_host: str, dapr_grpc_port: int) -> None:
        self._address = (dapr_host, str(dapr_grpc_port))
        self._runtime = WorkflowRuntime(
            host=dapr_host, port=str(dapr_grpc_port), logger_options=_engine_log_options()
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self.client = DaprWorkflowClient(
            host=dapr_host, port=str(dapr_grpc_port), logger_options=_engine_log_options()
        )
        _quiet_engine_logs()

    def workflow(self, name: str, fn: Callable[[DaprWorkflowContext, Any], Any]) -> None:
        """Register the generator function `fn` as workflow `name` (its input arrives as JSON)."""

        def run(ctx: DaprWorkflowContext, raw: Any) -> Any:
            return fn(ctx, raw)

        run.__name__ = name
        self._runtime.register_workflow(run, name=name)

    def activity(self, name: str, input_type: type[In], work: Callable[[In], Awaitable[Out]]) -> None:
        """Register `work` as activity `name`: its input is validated into `input_type`, and it
        runs on the app's event loop."""

        async def run(_: WorkflowActivityContext, raw: Any) -> Any:
            loop = self._loop
            if loop is None:
                raise RuntimeError("the workflow host has not started")
            argument = input_type.model_validate(raw)
            result = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_call(work, argument), loop))
            return result.model_dump(mode="json") if isinstance(result, BaseModel) else result

        run.__name__ = name
        self._runtime.register_activity(run, name=name)

    async def start_once(self, workflow: str, instance_id: str, argument: BaseModel) -> bool:
        """Schedule `workflow` as `instance_id` unless an instance of that id exists (a repeated
        request, a redelivery); whether it was scheduled now."""
        if await self.client.get_workflow_state(instance_id, fetch_payloads=False) is not None:
            return False
        await self.client.schedule_new_workflow(
            workflow, input=argument.model_dump(mode="json"), instance_id=instance_id
        )
        return True

    async def start(self) -> None:
        """Connect to the sidecar and take work (from the app's loop, once it is warm)."""
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._runtime.start)
        _quiet_engine_logs()
        ready = await asyncio.to_thread(self._runtime.wait_for_worker_ready, 30.0)
        if not ready:
            raise RuntimeError("the workflow worker did not connect to the sidecar within 30 s")
        self._started = True
        log.info("workflow runtime started", extra={"sidecar_grpc": ":".join(self._address)})

    async def stop(self) -> None:
        if self._started:
            self._started = False
            await asyncio.to_thread(self._runtime.shutdown)


ENGINE_LOGGERS = ("durabletask-worker", "durabletask-client", "WorkflowRuntime", "DaprWorkflowClient")


def _engine_log_options() -> LoggerOptions:
    """The workflow SDK logs every replay step at INFO on handlers of its own; its warnings go
    through the app's JSON log like every other line."""
    return LoggerOptions(log_level="WARNING", log_handler=logging.NullHandler())


def _quiet_engine_logs() -> None:
    for name in ENGINE_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.WARNING)
        logger.propagate = True


async def _call(work: Callable[[In], Awaitable[Out]], argument: In) -> Out:
    return await work(argument)


class FinishedSpan(BaseModel):
    """A span of a step that outlived any one process (a whole run, a wave, a round): its ids
    were chosen when it started (`span_traceparent`), it is recorded when it ended."""

    name: str
    traceparent: str
    parent: str | None
    start: datetime
    end: datetime
    attributes: dict[str, str | int | float | bool] = Field(default_factory=dict)

    def record(self) -> None:
        record_finished_span(self.name, self.traceparent, self.parent, self.start, self.end, self.attributes)


R = TypeVar("R", bound=BaseModel)


class RunRecords(Generic[R]):
    """The records of a service's workflow runs, as people see them: each saved whole after
    every step of its run (`save`, an activity), its id indexed by its state (`page`)."""

    def __init__(
        self, repository: StateRepository[R], index: StatusIndex, state_of: Callable[[R], str]
    ) -> None:
        self._repository = repository
        self._index = index
        self._state_of = state_of

    async def get(self, run_id: str) -> R | None:
        found = await self._repository.get(run_id)
        return found.value if found is not None else None

    async def save(
        self, run_id: str, record: R, previous_state: str | None, finished: Sequence[FinishedSpan] = ()
    ) -> None:
        """Write the record, move its id to its state's listing, record the spans that ended."""
        await self._repository.save(run_id, record)
        state = self._state_of(record)
        if previous_state != state:
            await self._index.move(run_id, previous_state, state)
        for span in finished:
            span.record()

    async def page(self, state: str, limit: int, offset: int) -> tuple[int, list[R]]:
        """How many runs are in `state`, and one page of their records (by id)."""
        ids = sorted(await self._index.list(state))
        chosen = ids[offset : offset + limit]
        found = await self._repository.get_many(chosen)
        page = [found[i].value for i in chosen if i in found]
        return len(ids), [r for r in page if self._state_of(r) == state]


def run_trace(run_id: str, kind: str) -> tuple[str, str | None]:
    """The traceparent of a run's span (its ids fixed now, recorded when the run ends) and the
    current one (its parent): every step of the run is a descendant."""
    parent = current_traceparent()
    return span_traceparent(parent, stable_span_id(run_id, kind)), parent


def workflow_now(ctx: DaprWorkflowContext) -> datetime:
    """The workflow's deterministic clock, as an aware UTC time."""
    now = ctx.current_utc_datetime
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def result_of(model: type[M], raw: Any) -> M:
    """An activity's or child workflow's recorded result as its model."""
    return raw if isinstance(raw, model) else model.model_validate(raw)


@contextlib.contextmanager
def step_span(name: str, traceparent: str | None, attributes: dict[str, Any] | None = None) -> Iterator[Span]:
    """A span for one workflow step, a child of the run's span (`traceparent`), so a whole run
    is one trace however often its workflow was replayed or moved to another process."""
    parent = extract_context({"traceparent": traceparent}) if traceparent else otel_context.get_current()
    token = otel_context.attach(parent)
    try:
        with tracer("agora.workflow").start_as_current_span(name, attributes=attributes or {}) as span:
            yield span
    finally:
        otel_context.detach(token)
