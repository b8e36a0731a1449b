"""Dapr Workflow for the services whose work takes many steps and must survive crashes (plans,
debates, graph runs, an agent app's runs): the app registers workflows and activities, the
sidecar's workflow engine keeps their history in the actor state store and drives them through
the scheduler.

Why Dapr Workflow and not a home-made loop: a workflow's code is replayed from its recorded
history after a crash of the app or its sidecar, so each step's result (an activity, a
child workflow, an external event, a timer) is recorded once and never redone; waiting for a
market outcome or a person's decision is an external event, a deadline a durable timer.

`WorkflowHost` is the part every such service shares: one `WorkflowRuntime` on the app's own
sidecar (gRPC), started once the app is warm and stopped on shutdown. The runtime executes
activities on its own thread and event loop; `WorkflowHost.activity` runs each on the app's
loop instead, where the app's pooled sidecar client, state repositories and tracing live.

Every activity and workflow is declared once, next to its models, as an `ActivityRef` or a
`WorkflowRef`: its name (recorded in each run's history: renaming one breaks the runs in
flight), the model it takes and the type it gives back. The app registers a function of exactly
that type (`WorkflowHost.activity`, `WorkflowHost.workflow`) and a workflow calls it through the
reference (`ActivityRef.run`, `ActivityRef.schedule`), so mypy checks both sides, as
`agora.core.topics` does for topics. A person's decision reaches the run it paused the same way
for every kind of run (`Decisions`); a run that keeps its record as it goes (plans, debates)
holds it in a `DurableRun`, and ends for the world through `RunEnds`.

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
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeAlias, TypeVar

import grpc  # type: ignore[import-untyped]
import httpx
from dapr.ext.workflow import (
    DaprWorkflowContext,
    RetryPolicy,
    TaskFailedError,
    WorkflowActivityContext,
    WorkflowRuntime,
    WorkflowState,
    WorkflowStatus,
    when_all,
    when_any,
)
from dapr.ext.workflow.aio import DaprWorkflowClient
from dapr.ext.workflow.logger import LoggerOptions
from opentelemetry import context as otel_context
from opentelemetry.trace import Span, Status, StatusCode
from pydantic import BaseModel, Field, TypeAdapter

from agora.core.errors import AgoraError
from agora.core.escalation.decisions import EscalationResponse
from agora.core.limits import MAX_ID_CHARS, MAX_NOTE_CHARS
from agora.core.messages import EscalationResolved
from agora.core.topics import Channel
from agora.runtime.clients import EscalationActors
from agora.runtime.dapr_private import NonRetryableError, Task
from agora.runtime.decisions import verified
from agora.runtime.patches import WorkflowPatch
from agora.runtime.pubsub import Publisher, RejectMessage
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

if TYPE_CHECKING:
    from typing_extensions import TypeForm

log = logging.getLogger(__name__)

T = TypeVar("T")
A = TypeVar("A")
In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out")
M = TypeVar("M", bound=BaseModel)
C = TypeVar("C", bound=BaseModel)

Steps: TypeAlias = Generator[Any, Any, T]
"""A workflow's steps (its generator): what it yields is the engine's (tasks to wait on), what it
returns is a `T`."""
WorkflowSteps = Steps[Any]

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


# -- steps and their types -----------------------------------------------------------------------


@dataclass(frozen=True)
class Pending(Generic[T]):
    """A step a workflow scheduled (an activity, a child workflow, an event) and how its recorded
    result reads as a `T`: yield `task` (alone, or in `when_all`/`when_any` with others) and read
    what it recorded with `result`; or `yield from wait()`."""

    task: Task[Any]
    read: Callable[[Any], T]

    def result(self, recorded: Any) -> T:
        return self.read(recorded)

    def wait(self) -> Steps[T]:
        """The step alone: its result."""
        return self.read((yield self.task))


class ActivityRef(Generic[In, Out]):
    """An activity: its name, the model it takes and what it gives back (a model, a model or
    None, None), declared once as a module-level constant next to those models.

        ESTIMATE = ActivityRef("plan.estimate", Estimate, Estimated)
        estimated = yield from ESTIMATE.run(ctx, Estimate(task=...))   # in a workflow: an Estimated
        host.activity(ESTIMATE, activities.estimate)                   # estimate(Estimate) -> Estimated
    """

    __slots__ = ("gives", "name", "takes")

    def __init__(self, name: str, takes: type[In], gives: TypeForm[Out]) -> None:
        self.name = name
        """Recorded in every run's history: renaming an activity breaks the runs in flight."""
        self.takes = takes
        self.gives: TypeAdapter[Out] = TypeAdapter(gives)

    def __repr__(self) -> str:
        return f"ActivityRef({self.name!r})"

    def schedule(self, ctx: DaprWorkflowContext, argument: In) -> Pending[Out]:
        """The activity scheduled now (retried with backoff on transient failures), to wait on
        alone or side by side with other steps. The order steps are scheduled in is part of the
        run's history: a step that goes with a save held back is scheduled before it."""
        task: Task[Any] = ctx.call_activity(self.name, input=argument, retry_policy=ACTIVITY_RETRY)
        return Pending(task, self.gives.validate_python)

    def run(self, ctx: DaprWorkflowContext, argument: In) -> Steps[Out]:
        """The activity as a step of its own: its result."""
        return (yield from self.schedule(ctx, argument).wait())


class WorkflowRef(Generic[In, Out]):
    """A workflow: its name, the model it starts from and what it ends with, declared once
    beside its models; registered with `WorkflowHost.workflow`, started with
    `WorkflowHost.start_once` or as a child (`child`)."""

    __slots__ = ("gives", "name", "takes")

    def __init__(self, name: str, takes: type[In], gives: TypeForm[Out]) -> None:
        self.name = name
        """Recorded in the histories of its runs and of their parents."""
        self.takes = takes
        self.gives: TypeAdapter[Out] = TypeAdapter(gives)

    def __repr__(self) -> str:
        return f"WorkflowRef({self.name!r})"

    def child(self, ctx: DaprWorkflowContext, argument: In, *, instance_id: str) -> Pending[Out]:
        """A run of this workflow started now as a child of the workflow `ctx` runs: its result."""
        task: Task[Any] = ctx.call_child_workflow(self.name, input=argument, instance_id=instance_id)
        return Pending(task, self.gives.validate_python)


def all_of(steps: Sequence[Pending[T]]) -> Steps[list[T]]:
    """`steps` side by side (one `when_all`): their results, in order."""
    recorded = yield when_all([step.task for step in steps])
    return [step.result(r) for step, r in zip(steps, recorded, strict=True)]


def side_by_side(first: Pending[A], rest: Sequence[Pending[T]]) -> Steps[tuple[A, list[T]]]:
    """`first` and `rest` side by side (one `when_all`): the first's result and the others'."""
    head, *tail = yield when_all([first.task, *(step.task for step in rest)])
    return first.result(head), [step.result(r) for step, r in zip(rest, tail, strict=True)]


# -- failures ------------------------------------------------------------------------------------


class RunFailure(BaseModel):
    """Why a workflow's steps broke down: the error's type and message, as the run's reason."""

    error_type: str
    reason: str = Field(max_length=MAX_NOTE_CHARS)


def failure_of(error: Exception) -> RunFailure:
    """A failure as a run's reason: an activity's (or child workflow's) error as the engine
    recorded it, or the workflow code's own."""
    if isinstance(error, TaskFailedError):
        error_type, message = error.details.error_type, error.details.message
    else:
        error_type, message = type(error).__name__, str(error)
    reason = f"the run broke down: {error_type}: {message}"
    return RunFailure(error_type=error_type, reason=reason[:MAX_NOTE_CHARS])


def guarded(
    steps: Callable[[DaprWorkflowContext, A], Steps[T]],
    on_failure: Callable[[DaprWorkflowContext, A, RunFailure], Steps[Any]],
) -> Callable[[DaprWorkflowContext, A], Steps[T | None]]:
    """`steps`, and when they raise (an activity that failed for good, a defect in the workflow
    code), `on_failure`'s steps instead, so the run ends on its own terms rather than as a
    FAILED workflow nobody watches. The handler's own steps are recorded like any others: a
    crash while it runs resumes it, not the broken steps."""

    def run(ctx: DaprWorkflowContext, argument: A) -> Steps[T | None]:
        try:
            return (yield from steps(ctx, argument))
        except Exception as error:
            yield from on_failure(ctx, argument, failure_of(error))
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

    def workflow(
        self,
        ref: WorkflowRef[In, Out],
        steps: Callable[[DaprWorkflowContext, In], Steps[Out]],
        on_failure: Callable[[DaprWorkflowContext, In, RunFailure], Steps[None]] | None = None,
    ) -> None:
        """Register the generator function `steps` as the workflow `ref`: its input arrives as
        JSON and reaches it as `ref`'s model, its result is recorded as JSON. A top-level run whose
        record people watch passes `on_failure`, which ends that record when the steps break down
        (`guarded`); a child workflow leaves its failure to its parent."""
        runs = guarded(steps, on_failure) if on_failure is not None else steps

        def run(ctx: DaprWorkflowContext, raw: Any) -> WorkflowSteps:
            result = yield from runs(ctx, ref.takes.model_validate(raw))
            return None if result is None else ref.gives.dump_python(result, mode="json")

        run.__name__ = ref.name
        self._runtime.register_workflow(run, name=ref.name)

    def activity(self, ref: ActivityRef[In, Out], work: Callable[[In], Awaitable[Out]]) -> None:
        """Register `work` as the activity `ref`: its input is validated into `ref`'s model, and it
        runs on the app's event loop."""
        name = ref.name

        async def run(_: WorkflowActivityContext, raw: Any) -> Any:
            loop = self._loop
            if loop is None:
                raise RuntimeError("the workflow host has not started")
            try:
                argument = ref.takes.model_validate(raw)
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

    async def start_once(self, workflow: WorkflowRef[In, Any], instance_id: str, argument: In) -> bool:
        """Schedule `workflow` as `instance_id` unless an instance of that id exists (a repeated
        request, a redelivery); whether it was scheduled now. An existing instance that has not
        started yet is woken with an event: one created just as the app's workflow worker went
        away (a crash mid-request, the request then redelivered) was seen to wait a minute or
        more for its first step after the worker came back, where any event gets it going."""
        if await self.wake_if_pending(instance_id):
            return False
        await self.client.schedule_new_workflow(
            workflow.name, input=argument.model_dump(mode="json"), instance_id=instance_id
        )
        return True

    async def wake_if_pending(self, instance_id: str) -> bool:
        """Whether an instance of that id exists; one that has not started yet is woken with
        an event (a request for it again, a redelivery: see `start_once`)."""
        existing = await self._state(instance_id, fetch_payloads=False)
        if existing is None:
            return False
        if existing.runtime_status is WorkflowStatus.PENDING:
            log.info("a run not started yet is woken", extra={"instance_id": instance_id})
            await self.client.raise_workflow_event(instance_id, WAKE_EVENT, data=None)
        return True

    async def terminate_if_running(self, instance_id: str, reason: str) -> bool:
        """End an instance that has not ended (scheduled, running or suspended) where it stands,
        its steps not run further; whether there was one."""
        state = await self._state(instance_id, fetch_payloads=False)
        if state is None or state.runtime_status not in (
            WorkflowStatus.PENDING, WorkflowStatus.RUNNING, WorkflowStatus.SUSPENDED
        ):  # fmt: skip
            return False
        await self.client.terminate_workflow(instance_id, output=reason)
        return True

    async def starting(self, instance_id: str, model: type[M]) -> tuple[M, datetime] | None:
        """The input of an instance that is scheduled or running, and when it was scheduled;
        None when there is no such instance or it has ended. A run's record is saved by its
        first step, so a run scheduled a moment ago has none yet: its reader shows it as just
        started instead of unknown."""
        state = await self._state(instance_id, fetch_payloads=True)
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
        state = await self._state(instance_id, fetch_payloads=True)
        if state is None or state.serialized_input is None:
            return None
        return model.model_validate_json(state.serialized_input)

    async def _state(self, instance_id: str, *, fetch_payloads: bool) -> WorkflowState | None:
        """An instance's state, as the engine has it (None: no such instance); a read that
        overlapped the instance's own save is asked again (`read_again_if_torn`)."""
        return await read_again_if_torn(
            lambda: self.client.get_workflow_state(instance_id, fetch_payloads=fetch_payloads)
        )

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


TORN_READ = "transient store read failure"
"""What daprd 1.18 says when a read of an instance's state overlapped a save of it (`inbox key
... declared in metadata ... but missing from state store (transient store read failure or
partial save?)`): the state is whole a moment later."""
TORN_READ_ATTEMPTS = 4


async def read_again_if_torn(read: Callable[[], Awaitable[T]]) -> T:
    """`read`'s answer; a read refused as torn (`TORN_READ`) is asked again, up to
    `TORN_READ_ATTEMPTS` times, 50 ms later and then twice as long each time."""
    for attempt in range(TORN_READ_ATTEMPTS):
        try:
            return await read()
        except grpc.aio.AioRpcError as error:
            if attempt + 1 == TORN_READ_ATTEMPTS or TORN_READ not in (error.details() or ""):
                raise
            await asyncio.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable: the last attempt returns or raises")


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


# -- a run's record ------------------------------------------------------------------------------


class RunRecord(Protocol):
    """What the shared parts of a run read of its record, a pydantic model (`PlanRecord`,
    `DebateRecord`): its trace, its revision, counted at every save, and when it was saved."""

    @property
    def revision(self) -> int: ...

    @property
    def updated_at(self) -> datetime: ...

    @property
    def traceparent(self) -> str | None: ...

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self: ...


R = TypeVar("R", bound=RunRecord)
S = TypeVar("S", bound=BaseModel)


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


class DurableRun(Generic[R, S]):
    """A run's record as its workflow keeps it (plans, debates): saved whole by an activity
    (`save`, taking an `S`), each save counting a revision and moving the record's state in its
    service's listing from the state saved before.

    A save may be held back (`save_later`) and go side by side with the step that follows
    (`along`), or inside that step's own input (`held_save`), instead of as a step of its own: a
    run begun by a version that saved at once (`holds_saves` False: the patch that brought this
    is not in its history) saves at once still, as its history recorded."""

    def __init__(
        self,
        ctx: DaprWorkflowContext,
        record: R,
        saves: ActivityRef[S, None],
        save_of: Callable[[R, R | None, list[FinishedSpan]], S],
        *,
        holds_saves: bool,
    ) -> None:
        self.ctx = ctx
        self.record = record
        """The record as it stands (saved or not)."""
        self.unsaved = False
        """Whether a save of `record` is held back."""
        self._saves = saves
        self._save_of = save_of
        self._holds_saves = holds_saves
        self._saved: R | None = None
        self._held: list[FinishedSpan] = []

    def saving(self, updated: R, *finished: FinishedSpan) -> S:
        """The save of `updated`, with the spans held back for it: the record as it now stands
        (its revision counted) and the one saved before (for its state)."""
        previous, self._saved = self._saved, updated
        self.record = updated.model_copy(update={"revision": updated.revision + 1})
        spans, self._held, self.unsaved = [*self._held, *finished], [], False
        return self._save_of(self.record, previous, spans)

    def held_save(self) -> S | None:
        """The save held back, if any, for a step that carries it in its own input."""
        return self.saving(self.record) if self.unsaved else None

    def save(self, updated: R, *finished: FinishedSpan) -> Steps[None]:
        """Save `updated` as a step of its own."""
        yield from self._saves.run(self.ctx, self.saving(updated, *finished))

    def save_later(self, updated: R, *finished: FinishedSpan) -> Steps[None]:
        """Hold the save of `updated` for the step that follows (a run begun before saves were
        held: save now)."""
        if not self._holds_saves:
            yield from self.save(updated, *finished)
            return
        self.record, self.unsaved = updated, True
        self._held.extend(finished)

    def along(self, steps: Sequence[Pending[T]]) -> Steps[list[T]]:
        """`steps` (scheduled just before) side by side with the save held back, if any: their
        results, in order. A single step with no save to carry goes alone."""
        if not self.unsaved:
            if len(steps) == 1:
                return [(yield from steps[0].wait())]
            return (yield from all_of(steps))
        saving = self._saves.schedule(self.ctx, self.saving(self.record))
        _, results = yield from side_by_side(saving, steps)
        return results

    def flush(self) -> Steps[None]:
        """The save held back, if any, as a step of its own (before a step that cannot carry it)."""
        if self.unsaved:
            yield from self.save(self.record)


@dataclass(frozen=True)
class RunEnds(Generic[R, C]):
    """How a service's runs end for the world (plans, debates): a run's end announced on its
    channel (`announce`), and a run whose steps broke down ended FAILED and announced (`fail`).
    What sets one kind of run apart is given here; both steps are activities, idempotent."""

    records: RunRecords[R]
    publisher: Publisher
    completed: Channel[C]
    announcement: Callable[[R], C]
    run_id: Callable[[R], str]
    has_ended: Callable[[R], bool]
    broke_down: Callable[[R, str, datetime], R]
    """The record ended FAILED with the reason, at that time."""
    id_key: str
    """The run's id in log lines and span attributes (`plan_id`)."""
    run_span: str
    """The whole run's span, recorded as the run ends (`planning.run`)."""
    failed_span: str
    """The span of the end of a run that broke down, in the run's trace (`planning.failed`)."""
    completed_span: str
    """The span of the announcement (`planning.completed`)."""
    state_attribute: str
    """The span attribute of the run's state (`agora.plan_state`)."""

    async def announce(self, record: R) -> None:
        """The end of the run on its channel (its id and revision as the event's id: a repeat is
        one event)."""
        with step_span(
            self.completed_span, record.traceparent, {self.state_attribute: self.records.state_of(record)}
        ):
            await self.publisher.publish(
                self.completed,
                self.announcement(record),
                message_id=f"{self.run_id(record)}.completed.{record.revision}",
            )

    async def fail(
        self,
        run_id: str,
        failure: RunFailure,
        *,
        failed_at: datetime,
        traceparent: str,
        parent_traceparent: str | None,
        fresh: Callable[[], R],
    ) -> None:
        """End the record of a run that broke down and announce it: an ERROR line and a failed
        span in its trace, the record FAILED with the reason (a record that already ended stays
        as it is; `fresh`: the record of a run that broke down before its first save), the run's
        span recorded with the error."""
        with step_span(self.failed_span, traceparent, {f"agora.{self.id_key}": run_id}) as span:
            span.set_status(Status(StatusCode.ERROR, failure.reason))
            log.error(
                "run broke down; it ends FAILED",
                extra={self.id_key: run_id, "error_type": failure.error_type, "reason": failure.reason},
            )
        stored = await self.records.get(run_id)
        record = stored if stored is not None else fresh()
        if self.has_ended(record):
            await self.announce(record)
            return
        broken = self.broke_down(record, failure.reason, failed_at)
        ended = broken.model_copy(update={"revision": broken.revision + 1})
        previous = self.records.state_of(stored) if stored is not None else None
        run_span = FinishedSpan(
            name=self.run_span,
            traceparent=traceparent,
            parent=parent_traceparent,
            start=self.records.created_of(ended),
            end=failed_at,
            attributes={f"agora.{self.id_key}": run_id, self.state_attribute: self.records.state_of(ended),
                        "agora.error_type": failure.error_type},
        )  # fmt: skip
        await self.records.save(run_id, ended, previous, [run_span])
        await self.announce(ended)


def run_trace(run_id: str, kind: str) -> tuple[str, str | None]:
    """The traceparent of a run's span (its ids fixed now, recorded when the run ends) and the
    current one (its parent): every step of the run is a descendant."""
    parent = current_traceparent()
    return span_traceparent(parent, stable_span_id(run_id, kind)), parent


# -- a person's decision -------------------------------------------------------------------------


def decision_event(escalation_id: str) -> str:
    """The workflow event that carries the decision on `escalation_id` to the run it paused."""
    return f"decision.{escalation_id}"


D = TypeVar("D", bound=BaseModel)

DECISION_ON_RECORD_FIRST = timedelta(seconds=60)
"""How long a run waits for a decision's event before it first reads its escalation's record."""
DECISION_ON_RECORD_AT_MOST = timedelta(minutes=10)
"""The longest time between readings (each doubles the last): a wait of a day reads about 150 times."""


class DecisionOnRecord(BaseModel):
    """What a run waiting for a person reads now and then: its escalation's record."""

    escalation_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)


class Decisions(Generic[D]):
    """How a person's decision reaches the workflow run it paused: announced on
    `agora.escalation.resolved`, checked against its escalation's record, raised to the run as the
    event `decision.<escalation id>` carrying a `D` (`relay`), which the run waits for (`wait`).

    A run begun with `patch` also reads the record now and then while it waits (the activity
    `on_record`, whose work `reading` gives its app to register): an announcement can be held up in
    the broker for as long as a subscriber's connection lives (RabbitMQ, docs/guarantees.md),
    and the record is the source of truth either way. Without them, `wait` waits for the event
    alone (an agent's run, whose wait races its deadline)."""

    def __init__(
        self,
        data: type[D],
        carried: Callable[[EscalationResolved], D],
        *,
        on_record: ActivityRef[DecisionOnRecord, D | None] | None = None,
        patch: WorkflowPatch | None = None,
    ) -> None:
        self.data = data
        self.carried = carried
        """The event's data, made of the decision; it refuses (`RejectMessage`) a decision of a
        kind the run cannot take."""
        self.on_record = on_record
        self.patch = patch

    def waiting(self, ctx: DaprWorkflowContext, escalation_id: str) -> Pending[D]:
        """The wait for the decision's event on `escalation_id`, to race with other steps."""
        return Pending(ctx.wait_for_external_event(decision_event(escalation_id)), self.data.model_validate)

    def wait(self, ctx: DaprWorkflowContext, escalation_id: str) -> Steps[D]:
        """The decision on `escalation_id`, once its event came or its record holds it."""
        if self.on_record is None or self.patch is None or not self.patch.applies(ctx):
            return (yield from self.waiting(ctx, escalation_id).wait())
        decided = yield from event_or_check(
            ctx,
            decision_event(escalation_id),
            self.on_record,
            DecisionOnRecord(escalation_id=escalation_id),
            every=DECISION_ON_RECORD_FIRST,
            at_most=DECISION_ON_RECORD_AT_MOST,
            timeout=None,
        )
        assert decided is not None, "a wait without a timeout ends with a decision"
        return decided

    def reading(
        self, escalations: EscalationActors
    ) -> Callable[[DecisionOnRecord], Coroutine[Any, Any, D | None]]:
        """The work of `on_record`: the decision the escalation's record holds, or None while it
        holds none (or one the run cannot take, which its announcement is refused for too)."""

        async def on_record(lookup: DecisionOnRecord) -> D | None:
            record = await escalations(lookup.escalation_id).get()
            if record.decision is None:
                return None
            try:
                return self.carried(EscalationResolved.of(record))
            except RejectMessage as refused:
                log.warning(
                    "a decision on record is not one this run can take; it waits on",
                    extra={"escalation_id": lookup.escalation_id, "reason": str(refused)[:300]},
                )
                return None

        return on_record

    async def relay(
        self, host: WorkflowHost, escalations: EscalationActors, event: EscalationResolved, instance_id: str
    ) -> None:
        """Raise the announced decision to the run `instance_id` once its escalation's record holds
        exactly that decision (`UnverifiedDecision`, permanent, otherwise)."""
        await verified(escalations, event)
        data = self.carried(event)
        await host.client.raise_workflow_event(
            instance_id, decision_event(event.escalation_id), data=data.model_dump(mode="json")
        )


def escalation_answer(event: EscalationResolved, decided: str) -> EscalationResponse:
    """The decision of a run that takes an escalation's answer only (`decided`: what it decides,
    for the refusal of a checkpoint's answer)."""
    if not isinstance(event.decision, EscalationResponse):
        raise RejectMessage(f"{decided} is decided with an escalation answer, not a checkpoint answer")
    return event.decision


# -- waits and time ------------------------------------------------------------------------------


def event_or_check(
    ctx: DaprWorkflowContext,
    event: str,
    check: ActivityRef[In, Out],
    check_input: In,
    *,
    every: timedelta,
    at_most: timedelta | None = None,
    timeout: timedelta | None,
) -> Steps[Out | None]:
    """Wait for `event`, running the activity `check` meanwhile, after `every` and then at
    intervals doubling up to `at_most` (without it: every `every`): the event's data (read as
    what the check gives), or the first answer of the check that is not None (what the event
    would have said, when its signal was lost on the way), or None once `timeout` passed without
    either (None: no timeout). One waiter serves every interval: a second waiter for the same
    name would never hear the event. The doubling keeps a long wait's history short."""
    deadline = workflow_now(ctx) + timeout if timeout is not None else None
    waiting = ctx.wait_for_external_event(event)
    interval = every
    while True:
        pause = interval if deadline is None else min(deadline - workflow_now(ctx), interval)
        first = yield when_any([waiting, ctx.create_timer(max(pause, timedelta(seconds=1)))])
        if first is waiting:
            return check.gives.validate_python(waiting.get_result())
        checked = yield from check.run(ctx, check_input)
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
