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

A run must never outlive its workflow silently: a workflow registered with `on_failure` runs
that handler (`guarded`) when its steps raise for a reason the code did not foresee, so its
record ends in a terminal state and its completion is announced. An activity that raises
anything but a transient failure (the sidecar, the store or the broker out of reach) is not
retried: the same input fails the same way, and ten retries over six minutes would only hide
the defect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

import grpc  # type: ignore[import-untyped]
import httpx
from dapr.ext.workflow import (
    DaprWorkflowContext,
    RetryPolicy,
    TaskFailedError,
    WorkflowActivityContext,
    WorkflowRuntime,
    WorkflowStatus,
    when_any,
)

# The engine skips retries for a failure of this type name (the SDK does not export it).
from dapr.ext.workflow._durabletask.task import NonRetryableError
from dapr.ext.workflow.aio import DaprWorkflowClient
from dapr.ext.workflow.logger import LoggerOptions
from opentelemetry import context as otel_context
from opentelemetry.trace import Span, Status, StatusCode
from pydantic import BaseModel, Field

from agora.core.errors import AgoraError
from agora.core.limits import MAX_NOTE_CHARS
from agora.runtime.sidecar import DaprError, SidecarUnavailable
from agora.runtime.state import ConcurrencyConflict, StateRepository
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
over about six minutes, then the failure reaches the workflow, whose `on_failure` handler
ends its run. Any other error is not retried (`TRANSIENT_ERRORS`)."""

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    SidecarUnavailable,
    DaprError,
    ConcurrencyConflict,
    httpx.TransportError,
    OSError,
    TimeoutError,
    grpc.RpcError,
)
"""What an activity may raise and still pass on a retry: the world out of reach, a write that
lost a race. Typed errors say themselves whether they are permanent."""

WorkflowSteps = Generator[Any, Any, Any]
WorkflowFunction = Callable[[DaprWorkflowContext, Any], WorkflowSteps]


class RunFailure(BaseModel):
    """Why a workflow's steps broke down: the error's type and message, as the run's reason."""

    error_type: str
    reason: str = Field(max_length=MAX_NOTE_CHARS)


FailureHandler = Callable[[DaprWorkflowContext, Any, RunFailure], WorkflowSteps]


def failure_of(error: Exception) -> RunFailure:
    """A failure as a run's reason: an activity's (or child workflow's) error as the engine
    recorded it, or the workflow code's own."""
    if isinstance(error, TaskFailedError):
        error_type, message = error.details.error_type, error.details.message
    else:
        error_type, message = type(error).__name__, str(error)
    reason = f"the run broke down: {error_type}: {message}"
    return RunFailure(error_type=error_type, reason=reason[:MAX_NOTE_CHARS])


def guarded(steps: WorkflowFunction, on_failure: FailureHandler) -> WorkflowFunction:
    """`steps`, and when they raise (an activity that failed for good, a defect in the workflow
    code), `on_failure`'s steps instead, so the run ends on its own terms rather than as a
    FAILED workflow nobody watches. The handler's own steps are recorded like any others: a
    crash while it runs resumes it, not the broken steps."""

    def run(ctx: DaprWorkflowContext, raw: Any) -> WorkflowSteps:
        try:
            return (yield from steps(ctx, raw))
        except Exception as error:
            yield from on_failure(ctx, raw, failure_of(error))
            return None

    return run


def is_transient(error: BaseException) -> bool:
    if isinstance(error, AgoraError):
        return not error.permanent
    return isinstance(error, TRANSIENT_ERRORS)


WAKE_EVENT = "agora.wake"
"""An event no workflow waits for: raised to get an instance that has not started going."""


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

    def workflow(self, name: str, fn: WorkflowFunction, on_failure: FailureHandler | None = None) -> None:
        """Register the generator function `fn` as workflow `name` (its input arrives as JSON).
        A top-level run whose record people watch passes `on_failure`, which ends that record
        when the steps break down (`guarded`); a child workflow leaves its failure to its parent."""
        steps = guarded(fn, on_failure) if on_failure is not None else fn

        def run(ctx: DaprWorkflowContext, raw: Any) -> Any:
            return steps(ctx, raw)

        run.__name__ = name
        self._runtime.register_workflow(run, name=name)

    def activity(self, name: str, input_type: type[In], work: Callable[[In], Awaitable[Out]]) -> None:
        """Register `work` as activity `name`: its input is validated into `input_type`, and it
        runs on the app's event loop."""

        async def run(_: WorkflowActivityContext, raw: Any) -> Any:
            loop = self._loop
            if loop is None:
                raise RuntimeError("the workflow host has not started")
            try:
                argument = input_type.model_validate(raw)
                result = await asyncio.wrap_future(
                    asyncio.run_coroutine_threadsafe(_call(work, argument), loop)
                )
            except Exception as error:
                if is_transient(error):
                    raise
                log.error("activity failed; not retried", exc_info=error, extra={"activity": name})
                raise NonRetryableError(f"{name}: {type(error).__name__}: {error}"[:2000]) from error
            return result.model_dump(mode="json") if isinstance(result, BaseModel) else result

        run.__name__ = name
        self._runtime.register_activity(run, name=name)

    def attach(self, register: Callable[[WorkflowRuntime], None]) -> None:
        """Let a library register workflows and activities of its own on the app's runtime
        (a dapr-agents agent's), before it starts: one runtime per app, since a sidecar hands
        each work item to one of the workers connected to it."""
        if self._started:
            raise RuntimeError("workflows are registered before the workflow runtime starts")
        register(self._runtime)

    async def start_once(self, workflow: str, instance_id: str, argument: BaseModel) -> bool:
        """Schedule `workflow` as `instance_id` unless an instance of that id exists (a repeated
        request, a redelivery); whether it was scheduled now. An existing instance that has not
        started yet is woken with an event: one created just as the app's workflow worker went
        away (a crash mid-request, the request then redelivered) was seen to wait a minute or
        more for its first step after the worker came back, where any event gets it going."""
        if await self.wake_if_pending(instance_id):
            return False
        await self.client.schedule_new_workflow(
            workflow, input=argument.model_dump(mode="json"), instance_id=instance_id
        )
        return True

    async def wake_if_pending(self, instance_id: str) -> bool:
        """Whether an instance of that id exists; one that has not started yet is woken with
        an event (a request for it again, a redelivery: see `start_once`)."""
        existing = await self.client.get_workflow_state(instance_id, fetch_payloads=False)
        if existing is None:
            return False
        if existing.runtime_status is WorkflowStatus.PENDING:
            log.info("a run not started yet is woken", extra={"instance_id": instance_id})
            await self.client.raise_workflow_event(instance_id, WAKE_EVENT, data=None)
        return True

    async def starting(self, instance_id: str, model: type[M]) -> tuple[M, datetime] | None:
        """The input of an instance that is scheduled or running, and when it was scheduled;
        None when there is no such instance or it has ended. A run's record is saved by its
        first step, so a run scheduled a moment ago has none yet: its reader shows it as just
        started instead of unknown."""
        state = await self.client.get_workflow_state(instance_id, fetch_payloads=True)
        if (
            state is None
            or state.serialized_input is None
            or state.runtime_status not in (WorkflowStatus.PENDING, WorkflowStatus.RUNNING)
        ):
            return None
        created: datetime = state.created_at
        scheduled_at = created if created.tzinfo is not None else created.replace(tzinfo=UTC)
        return model.model_validate_json(state.serialized_input), scheduled_at

    async def input_of(self, instance_id: str, model: type[M]) -> M | None:
        """The input an existing instance was scheduled with (None: no such instance)."""
        state = await self.client.get_workflow_state(instance_id, fetch_payloads=True)
        if state is None or state.serialized_input is None:
            return None
        return model.model_validate_json(state.serialized_input)

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
    every step of its run (`save`, an activity), its id indexed by its state and listed by
    creation (`page`).

    Runs first saved before the creation-ordered listing existed are not in it: they are listed
    by state only."""

    def __init__(
        self,
        repository: StateRepository[R],
        index: StatusIndex,
        state_of: Callable[[R], str],
        created_of: Callable[[R], datetime],
    ) -> None:
        self._repository = repository
        self._index = index
        self.state_of = state_of
        self.created_of = created_of

    async def get(self, run_id: str) -> R | None:
        found = await self._repository.get(run_id)
        return found.value if found is not None else None

    async def save(
        self, run_id: str, record: R, previous_state: str | None, finished: Sequence[FinishedSpan] = ()
    ) -> None:
        """Write the record, move its id to its state's listing (a run's first save, with no
        previous state, also lists it by creation), record the spans that ended."""
        await self._repository.save(run_id, record)
        state = self.state_of(record)
        if previous_state is None:
            await self._index.add(run_id, state, self.created_of(record))
        elif previous_state != state:
            await self._index.move(run_id, previous_state, state)
        for span in finished:
            span.record()

    async def page(self, state: str | None, limit: int, offset: int) -> tuple[int, list[R]]:
        """How many runs are in `state`, and one page of their records (by id); with no state,
        every run, the newest first. A listed run with no record is left out of the page."""
        ids = sorted(await self._index.list(state)) if state is not None else await self._index.newest_first()
        chosen = ids[offset : offset + limit]
        found = await self._repository.get_many(chosen)
        page = [found[i].value for i in chosen if i in found]
        return len(ids), [r for r in page if state is None or self.state_of(r) == state]


@dataclass(frozen=True)
class Breakdown(Generic[R]):
    """How a service ends one of its runs that broke down (`end_broken_run`)."""

    id_key: str
    """The run's id in log lines and span attributes (`plan_id`)."""
    failed_span: str
    """The span of this step, in the run's trace (`planning.failed`)."""
    run_span: str
    """The whole run's span, recorded as the run ends (`planning.run`)."""
    state_attribute: str
    """The span attribute of the run's final state (`agora.plan_state`)."""
    traceparent: str
    """The run's span, chosen when it started."""
    parent_traceparent: str | None
    failed_at: datetime
    fresh: Callable[[], R]
    """The record of a run that broke down before its first save."""
    failed: Callable[[R], R | None]
    """The record ended FAILED, its revision counted; None when it had already ended."""


async def end_broken_run(records: RunRecords[R], run_id: str, failure: RunFailure, how: Breakdown[R]) -> R:
    """End the record of a run that broke down: an ERROR line and a failed span in its trace,
    the record FAILED with the reason (a record that already ended stays as it is), the run's
    span recorded with the error. Its result: the record to announce. Idempotent, as activities
    are."""
    with step_span(how.failed_span, how.traceparent, {f"agora.{how.id_key}": run_id}) as span:
        span.set_status(Status(StatusCode.ERROR, failure.reason))
        log.error(
            "run broke down; it ends FAILED",
            extra={how.id_key: run_id, "error_type": failure.error_type, "reason": failure.reason},
        )
    stored = await records.get(run_id)
    record = stored if stored is not None else how.fresh()
    ended = how.failed(record)
    if ended is None:
        return record
    previous = records.state_of(stored) if stored is not None else None
    run_span = FinishedSpan(
        name=how.run_span,
        traceparent=how.traceparent,
        parent=how.parent_traceparent,
        start=records.created_of(ended),
        end=how.failed_at,
        attributes={f"agora.{how.id_key}": run_id, how.state_attribute: records.state_of(ended),
                    "agora.error_type": failure.error_type},
    )  # fmt: skip
    await records.save(run_id, ended, previous, [run_span])
    return ended


def run_trace(run_id: str, kind: str) -> tuple[str, str | None]:
    """The traceparent of a run's span (its ids fixed now, recorded when the run ends) and the
    current one (its parent): every step of the run is a descendant."""
    parent = current_traceparent()
    return span_traceparent(parent, stable_span_id(run_id, kind)), parent


def event_or_check(
    ctx: DaprWorkflowContext,
    event: str,
    check: str,
    check_input: BaseModel,
    *,
    every: timedelta,
    at_most: timedelta | None = None,
    timeout: timedelta | None,
) -> WorkflowSteps:
    """Wait for `event`, running the activity `check` meanwhile, after `every` and then at
    intervals doubling up to `at_most` (without it: every `every`): the event's data, or the
    first answer of the check that is not None (what the event would have said, when its signal
    was lost on the way), or None once `timeout` passed without either (None: no timeout). One
    waiter serves every interval: a second waiter for the same name would never hear the event.
    The doubling keeps a long wait's history short."""
    deadline = workflow_now(ctx) + timeout if timeout is not None else None
    waiting = ctx.wait_for_external_event(event)
    interval = every
    while True:
        pause = interval if deadline is None else min(deadline - workflow_now(ctx), interval)
        first = yield when_any([waiting, ctx.create_timer(max(pause, timedelta(seconds=1)))])
        if first is waiting:
            return waiting.get_result()
        checked = yield ctx.call_activity(check, input=check_input, retry_policy=ACTIVITY_RETRY)
        if checked is not None:
            return checked
        if deadline is not None and workflow_now(ctx) >= deadline:
            return None
        if at_most is not None:
            interval = min(interval * 2, at_most)


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
