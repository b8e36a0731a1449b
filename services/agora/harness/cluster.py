"""A local Dapr cluster: placement, scheduler, optional Redis and Jaeger, and for each service
its app process plus its `daprd` sidecar, every one on free loopback ports, logging under one
run folder, and all stopped on exit, on exceptions and on Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import yaml

import agora.harness.sentinel as sentinel
from agora.harness.netns import TestHost
from agora.harness.processes import ManagedProcess, PortAllocator, ProcessFailed, http_ok, port_open
from agora.harness.toolchain import Toolchain
from agora.harness.toxiproxy import POSTGRES_SSL_REQUEST, REDIS_PING, StoreProbe, StoreProxy

REPO_ROOT = Path(__file__).resolve().parents[3]
COMPONENTS_DIR = REPO_ROOT / "components"
PROFILES = ("default", "redis", "postgres")
MODELS = ("offline", "local")
LOCAL_MODEL = "smollm2-135m"
"""The name the local model server gives its model (`/v1/models`, the `model` of requests)."""
MODEL_SERVER_SCRIPT = REPO_ROOT / "deploy" / "model-server" / "serve.py"
MODEL_SERVER_TEMPLATE = REPO_ROOT / "deploy" / "model-server" / "chat_template.jinja"
LOCAL_MODEL_TIMEOUT_S = 120
"""A call's deadline on the local model server (the services' AGORA_MODEL_TIMEOUT_S)."""
LOCAL_MODEL_CALL_PREFILL = ("<tool_call>\n", "</tool_call>")
"""The local model calls a tool it must call only when its answer is begun with the call's
opening tag (`OpenAICompatibleClient.required_call_prefill`)."""
NAMESPACE = "default"
CONTROL_PLANE_TRUST_DOMAIN = "localhost"
SIDECAR_MAX_BODY = "16Mi"
SCHEDULER_ID = "dapr-scheduler-server-0"
"""With TLS the scheduler's etcd peers check this name against sentry's certificate."""
SCHEDULER_ETCD_HISTORY = 10_000
"""Revisions and log entries the scheduler's etcd keeps (Dapr's chart: `dapr_scheduler.
etcdCompactionRetention` and `etcdSnapshotCount`)."""


@dataclass(frozen=True)
class ServiceSpec:
    """How to run one service: its Dapr app id and the Python module that serves it (None: a
    sidecar without an app, e.g. the operator console's identity), or `command`, the argv of
    an app in any language (run instead of `python -m module`, with the same environment:
    APP_ID, APP_PORT, DAPR_HTTP_PORT, DAPR_GRPC_PORT; it serves `/healthz` and `/readyz`).
    `resource_dirs` are loaded by this service's sidecar only, after the cluster's own."""

    app_id: str
    module: str | None
    env: dict[str, str] = field(default_factory=dict)
    command: list[str] | None = None
    resource_dirs: tuple[Path, ...] = ()

    @property
    def has_app(self) -> bool:
        return self.module is not None or self.command is not None

    def app_argv(self) -> list[str]:
        if self.command is not None:
            return list(self.command)
        assert self.module is not None, f"{self.app_id} has no app"
        return [sys.executable, "-m", self.module]


@dataclass
class Endpoints:
    app_port: int
    dapr_http_port: int
    dapr_grpc_port: int
    dapr_internal_grpc_port: int


APP_HEALTHY_LINE = "App entered healthy status"
APP_UNHEALTHY_LINE = "App entered un-healthy status"
"""What daprd logs when its probes of the app change their verdict."""


class ServiceReplica:
    """One app process and its sidecar."""

    def __init__(self, cluster: LocalCluster, spec: ServiceSpec, index: int) -> None:
        self.cluster = cluster
        self.spec = spec
        self.index = index
        self.name = f"{spec.app_id}-{index}"
        ports = cluster.ports
        self.endpoints = Endpoints(ports.take(), ports.take(), ports.take(), ports.take())
        self.app: ManagedProcess | None = None
        self.daprd: ManagedProcess | None = None

    @property
    def dapr_http(self) -> str:
        return f"http://127.0.0.1:{self.endpoints.dapr_http_port}"

    @property
    def app_url(self) -> str:
        return f"http://127.0.0.1:{self.endpoints.app_port}"

    def invoke_url(self, method: str, app_id: str | None = None) -> str:
        """URL that reaches `method` of `app_id` (default: this service) via this sidecar."""
        return f"{self.dapr_http}/v1.0/invoke/{app_id or self.spec.app_id}/method/{method.lstrip('/')}"

    def start(self, timeout: float = 60.0) -> ServiceReplica:
        self.app = self._start_app() if self.spec.has_app else None
        self.daprd = self._start_daprd()
        try:
            self.daprd.wait_until(http_ok(f"{self.dapr_http}/v1.0/healthz"), "sidecar healthy", timeout)
            if self.app is not None:
                self.app.wait_until(http_ok(f"{self.app_url}/readyz"), "app ready", timeout)
        except ProcessFailed:
            self.stop()
            raise
        return self

    def kill_app(self) -> None:
        """SIGKILL the app process only; its sidecar keeps running (a crash test)."""
        if self.app is not None:
            self.app.kill()

    def kill_sidecar(self) -> None:
        """SIGKILL the sidecar only; the app keeps running (a crash test)."""
        if self.daprd is not None:
            self.daprd.kill()

    def start_sidecar(self, timeout: float = 60.0) -> ServiceReplica:
        """Start a fresh sidecar beside the running app, on the same ports."""
        self.daprd = self._start_daprd()
        self.daprd.wait_until(http_ok(f"{self.dapr_http}/v1.0/healthz"), "sidecar healthy", timeout)
        return self

    def _start_daprd(self) -> ManagedProcess:
        return ManagedProcess(
            f"{self.name}-daprd",
            self._daprd_argv(),
            self.cluster.logs / f"{self.name}.daprd.log",
            env=self.cluster.child_env(self.cluster.sidecar_env()),
        ).start()

    def start_app(self, timeout: float = 60.0) -> ServiceReplica:
        """Start a fresh app process beside the running sidecar, on the same port; returns once
        the app is ready and its sidecar sees it healthy again (a sidecar that marked the app
        unhealthy refuses calls to it, and holds its deliveries, until its next probe)."""
        self.app = self._start_app()
        self.app.wait_until(http_ok(f"{self.app_url}/readyz"), "app ready", timeout)
        if self.daprd is not None:
            self.app.wait_until(self._sidecar_sees_app_healthy, "the sidecar seeing the app healthy", timeout)
        return self

    def _sidecar_sees_app_healthy(self) -> bool:
        """Whether the sidecar's last word on the app's health (its log) is healthy."""
        log = (self.cluster.logs / f"{self.name}.daprd.log").read_text(errors="replace")
        return log.rfind(APP_HEALTHY_LINE) >= log.rfind(APP_UNHEALTHY_LINE)

    def _start_app(self) -> ManagedProcess:
        cluster, ep = self.cluster, self.endpoints
        env = cluster.child_env(
            {
                "APP_ID": self.spec.app_id,
                "APP_PORT": str(ep.app_port),
                "DAPR_HTTP_PORT": str(ep.dapr_http_port),
                "DAPR_GRPC_PORT": str(ep.dapr_grpc_port),
                **self.spec.env,
            }
        )
        return ManagedProcess(
            f"{self.name}-app",
            self.spec.app_argv(),
            cluster.logs / f"{self.name}.app.log",
            env=env,
        ).start()

    def _daprd_argv(self) -> list[str]:
        c, ep = self.cluster, self.endpoints
        app = [
            "--app-port",
            str(ep.app_port),
            "--app-protocol",
            "http",
            "--app-channel-address",
            "127.0.0.1",
            "--enable-app-health-check",
            "--app-health-check-path",
            "/healthz",
            "--app-health-probe-interval",
            "1",
        ]
        argv = [
            str(c.toolchain.daprd),
            "--app-id",
            self.spec.app_id,
            *(app if self.spec.has_app else []),
            "--dapr-listen-addresses",
            "127.0.0.1",
            "--dapr-http-port",
            str(ep.dapr_http_port),
            "--dapr-grpc-port",
            str(ep.dapr_grpc_port),
            "--dapr-internal-grpc-port",
            str(ep.dapr_internal_grpc_port),
            "--enable-metrics=false",
            "--placement-host-address",
            f"127.0.0.1:{c.placement_port}",
            "--scheduler-host-address",
            f"127.0.0.1:{c.scheduler_port}",
            "--config",
            str(c.config_for(self.spec.app_id)),
            *(["--enable-mtls", "--sentry-address", f"127.0.0.1:{c.sentry_port}"] if c.mtls else []),
            "--dapr-graceful-shutdown-seconds",
            "5",
            # Above the apps' own 1 MiB limit, so an oversized request reaches the app and gets
            # its typed 413 answer instead of the sidecar's untyped error.
            "--max-body-size",
            SIDECAR_MAX_BODY,
            "--log-level",
            c.log_level,
        ]
        for path in (*c.resource_dirs, *self.spec.resource_dirs):
            argv += ["--resources-path", str(path)]
        return argv

    def stop(self) -> None:
        # App first: it stops taking work and drains while its sidecar can still carry the
        # last state writes; then the sidecar.
        for proc in (self.app, self.daprd):
            if proc is not None:
                proc.stop()

    def kill(self) -> None:
        for proc in (self.app, self.daprd):
            if proc is not None:
                proc.kill()

    def restart(self, timeout: float = 60.0) -> ServiceReplica:
        self.stop()
        return self.start(timeout)


class LocalCluster:
    """Use as a context manager; `add_service` starts replicas of a service."""

    def __init__(
        self,
        profile: str = "default",
        *,
        run_dir: Path | None = None,
        jaeger: bool = False,
        toolchain: Toolchain | None = None,
        log_level: str = "info",
        extra_env: dict[str, str] | None = None,
        jaeger_ports: dict[str, int] | None = None,
        mtls: bool | None = None,
        redis_persistence: bool = False,
        redis_failover: bool = False,
        store_host: bool = False,
        trace_sampling_rate: str | None = None,
        model: str = "offline",
        model_slots: int = 2,
    ) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; choose one of {PROFILES}")
        if model not in MODELS:
            raise ValueError(f"unknown model {model!r}; choose one of {MODELS}")
        self.profile = profile
        self.model = model
        """`local`: the local model server runs beside the system, every service's model calls go
        to it (`AGORA_MODEL_BACKEND=openai`) and the `agora-llm` conversation component is a
        `conversation.openai` pointed at it (for `AGORA_MODEL_BACKEND=dapr`)."""
        self.model_slots = model_slots
        self.model_port: int | None = None
        self.mtls = profile != "default" if mtls is None else mtls
        """Sentry issues every sidecar and the control plane a SPIFFE certificate; sidecars
        then enforce the access-control policies in components/access-control/. On for the
        redis and postgres profiles (every service its own app, as deployed), off for the
        embedded one."""
        self.redis_persistence = redis_persistence
        """Redis appends every write to its log and syncs it before answering, so a SIGKILLed
        Redis comes back with everything it acknowledged (the fault tests restart it)."""
        if redis_failover and profile != "redis":
            raise ValueError("redis_failover is for the redis profile")
        self.redis_failover = redis_failover
        """Redis as a primary, two replicas and three Sentinels (harness/sentinel.py), the
        components in their failover mode: a store that fails over."""
        self.sentinel_ports: list[int] = []
        if store_host and profile not in ("redis", "postgres"):
            raise ValueError("store_host is for the redis and postgres profiles")
        self.sentry_port = 0
        self.trust_anchors = ""
        self.run_id = os.environ.get("AGORA_RUN_ID") or uuid.uuid4().hex[:12]
        self.store_host: TestHost | None = TestHost(self.run_id, "store") if store_host else None
        """The state store (Redis, or PostgreSQL on the postgres profile) on a host of its own
        (harness/netns.py), across a veth pair whose faults a test controls, behind a proxy that
        can delay its answers (harness/toxiproxy.py). Needs root."""
        self.store_proxy: StoreProxy | None = None
        self.run_dir = run_dir or Path(tempfile.mkdtemp(prefix=f"agora-{self.run_id}-"))
        self.logs = self.run_dir / "logs"
        self.toolchain = toolchain or Toolchain.from_environment()
        self.log_level = log_level
        self.extra_env = dict(extra_env or {})
        self.with_jaeger = jaeger
        self.trace_sampling_rate = trace_sampling_rate
        """With Jaeger, the share of traces kept, as a deployment samples (the Helm chart's
        tracing.samplingRate): the sidecars' Configuration samplingRate, and the apps'
        parent-based trace id ratio sampler for the traces they start. None: every trace, as
        components/config.yaml says (what someone debugging locally wants)."""
        self.ports = PortAllocator()
        self.placement_port = 0
        self.scheduler_port = 0
        self.redis_port: int | None = None
        self.postgres_port: int | None = None
        self.rabbitmq_port: int | None = None
        self._postgres_dir: Path | None = None
        self.jaeger_ports: dict[str, int] = {}
        self._preferred_jaeger_ports = jaeger_ports or {}
        self.config_file = self.run_dir / "config.yaml"
        self.names_db = self.run_dir / "names.db"
        """Where this run's sidecars register and look up each other's addresses."""
        self.resource_dirs: list[Path] = []
        self._infra: list[ManagedProcess] = []
        self._infra_ready: dict[str, tuple[Callable[[], bool], str]] = {}
        """How to tell each infrastructure process is back after a restart."""
        self.replicas: list[ServiceReplica] = []
        self._previous_sigterm: Any = None

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> LocalCluster:
        self._previous_sigterm = signal.signal(signal.SIGTERM, _raise_system_exit)
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]
    ) -> None:
        self.stop()
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)

    def start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        if self.with_jaeger:
            self._start_jaeger()
        if self.model == "local":
            self._start_model_server()
        if self.profile == "redis":
            self._start_redis()
            if self.redis_failover:
                self._start_replicas_and_sentinels()
        if self.profile == "postgres":
            self._start_postgres()
            self._start_rabbitmq()
        self._render_resources()
        if self.mtls:
            self._start_sentry()
        self._start_placement()
        self._start_scheduler()
        self._write_manifest()

    def stop(self) -> None:
        """Stop services, then infrastructure. A second Ctrl-C while stopping is ignored, so
        an impatient user cannot interrupt the clean-up half-way."""
        with _signals_deferred():
            for replica in reversed(self.replicas):
                with contextlib.suppress(Exception):
                    replica.stop()
            for proc in reversed(self._infra):
                with contextlib.suppress(Exception):
                    proc.stop()
            if self._postgres_dir is not None:
                shutil.rmtree(self._postgres_dir, ignore_errors=True)
            if self.store_host is not None:
                self.store_host.close()

    def child_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DAPR_", "OTEL_", "APP_"))}
        env.update(
            {
                "AGORA_RUN_ID": self.run_id,
                "PYTHONUNBUFFERED": "1",
                **({"OTEL_EXPORTER_OTLP_ENDPOINT": self.otlp_grpc_endpoint} if self.with_jaeger else {}),
                **({"OTEL_TRACES_EXPORTER": "none"} if not self.with_jaeger else {}),
                **self._app_sampler_env(),
                **self._model_env(),
                **self.extra_env,
                **(extra or {}),
            }
        )
        return env

    def _app_sampler_env(self) -> dict[str, str]:
        if not (self.with_jaeger and self.trace_sampling_rate is not None):
            return {}
        return {
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": self.trace_sampling_rate,
        }

    def _model_env(self) -> dict[str, str]:
        if self.model_url is None:
            return {}
        return {
            "AGORA_MODEL_BACKEND": "openai",
            "AGORA_MODEL_OPENAI_BASE_URL": self.model_url,
            "AGORA_MODEL_MODEL": LOCAL_MODEL,
            # A call waits its turn for one of the server's few slots on a machine's shared
            # cores: its deadline covers the queue as well as the answer.
            "AGORA_MODEL_TIMEOUT_S": str(LOCAL_MODEL_TIMEOUT_S),
            "AGORA_BID_TIMEOUT_SECONDS": str(LOCAL_MODEL_TIMEOUT_S),  # the market's estimates are calls too
            "AGORA_MODEL_REQUIRED_CALL_OPENING": LOCAL_MODEL_CALL_PREFILL[0],
            "AGORA_MODEL_REQUIRED_CALL_CLOSING": LOCAL_MODEL_CALL_PREFILL[1],
        }

    @property
    def model_url(self) -> str | None:
        """The local model server's OpenAI API (`.../v1`), None without one."""
        return None if self.model_port is None else f"http://127.0.0.1:{self.model_port}/v1"

    # -- services ----------------------------------------------------------------------------

    def add_service(
        self, spec: ServiceSpec, replicas: int = 1, timeout: float = 60.0
    ) -> list[ServiceReplica]:
        started = [self.reserve_replica(spec).start(timeout) for _ in range(replicas)]
        self._write_manifest()
        return started

    def reserve_replica(self, spec: ServiceSpec) -> ServiceReplica:
        """A replica of `spec` with its ports taken, stopped with the cluster, not started yet
        (`start()` it): for a resource that must name the replica's own ports, e.g. an
        `MCPServer` reached through the replica's sidecar."""
        index = sum(r.spec.app_id == spec.app_id for r in self.replicas)
        replica = ServiceReplica(self, spec, index)
        self.replicas.append(replica)
        self._write_manifest()
        return replica

    # -- infrastructure ----------------------------------------------------------------------

    @property
    def otlp_grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.jaeger_ports['otlp_grpc']}"

    @property
    def jaeger_query_url(self) -> str:
        return f"http://127.0.0.1:{self.jaeger_ports['query']}"

    def _infra_process(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> ManagedProcess:
        proc = ManagedProcess(name, argv, self.logs / f"{name}.log", env=self.child_env(env)).start()
        self._infra.append(proc)
        return proc

    def _ready_when(self, proc: ManagedProcess, check: Callable[[], bool], what: str, timeout: float) -> None:
        self._infra_ready[proc.name] = (check, what)
        proc.wait_until(check, what, timeout)

    def add_peer(self, name: str, argv: list[str], port: int, timeout: float = 30.0) -> ManagedProcess:
        """A process that is no Dapr app (an A2A agent of another framework, say) listening on
        `port` of the loopback: started now, ready once the port answers, stopped with the
        cluster after its services."""
        proc = self._infra_process(name, argv)
        self._ready_when(proc, port_open(port), f"{name} listening on port {port}", timeout)
        return proc

    def infra(self, name: str) -> ManagedProcess:
        """An infrastructure process by name: placement, scheduler, sentry, redis, jaeger,
        model-server."""
        found = next((p for p in self._infra if p.name == name), None)
        if found is None:
            raise KeyError(f"no infrastructure process {name!r} in this cluster")
        return found

    def restart_infra(self, name: str, timeout: float = 60.0) -> ManagedProcess:
        """Start a killed (or stop a running) infrastructure process again, on the same ports
        and data, and wait until it is ready."""
        proc = self.infra(name)
        proc.stop()
        if name == "scheduler" and self.mtls:
            # The scheduler writes its certificates anew and must not find the old folder.
            shutil.rmtree(self.run_dir / "scheduler-identity", ignore_errors=True)
        proc.start()
        check, what = self._infra_ready[name]
        proc.wait_until(check, what, timeout)
        return proc

    def _start_placement(self) -> None:
        self.placement_port = self.ports.take()
        healthz, raft = self.ports.take(), self.ports.take()
        proc = self._infra_process(
            "placement",
            [
                str(self.toolchain.placement),
                "--id",
                "placement-0",
                "--initial-cluster",
                f"placement-0=127.0.0.1:{raft}",
                "--port",
                str(self.placement_port),
                "--listen-address",
                "127.0.0.1",
                "--healthz-port",
                str(healthz),
                "--healthz-listen-address",
                "127.0.0.1",
                "--enable-metrics=false",
                *self._control_plane_tls(),
                "--log-level",
                self.log_level,
            ],
            self.control_plane_env(),
        )
        self._ready_when(proc, http_ok(f"http://127.0.0.1:{healthz}/healthz"), "placement healthy", 30)

    def _start_scheduler(self) -> None:
        self.scheduler_port = self.ports.take()
        healthz, etcd_client, etcd_peer = self.ports.take(), self.ports.take(), self.ports.take()
        data_dir = self.run_dir / "scheduler-etcd"
        proc = self._infra_process(
            "scheduler",
            [
                str(self.toolchain.scheduler),
                "--id",
                SCHEDULER_ID,
                "--port",
                str(self.scheduler_port),
                "--listen-address",
                "127.0.0.1",
                "--healthz-port",
                str(healthz),
                "--healthz-listen-address",
                "127.0.0.1",
                "--enable-metrics=false",
                "--etcd-data-dir",
                str(data_dir),
                "--etcd-client-port",
                str(etcd_client),
                "--etcd-client-listen-address",
                "127.0.0.1",
                "--etcd-initial-cluster",
                f"{SCHEDULER_ID}={'https' if self.mtls else 'http'}://127.0.0.1:{etcd_peer}",
                # Every task sets and deletes a few reminders. With Dapr's defaults the etcd
                # keeps 1,000,000 old revisions and 100,000 log entries in memory, so it grows
                # for hours; these keep the history to the last 10,000 of each.
                "--etcd-compaction-mode",
                "revision",
                "--etcd-compaction-retention",
                str(SCHEDULER_ETCD_HISTORY),
                "--etcd-snapshot-count",
                str(SCHEDULER_ETCD_HISTORY),
                *self._control_plane_tls(),
                # Must not exist yet: the scheduler writes its certificates beside it and
                # swaps a symlink into place.
                *(
                    ["--identity-directory-write", str(self.run_dir / "scheduler-identity" / "tls")]
                    if self.mtls
                    else []
                ),
                "--log-level",
                self.log_level,
            ],
            self.control_plane_env(),
        )
        self._ready_when(proc, http_ok(f"http://127.0.0.1:{healthz}/healthz"), "scheduler healthy", 60)

    def _start_sentry(self) -> None:
        """Sentry in self-hosted mode: with an empty credentials folder it creates its own
        root and issuer certificates there; their root is every process's trust anchor."""
        self.sentry_port = self.ports.take()
        healthz = self.ports.take()
        credentials = self.run_dir / "sentry-credentials"
        credentials.mkdir(parents=True, exist_ok=True)
        config = self.run_dir / "sentry.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "dapr.io/v1alpha1",
                    "kind": "Configuration",
                    "metadata": {"name": "daprsystem"},
                    "spec": {"mtls": {"enabled": True, "workloadCertTTL": "24h", "allowedClockSkew": "15m"}},
                }
            )
        )
        proc = self._infra_process(
            "sentry",
            [
                str(self.toolchain.sentry),
                "--config",
                str(config),
                "--mode",
                "standalone",
                "--issuer-credentials",
                str(credentials),
                "--trust-domain",
                CONTROL_PLANE_TRUST_DOMAIN,
                "--port",
                str(self.sentry_port),
                "--listen-address",
                "127.0.0.1",
                "--healthz-port",
                str(healthz),
                "--enable-metrics=false",
                "--log-level",
                self.log_level,
            ],
        )
        healthy = http_ok(f"http://127.0.0.1:{healthz}/healthz")
        self._ready_when(proc, healthy, "sentry healthy", 60)
        # Having written its new certificates, sentry sees them change under its own watch and
        # reloads, two seconds apart, three times: each reload closes its port for a moment,
        # and a sidecar asking for its identity then gives up for good. Started again on the
        # certificates it wrote, it finds them and never reloads.
        self.restart_infra("sentry")
        self.trust_anchors = (credentials / "ca.crt").read_text()

    def _control_plane_tls(self) -> list[str]:
        if not self.mtls:
            return []
        return [
            "--tls-enabled",
            "--trust-anchors-file",
            str(self.run_dir / "sentry-credentials" / "ca.crt"),
            "--trust-domain",
            CONTROL_PLANE_TRUST_DOMAIN,
            "--sentry-address",
            f"127.0.0.1:{self.sentry_port}",
        ]

    def control_plane_env(self) -> dict[str, str]:
        return {"NAMESPACE": NAMESPACE} if self.mtls else {}

    def sidecar_env(self) -> dict[str, str]:
        """What a daprd needs: the loopback address to announce to the other sidecars (name
        resolution, placement), so calls between them never leave the machine's loopback; and
        with mTLS its SPIFFE identity (spiffe://public/ns/default/<app-id>) from sentry and
        the control plane's trust anchors."""
        loopback = {"DAPR_HOST_IP": "127.0.0.1"}
        if not self.mtls:
            return loopback
        return {
            **loopback,
            "NAMESPACE": NAMESPACE,
            "DAPR_TRUST_ANCHORS": self.trust_anchors,
            "DAPR_CONTROLPLANE_TRUST_DOMAIN": CONTROL_PLANE_TRUST_DOMAIN,
            "DAPR_CONTROLPLANE_NAMESPACE": NAMESPACE,
        }

    def config_for(self, app_id: str) -> Path:
        """The app's Configuration: the shared one, plus the app's access-control policy
        (components/access-control/<app-id>.yaml) when mTLS gives callers an identity."""
        policy = COMPONENTS_DIR / "access-control" / f"{app_id}.yaml"
        if not (self.mtls and policy.is_file()):
            return self.config_file
        config = yaml.safe_load(self.config_file.read_text())
        config["metadata"]["name"] = f"agora-config-{app_id}"
        config["spec"]["accessControl"] = yaml.safe_load(policy.read_text())["spec"]["accessControl"]
        target = self.run_dir / f"config-{app_id}.yaml"
        target.write_text(yaml.safe_dump(config, sort_keys=False))
        return target

    @property
    def redis_address(self) -> str:
        """Where Redis listens: the loopback, or its own host's address."""
        return "127.0.0.1" if self.store_host is None else self.store_host.address

    @property
    def redis_endpoint(self) -> str:
        """Where the sidecars reach Redis: at its port, or through the proxy in front of its
        own host."""
        if self.store_proxy is not None:
            return f"127.0.0.1:{self.store_proxy.listen_port}"
        return f"{self.redis_address}:{self.redis_port}"

    def _start_redis(self) -> None:
        self.redis_port = self.ports.take()
        if self.store_host is not None:
            self.store_host.open()
        self._start_redis_server("redis", self.redis_port, self.run_dir)
        if self.store_host is not None:
            self._start_store_proxy(f"{self.redis_address}:{self.redis_port}", REDIS_PING)

    def _start_store_proxy(self, upstream: str, probe: StoreProbe) -> None:
        proxy = StoreProxy(self.ports.take(), self.ports.take(), upstream, probe)
        proc = self._infra_process("toxiproxy", proxy.argv(self.toolchain.toxiproxy_server, self.run_dir))
        self._ready_when(proc, port_open(proxy.listen_port), "toxiproxy relaying to the store", 20)
        self.store_proxy = proxy

    def _start_redis_server(self, name: str, port: int, folder: Path, *extra: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        on_its_host = name == "redis" and self.store_host is not None
        address = self.redis_address if on_its_host else "127.0.0.1"
        argv = [
            str(self.toolchain.redis_server),
            "--port",
            str(port),
            "--bind",
            address,
            "--save",
            "",
            *(
                ["--appendonly", "yes", "--appendfsync", "always"]
                if self.redis_persistence
                else ["--appendonly", "no"]
            ),
            "--dir",
            str(folder),
            *(sentinel.replica_safety_args() if self.redis_failover else []),
            *extra,
        ]
        if on_its_host:
            assert self.store_host is not None
            # Reached from the machine's end of the veth pair, not the loopback: Redis refuses
            # such clients in its protected mode, which a server without a password is in.
            argv = self.store_host.command([*argv, "--protected-mode", "no"])
        proc = self._infra_process(name, argv)
        self._ready_when(proc, port_open(port, host=address), f"{name} listening", 20)

    def _start_replicas_and_sentinels(self) -> None:
        """Two replicas of the primary (`redis`), then three Sentinels watching the three; ready
        once every Sentinel names the primary."""
        assert self.redis_port is not None
        for n in range(1, sentinel.REPLICAS + 1):
            port = self.ports.take()
            self._start_redis_server(
                f"redis-replica-{n}", port, self.run_dir / f"redis-replica-{n}",
                "--replicaof", "127.0.0.1", str(self.redis_port),
            )  # fmt: skip
        primary = self.redis_port
        for n in range(1, sentinel.SENTINELS + 1):
            port = self.ports.take()
            self.sentinel_ports.append(port)
            config = sentinel.sentinel_config(self.run_dir / f"sentinel-{n}", port, primary)
            proc = self._infra_process(
                f"sentinel-{n}", [str(self.toolchain.redis_server), str(config), "--sentinel"]
            )
            self._ready_when(proc, sentinel.names_a_primary(port), f"sentinel-{n} watching", 20)

    def redis_primary(self) -> str:
        """The name of the Redis process the Sentinels name the primary now (`redis` before any
        failover)."""
        named = {sentinel.master_port(port) for port in self.sentinel_ports} - {None}
        if len(named) != 1:
            raise RuntimeError(f"the Sentinels do not agree on a primary: {sorted(map(str, named))}")
        [port] = named
        by_port = {self.redis_port: "redis"} | {
            int(p.argv[p.argv.index("--port") + 1]): p.name
            for p in self._infra
            if p.name.startswith("redis-replica-")
        }
        return by_port[port]

    def _start_postgres(self) -> None:
        """PostgreSQL (Debian's), on a loopback port of this run, its data in a folder of its
        own (removed at stop). The server refuses to run as root: as root, it runs as the
        `postgres` user its package made, in a folder that user owns outside the run folder
        (which may be private to root)."""
        self.postgres_port = self.ports.take()
        bin_dir = self.toolchain.postgres_bin
        self._postgres_dir = Path(tempfile.mkdtemp(prefix=f"agora-postgres-{self.run_id}-"))
        data, sockets = self._postgres_dir / "data", self._postgres_dir / "sockets"
        sockets.mkdir()
        as_postgres: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self._postgres_dir, "postgres", "postgres")
            shutil.chown(sockets, "postgres", "postgres")
            as_postgres = ["setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups"]
        initdb_log = self.logs / "postgres-initdb.log"
        with initdb_log.open("w") as log:
            made = subprocess.run(
                [*as_postgres, str(bin_dir / "initdb"), "-D", str(data), "-U", "agora", "-A", "trust",
                 "-E", "UTF8", "--no-sync"],
                stdout=log, stderr=subprocess.STDOUT, env=self.child_env(), timeout=120, check=False,
            )  # fmt: skip
        if made.returncode != 0:
            raise ProcessFailed(f"initdb failed ({made.returncode}):\n{initdb_log.read_text()[-2000:]}")
        address = "127.0.0.1"
        argv = [*as_postgres, str(bin_dir / "postgres"), "-D", str(data), "-p", str(self.postgres_port),
                "-k", str(sockets), "-c", "max_connections=400"]  # fmt: skip
        if self.store_host is not None:
            # On a host of its own, reached from the machine's end of the veth pair (through the
            # proxy), which initdb's rules do not let in.
            host = self.store_host.open()
            address = host.address
            with (data / "pg_hba.conf").open("a") as rules:
                rules.write(f"host all all {host.gateway}/32 trust\n")
            argv = host.command(argv)
        proc = self._infra_process("postgres", [*argv, "-c", f"listen_addresses={address}"])
        self._ready_when(proc, port_open(self.postgres_port, host=address), "postgres listening", 30)
        if self.store_host is not None:
            self._start_store_proxy(f"{address}:{self.postgres_port}", POSTGRES_SSL_REQUEST)

    def _start_rabbitmq(self) -> None:
        """RabbitMQ (Debian's), on loopback ports of this run, its node registered with an
        Erlang port mapper of its own (not the machine's), its data in the run folder."""
        self.rabbitmq_port = self.ports.take()
        epmd_port, dist_port = self.ports.take(), self.ports.take()
        base = self.run_dir / "rabbitmq"
        base.mkdir(parents=True, exist_ok=True)
        (base / "enabled_plugins").write_text("[].\n")
        epmd = self._infra_process(
            "epmd", [str(self.toolchain.epmd), "-port", str(epmd_port), "-address", "127.0.0.1"]
        )
        self._ready_when(epmd, port_open(epmd_port), "epmd listening", 20)
        env = {
            "HOME": str(base),
            "ERL_EPMD_PORT": str(epmd_port),
            "RABBITMQ_NODENAME": f"agora-{self.run_id}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.rabbitmq_port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_LOGS": "-",
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
            # Its own port mapper (started above), and node traffic on the loopback only.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": (
                "-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}"
            ),
        }
        proc = self._infra_process("rabbitmq", [str(self.toolchain.rabbitmq_server)], env)
        self._ready_when(proc, port_open(self.rabbitmq_port), "rabbitmq listening", 90)

    def _start_model_server(self) -> None:
        self.model_port = self.ports.take()
        proc = self._infra_process(
            "model-server",
            [
                str(self.toolchain.model_server_python),
                str(MODEL_SERVER_SCRIPT),
                "--port",
                str(self.model_port),
                "--alias",
                LOCAL_MODEL,
                "--slots",
                str(self.model_slots),
                "--chat-template",
                str(MODEL_SERVER_TEMPLATE),
            ],
        )
        health = f"http://127.0.0.1:{self.model_port}/health"
        self._ready_when(proc, http_ok(health), "model server loaded its model", 60)

    def _start_jaeger(self) -> None:
        names = ("otlp_grpc", "otlp_http", "query", "query_grpc", "health")
        preferred = self._preferred_jaeger_ports
        if set(preferred) == set(names) and not any(port_open(p)() for p in preferred.values()):
            self.jaeger_ports = dict(preferred)
        else:
            self.jaeger_ports = {name: self.ports.take() for name in names}
        env = {f"JAEGER_{name.upper()}_PORT": str(port) for name, port in self.jaeger_ports.items()}
        proc = self._infra_process(
            "jaeger",
            [str(self.toolchain.jaeger), "--config", str(REPO_ROOT / "deploy" / "jaeger" / "config.yaml")],
            env,
        )
        proc.wait_until(http_ok(f"{self.jaeger_query_url}/api/services"), "jaeger query API up", 30)
        proc.wait_until(port_open(self.jaeger_ports["otlp_grpc"]), "jaeger OTLP receiver up", 30)

    def _render_resources(self) -> None:
        """Copy the profile's component files into the run folder, pointing them at this run's
        Redis, and the Configuration at this run's OTLP receiver."""
        self.resource_dirs = []
        for source in (COMPONENTS_DIR / "common", COMPONENTS_DIR / self.profile):
            target = self.run_dir / "resources" / source.name
            target.mkdir(parents=True, exist_ok=True)
            for path in sorted(source.glob("*.yaml")):
                docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
                for doc in docs:
                    self._point_at_local_stores(doc)
                    self._point_at_local_model(doc)
                (target / path.name).write_text(yaml.safe_dump_all(docs, sort_keys=False))
            self.resource_dirs.append(target)
        config = yaml.safe_load((COMPONENTS_DIR / "config.yaml").read_text())
        # App ids resolve through a SQLite file of this run, not machine-wide mDNS: two local
        # systems side by side each reach only their own apps.
        config["spec"]["nameResolution"] = {
            "component": "sqlite",
            "version": "v1",
            # No clean-up of old rows: in this Dapr release it deletes the fresh registrations
            # instead (its age test is inverted), and every sidecar then exits with "Host
            # registration lost" an hour after start. Lookups skip stale rows anyway.
            "configuration": {
                "connectionString": str(self.names_db),
                # A row counts while it is younger than updateInterval; each sidecar renews it
                # every updateInterval - timeout - 1 s, retrying for up to `timeout`. With 4 s and
                # 2 s, a renewal may take 2 s (a busy machine's SQLite writes queue behind each
                # other) and one may fail outright, and the app stays resolvable; with the
                # defaulted 1 s timeout a renewal slower than that dropped the app ("no host
                # found with the given ID"). A stopped sidecar's row lingers up to 4 s.
                "updateInterval": "4s",
                "timeout": "2s",
                "cleanupInterval": "0s",
            },
        }
        tracing = config["spec"]["tracing"]
        if self.with_jaeger:
            tracing["otel"]["endpointAddress"] = f"127.0.0.1:{self.jaeger_ports['otlp_grpc']}"
            if self.trace_sampling_rate is not None:
                tracing["samplingRate"] = self.trace_sampling_rate
        else:
            tracing.pop("otel", None)
            tracing["samplingRate"] = "0"
        self.config_file.write_text(yaml.safe_dump(config, sort_keys=False))

    def _point_at_local_stores(self, doc: dict[str, Any]) -> None:
        if doc.get("kind") == "Component" and doc["spec"].get("type") == "secretstores.local.file":
            # The run's own secrets: the local Redis runs without a password, the local
            # PostgreSQL trusts its loopback clients, the local RabbitMQ takes its default
            # user from the loopback only.
            secrets = self.run_dir / "secrets.json"
            values = {"redis-password": ""}
            if self.postgres_port is not None:
                port = self.postgres_port if self.store_proxy is None else self.store_proxy.listen_port
                values["postgres-connection"] = (
                    f"host=127.0.0.1 port={port} user=agora dbname=postgres sslmode=disable"
                )
            if self.rabbitmq_port is not None:
                values["rabbitmq-connection"] = f"amqp://guest:guest@127.0.0.1:{self.rabbitmq_port}"
            secrets.write_text(json.dumps(values))
            for item in doc["spec"].get("metadata", []):
                if item.get("name") == "secretsFile":
                    item["value"] = str(secrets)
            return
        if self.redis_port is None or doc.get("kind") != "Component":
            return
        metadata = doc["spec"].get("metadata", [])
        for item in metadata:
            if item.get("name") == "redisHost":
                if not self.redis_failover:
                    item["value"] = self.redis_endpoint
                    continue
                # The component asks the Sentinels where the primary is, and again after a
                # failover.
                item["value"] = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
                metadata += [
                    {"name": "failover", "value": "true"},
                    {"name": "sentinelMasterName", "value": sentinel.SENTINEL_MASTER},
                ]
                break

    def _point_at_local_model(self, doc: dict[str, Any]) -> None:
        """With the local model server, the conversation component is Dapr's OpenAI one pointed
        at it (its `endpoint`; the server checks no key, the component needs one)."""
        if self.model_url is None or doc.get("kind") != "Component":
            return
        if not str(doc["spec"].get("type", "")).startswith("conversation."):
            return
        doc["spec"]["type"] = "conversation.openai"
        doc["spec"]["metadata"] = [
            {"name": "endpoint", "value": self.model_url},
            {"name": "model", "value": LOCAL_MODEL},
            {"name": "key", "value": "local"},
        ]

    def _write_manifest(self) -> None:
        manifest = {
            "run_id": self.run_id,
            "profile": self.profile,
            "run_dir": str(self.run_dir),
            "jaeger_ui": self.jaeger_query_url if self.with_jaeger else None,
            "model_url": self.model_url,
            "services": [
                {
                    "name": r.name,
                    "app_id": r.spec.app_id,
                    "dapr_http_port": r.endpoints.dapr_http_port,
                    "app_port": r.endpoints.app_port,
                }
                for r in self.replicas
            ],
        }
        (self.run_dir / "cluster.json").write_text(json.dumps(manifest, indent=2))

    def processes(self) -> Iterator[ManagedProcess]:
        yield from self._infra
        for replica in self.replicas:
            yield from (p for p in (replica.app, replica.daprd) if p is not None)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise_system_exit(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)
