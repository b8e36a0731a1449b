"""The small app shell every service shares: FastAPI app with tracing, health, readiness,
subscriptions, actors, typed errors and graceful shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypeVar

import uvicorn
from fastapi import FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.telemetry import TelemetryConfig
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agora.core.errors import (
    AgoraError,
    Internal,
    InvalidArgument,
    PayloadTooLarge,
    Unavailable,
    describe_field_errors,
    error_for_status,
    field_errors,
)
from agora.core.limits import ID_PATTERN, MAX_BODY_BYTES, MAX_ID_CHARS
from agora.runtime.actor_host import (
    ActorHosting,
    ModelSerializer,
    PydanticActor,
    SidecarActorClient,
    StateSerializer,
)
from agora.runtime.dapr_calls import DaprCalls
from agora.runtime.http_server import OneWriteHttpToolsProtocol
from agora.runtime.logs import configure_logging
from agora.runtime.pubsub import MessageDeduplicator, ProcessedMarker, Publisher, Subscriptions
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprError, DaprSidecar, SidecarUnavailable
from agora.runtime.state import StateRepository
from agora.runtime.tracing import configure_tracing, shutdown_tracing
from agora.runtime.workflows import WorkflowHost

log = logging.getLogger(__name__)

M = TypeVar("M")
D = TypeVar("D")

UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/dapr/config", "/dapr/subscribe"})

HTTP_TELEMETRY: TelemetryConfig = {
    # FastAPI's own OpenTelemetry support: a SERVER span per request that continues the
    # caller's `traceparent` (service invocation, actor methods, deliveries), named after the
    # route template. Probes and Dapr's discovery calls are left out.
    "tracing": True,
    "operation_spans": False,
    "metrics": False,
    "logs": False,
    "exclude": lambda scope: scope.get("path") in UNTRACED_PATHS,
}


__all__ = [
    "PathId",
    "ServiceContext",
    "ServiceModule",
    "answer_error",
    "check_deadline_ahead",
    "create_service_app",
    "serve",
]

PathId = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS, pattern=ID_PATTERN)]
"""An id in a route's path: anything but a valid id (control characters, `|`, too long) is
refused at the edge with 422 INVALID_ARGUMENT, before it reaches an actor or a key."""

LIMITED_PATH_PREFIX = "/v1/"
"""The public APIs, whose bodies are bounded by `MAX_BODY_BYTES`. Dapr's own calls into the
app (actor methods, pub/sub deliveries) are bounded by the sidecar's body limit instead, and
their payloads by the contract models' field bounds."""


class BodyLimit:
    """Refuses a request body over `max_bytes` with 413 PAYLOAD_TOO_LARGE: at once when the
    declared Content-Length is too large, else as soon as the bytes received pass the limit
    (chunked uploads), so nothing is parsed or stored."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self._app = app
        self._max = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(LIMITED_PATH_PREFIX):
            await self._app(scope, receive, send)
            return
        declared = next((v for k, v in scope.get("headers", []) if k == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self._max:
            await answer_error(self._refusal(int(declared)))(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self._max:
                    # FastAPI passes an HTTPException raised while it reads the body through
                    # (any other error there becomes a 400); it is answered as PAYLOAD_TOO_LARGE.
                    raise HTTPException(413, self._refusal(received, at_least=True).message)
            return message

        await self._app(scope, limited, send)

    def _refusal(self, size: int, *, at_least: bool = False) -> PayloadTooLarge:
        sent = f"at least {size}" if at_least else str(size)
        return PayloadTooLarge(
            f"the request body ({sent} bytes) is larger than the limit of {self._max} bytes",
            limit_bytes=self._max,
        )


def check_deadline_ahead(deadline: datetime | None, field: str = "deadline") -> None:
    """Refuse (422 INVALID_ARGUMENT naming `field`) a deadline that has already passed: work
    accepted with it could only fail a moment later."""
    if deadline is None:
        return
    now = datetime.now(UTC)
    if deadline <= now:
        message = f"{deadline.isoformat()} has already passed (it is now {now.isoformat(timespec='seconds')})"
        raise InvalidArgument(
            f"invalid request: {field}: {message}",
            errors=[{"loc": ["body", field], "msg": message, "type": "deadline_passed"}],
        )


async def _stop_modules(ctx: ServiceContext, modules: Sequence[ServiceModule], grace_seconds: float) -> None:
    for module in modules:
        if module.stop is None:
            continue
        try:
            async with asyncio.timeout(grace_seconds):
                await module.stop(ctx)
        except Exception as exc:  # shutting down goes on: the module's own work decides the rest
            log.warning("a module's stop failed", extra={"module": module.name, "reason": repr(exc)[:500]})


def answer_error(error: AgoraError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The one way every app answers an error: its `ErrorBody` with its HTTP status."""
    return JSONResponse(error.body().model_dump(mode="json"), status_code=error.http_status, headers=headers)


@dataclass
class ServiceContext:
    """What a service's code receives: its settings and its ways to reach Dapr."""

    settings: ServiceSettings
    sidecar: DaprSidecar
    publisher: Publisher
    subscriptions: Subscriptions
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    daemons: set[asyncio.Task[Any]] = field(default_factory=set)
    hosted_actors: list[ActorHosting[Any]] = field(default_factory=list)
    workflow_host: WorkflowHost | None = None

    def workflows(self) -> WorkflowHost:
        """The app's one workflow runtime (created on first use; modules register their
        workflows and activities on it during setup; it starts once the sidecar is up)."""
        if self.workflow_host is None:
            self.workflow_host = WorkflowHost(self.settings.dapr_host, self.settings.dapr_grpc_port)
        return self.workflow_host

    def host_actor(self, actor_type: type[PydanticActor[Any, D]], deps: D) -> None:
        """Host `actor_type` in this app; every instance is built with `deps`."""
        self.hosted_actors.append(ActorHosting(actor_type, deps))

    def repository(self, namespace: str, model: type[M]) -> StateRepository[M]:
        return StateRepository(self.sidecar, self.settings.state_store, namespace, model)

    def spawn(self, work: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run `work` after the current request returns (a subscription acknowledges at once
        and the work goes on); shutdown waits for it like for an in-flight request."""
        task = asyncio.create_task(work, name=name)
        self.background.add(task)
        task.add_done_callback(self._finished)
        return task

    def spawn_daemon(self, work: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run `work` (a loop) for the app's lifetime; shutdown cancels it without waiting."""
        task = asyncio.create_task(work, name=name)
        self.daemons.add(task)
        task.add_done_callback(self.daemons.discard)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self.background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background work failed", exc_info=task.exception(), extra={"work": task.get_name()})


@dataclass(frozen=True)
class ServiceModule:
    """One service's contribution to an app: routes, subscriptions and hosted actors (`setup`),
    and start-up work gating readiness (`warm_up`). An app hosts one module (a deployment) or
    several (the embedded default, where every service shares one sidecar)."""

    name: str
    setup: Callable[[ServiceContext, FastAPI], None]
    warm_up: Callable[[ServiceContext], Awaitable[None]] | None = None
    stop: Callable[[ServiceContext], Awaitable[None]] | None = None
    """Work on shutdown while the sidecar is still reachable (e.g. withdrawing registrations);
    bounded by the shutdown grace period, a failure only logged."""


def create_service_app(settings: ServiceSettings, modules: Sequence[ServiceModule]) -> FastAPI:
    """Build the app hosting `modules`: their routes, subscriptions and actors, health and
    readiness probes (ready once every module's `warm_up` succeeded), typed errors, tracing,
    and a shutdown that lets in-flight handlers and background work finish."""
    configure_logging(settings.app_id, settings.log_level)
    configure_tracing(settings.app_id)
    sidecar = DaprSidecar(settings)
    publisher = Publisher(sidecar, settings)
    deduplicator = MessageDeduplicator(
        StateRepository(sidecar, settings.state_store, "pubsub:processed", ProcessedMarker),
        ttl_seconds=settings.dedupe_ttl_seconds,
    )
    ctx = ServiceContext(settings, sidecar, publisher, Subscriptions(settings, publisher, deduplicator))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if ctx.hosted_actors:
            from dapr.actor.runtime.config import ActorRuntimeConfig
            from dapr.actor.runtime.runtime import ActorRuntime
            from dapr.ext.fastapi import DaprActor

            dapr_actor = DaprActor(app)
            ActorRuntime.set_actor_config(
                ActorRuntimeConfig(
                    actor_idle_timeout=timedelta(seconds=settings.actor_idle_seconds),
                    actor_scan_interval=timedelta(seconds=min(30, settings.actor_idle_seconds)),
                )
            )
            for hosting in ctx.hosted_actors:
                hosting.resolve_annotations()
                await dapr_actor.register_actor(
                    hosting.actor_type,
                    message_serializer=ModelSerializer(),
                    state_serializer=StateSerializer(),
                    actor_factory=hosting.factory,
                    actor_client=SidecarActorClient(sidecar),
                )
        warming = asyncio.create_task(_warm(ctx, modules), name="warm-up")
        warming.add_done_callback(_warm_up_ended)
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not on every platform
            asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, _log_tasks)
        log.info("service started", extra={"app_port": settings.app_port})
        try:
            yield
        finally:
            ctx.ready.clear()
            warming.cancel()
            for daemon in list(ctx.daemons):
                daemon.cancel()
            await _stop_modules(ctx, modules, settings.shutdown_grace_seconds)
            if ctx.workflow_host is not None:
                # Workflows stop taking work first; the engine hands unfinished steps to the
                # next runtime that connects (this app restarted, or another replica).
                await ctx.workflow_host.stop()
            await _drain(ctx, settings.shutdown_grace_seconds)
            await sidecar.aclose()
            log.info("service stopped")
            shutdown_tracing()

    title = "Agora " + ", ".join(module.name for module in modules)
    app = FastAPI(title=title, lifespan=lifespan, telemetry=HTTP_TELEMETRY)
    app.state.ctx = ctx

    @app.exception_handler(AgoraError)
    async def typed_error(_: Request, exc: AgoraError) -> JSONResponse:
        return answer_error(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        everything = list(exc.errors())
        errors = field_errors(everything)
        summary = describe_field_errors(errors, len(everything))
        return answer_error(InvalidArgument(f"invalid request: {summary}", errors=errors))

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == PayloadTooLarge.http_status:
            return answer_error(PayloadTooLarge(str(exc.detail), limit_bytes=MAX_BODY_BYTES))
        return answer_error(error_for_status(exc.status_code, str(exc.detail)), headers=exc.headers)

    @app.exception_handler(SidecarUnavailable)
    async def sidecar_silent(request: Request, exc: SidecarUnavailable) -> JSONResponse:
        # Not the service's fault, and no traceback to show: what did not answer, typed.
        log.warning(
            "request answered 503: the sidecar did not answer",
            extra={"path": request.url.path, "reason": str(exc)[:300]},
        )
        return answer_error(Unavailable(f"the sidecar did not answer in time: {exc}"[:1000]))

    @app.exception_handler(DaprError)
    async def sidecar_refused(request: Request, exc: DaprError) -> JSONResponse:
        if exc.status_code < 500 and exc.status_code not in (408, 429):
            return await unexpected(request, exc)  # a request the service should not have made
        log.warning(
            "request answered 503: the sidecar refused",
            extra={"path": request.url.path, "reason": str(exc)[:300]},
        )
        return answer_error(
            Unavailable(f"the sidecar could not do it: {exc}"[:1000], dapr_error=exc.error_code)
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # The cause goes to the log (with the trace id); the caller gets a typed body, no traceback.
        log.error("request failed", exc_info=exc, extra={"path": request.url.path})
        return answer_error(Internal("the service failed to handle the request; see its log"))

    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        ready = ctx.ready.is_set()
        return JSONResponse({"ready": ready}, status_code=200 if ready else 503)

    for module in modules:
        module.setup(ctx, app)
    ctx.subscriptions.install(app)
    return app


WARM_UP_PATIENCE_SECONDS = 60.0
"""How long warm-up failures count as start-up order (a sidecar or a dependency not up yet,
logged as warnings) before they are reported as errors."""


async def _warm(ctx: ServiceContext, modules: Sequence[ServiceModule]) -> None:
    """Run each module's warm-up once it succeeds, retrying with backoff. A module whose
    warm-up succeeded is not warmed again when a later one fails, so its start-up work (a
    reload timer, a registration) happens once."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    pending = [module for module in modules if module.warm_up is not None]
    delay = 0.2
    while True:
        try:
            await ctx.sidecar.wait_until_ready()
            if ctx.workflow_host is not None:
                await ctx.workflow_host.start()
            while pending:
                warm_up = pending[0].warm_up
                assert warm_up is not None
                log.info("warming up", extra={"warm_up": pending[0].name})
                await _bounded(warm_up(ctx), pending[0].name)
                pending.pop(0)
            ctx.ready.set()
            log.info("service ready", extra={"warm_up_s": round(loop.time() - started, 3)})
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            waiting_for = pending[0].name if pending else "sidecar"
            if loop.time() - started < WARM_UP_PATIENCE_SECONDS:
                log.warning(
                    "warm-up not done yet; retrying",
                    extra={"warm_up": waiting_for, "reason": repr(exc), "delay_s": delay},
                )
            else:
                log.error("warm-up keeps failing; retrying", exc_info=exc, extra={"warm_up": waiting_for})
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


def _warm_up_ended(task: asyncio.Task[Any]) -> None:
    """A warm-up that ends without the app ready is a fault (only shutdown cancels it)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("warm-up ended with an error", exc_info=task.exception())


def _log_tasks() -> None:
    """SIGUSR1: log where every asyncio task of the app waits (for an app that seems stuck)."""
    dump = io.StringIO()
    for task in asyncio.all_tasks():
        dump.write(f"--- {task.get_name()}\n")
        task.print_stack(file=dump)
    log.warning("asyncio tasks", extra={"tasks": dump.getvalue()})


WARM_UP_STEP_SECONDS = 30.0
"""A module's warm-up that has not finished by then is stopped and tried again (a call that
never answers must not hold the app unready for good)."""


class WarmUpStuck(Exception):
    """A module's warm-up did not finish in time; the message shows where it was waiting."""


async def _bounded(work: Awaitable[Any], module: str) -> None:
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=WARM_UP_STEP_SECONDS)
    if task in done:
        task.result()
        return
    stack = io.StringIO()
    task.print_stack(file=stack)
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    raise WarmUpStuck(
        f"{module} warm-up did not finish within {WARM_UP_STEP_SECONDS:g} s; "
        f"it waited in:\n{stack.getvalue()}"
    )


async def _drain(ctx: ServiceContext, grace_seconds: float) -> None:
    """Let in-flight message handlers and background work finish before the app exits."""
    deadline = asyncio.get_running_loop().time() + grace_seconds
    while ctx.subscriptions.in_flight and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    if ctx.background:
        remaining = max(0.0, deadline - asyncio.get_running_loop().time())
        _, pending = await asyncio.wait(set(ctx.background), timeout=remaining)
        for task in pending:
            task.cancel()
    # Publishes handed to a broker that delivers inside the publish call go out before the
    # sidecar is left.
    await ctx.publisher.drain(max(0.0, deadline - asyncio.get_running_loop().time()))


def serve(app: FastAPI, settings: ServiceSettings) -> None:
    """Run the app until SIGTERM/SIGINT; in-flight requests get `shutdown_grace_seconds`."""
    ctx: ServiceContext = app.state.ctx
    config = uvicorn.Config(
        DaprCalls(app, ctx.subscriptions, actors=bool(ctx.hosted_actors)),
        host=settings.app_host,
        loop="uvloop",
        http=OneWriteHttpToolsProtocol,
        port=settings.app_port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds),
        lifespan="on",
    )
    uvicorn.Server(config).run()
