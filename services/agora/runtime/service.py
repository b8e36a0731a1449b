"""The small app shell every service shares: FastAPI app with tracing, health, readiness,
subscriptions, actors, typed errors and graceful shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.telemetry import TelemetryConfig

from agora.runtime.logs import configure_logging
from agora.runtime.pubsub import MessageDeduplicator, ProcessedMarker, Publisher, Subscriptions
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprSidecar
from agora.runtime.state import StateRepository
from agora.runtime.tracing import configure_tracing, shutdown_tracing

log = logging.getLogger(__name__)

M = TypeVar("M")

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


class ServiceError(Exception):
    """A typed, client-facing error: `code` is stable, `status_code` the HTTP status."""

    status_code = 400
    code = "BAD_REQUEST"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class NotFound(ServiceError):
    status_code = 404
    code = "NOT_FOUND"


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
    """One service's contribution to an app: routes and subscriptions (`setup`), start-up work
    gating readiness (`warm_up`) and actor types. An app hosts one module (a deployment) or
    several (the embedded default, where every service shares one sidecar)."""

    name: str
    setup: Callable[[ServiceContext, FastAPI], None]
    warm_up: Callable[[ServiceContext], Awaitable[None]] | None = None
    actors: tuple[type[Any], ...] = ()


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
        actors = [actor for module in modules for actor in module.actors]
        if actors:
            from dapr.ext.fastapi import DaprActor

            dapr_actor = DaprActor(app)
            for actor_type in actors:
                await dapr_actor.register_actor(actor_type)
        warming = asyncio.create_task(_warm(ctx, modules), name="warm-up")
        log.info("service started", extra={"app_port": settings.app_port})
        try:
            yield
        finally:
            ctx.ready.clear()
            warming.cancel()
            for daemon in list(ctx.daemons):
                daemon.cancel()
            await _drain(ctx, settings.shutdown_grace_seconds)
            await sidecar.aclose()
            log.info("service stopped")
            shutdown_tracing()

    title = "Agora " + ", ".join(module.name for module in modules)
    app = FastAPI(title=title, lifespan=lifespan, telemetry=HTTP_TELEMETRY)
    app.state.ctx = ctx

    @app.exception_handler(ServiceError)
    async def service_error(_: Request, exc: ServiceError) -> JSONResponse:
        return JSONResponse(
            {"error": exc.code, "message": exc.message, "details": exc.details}, status_code=exc.status_code
        )

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


async def _warm(ctx: ServiceContext, modules: Sequence[ServiceModule]) -> None:
    delay = 0.2
    while True:
        try:
            await ctx.sidecar.wait_until_ready()
            for module in modules:
                if module.warm_up is not None:
                    await module.warm_up(ctx)
            ctx.ready.set()
            log.info("service ready")
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("warm-up failed; retrying", extra={"delay_s": delay})
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


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


def serve(app: FastAPI, settings: ServiceSettings) -> None:
    """Run the app until SIGTERM/SIGINT; in-flight requests get `shutdown_grace_seconds`."""
    config = uvicorn.Config(
        app,
        host=settings.app_host,
        port=settings.app_port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds),
        lifespan="on",
    )
    uvicorn.Server(config).run()
