"""A Kubernetes control plane on loopback, for the node scenario (node_scenario.py, node.py).

Everything runs inside the current network namespace, which must have no interface but `lo`
(the scenario is started under `unshare --net`); nothing here can send a packet anywhere else.
The addresses the cluster needs are added to `lo`: the API server's advertise address
(APISERVER_IP, the endpoint of the `kubernetes` Service) and the node's address; and the cluster
IP of every Service whose endpoints are real processes (the API server), where a small userspace
proxy (ServiceProxy, what kube-proxy's old userspace mode did) forwards to the endpoint.

The parts: etcd, kube-apiserver (RBAC, a static admin token in system:masters, service-account
signing keys, `--enable-aggregator-routing=true`), kube-controller-manager (service-account and
token controllers, endpoints/endpointslices, replicasets, deployments, statefulsets, garbage
collector, namespaces, root CA publisher, disruption budgets, node lifecycle) and
kube-scheduler. The nodes (the kubelet, containerd, kube-proxy) are node.py's.

`--enable-aggregator-routing=true` makes the API server call admission webhooks (Dapr's
injector) at an endpoint (the pod IP) instead of the Service's cluster IP: kube-apiserver builds
one service resolver (cmd/kube-apiserver/app/server.go, buildServiceResolver) and hands it to the
aggregator and to the admission plugin initializer that configures the webhook clients.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shlex
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from agora.harness.processes import ManagedProcess, http_ok
from agora.harness.toolchain import cache_root, pinned_versions

REPO = Path(__file__).resolve().parents[3]

SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
APISERVER_IP = "10.250.0.1"
APISERVER_PORT = 443
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
CLUSTER_DOMAIN = "cluster.local"
SERVICE_ACCOUNT_ISSUER = f"https://kubernetes.default.svc.{CLUSTER_DOMAIN}"
DAPR_NAMESPACE = "dapr-system"

Obj = dict[str, Any]


class KubeError(RuntimeError):
    """An API call that did not answer as expected; the message has the status and the body."""


# --------------------------------------------------------------------------------------------
# Where the binaries and Dapr's chart are (`make kube` builds or downloads them).


def go_module_cache() -> Path:
    if os.environ.get("GOMODCACHE"):
        return Path(os.environ["GOMODCACHE"])
    gopath = os.environ.get("GOPATH", "").split(os.pathsep)[0]
    return Path(gopath or Path.home() / "go") / "pkg" / "mod"


@dataclass(frozen=True)
class KubeTools:
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    etcd: Path
    helm: Path
    sentry: Path
    operator: Path
    injector: Path
    # Dapr's chart, from the Go module download the build made.
    dapr_chart: Path
    versions: dict[str, str]

    @classmethod
    def from_environment(cls) -> KubeTools:
        versions = pinned_versions()
        cache = cache_root()
        kube = cache / f"kubernetes-{versions['KUBERNETES_VERSION']}" / "bin"
        dapr = Path(
            os.environ.get(
                "AGORA_DAPR_BIN",
                cache / f"dapr-{versions['DAPR_VERSION']}-{versions['DAPR_BUILD']}" / "bin",
            )
        )
        modules = go_module_cache()
        return cls(
            kube_apiserver=kube / "kube-apiserver",
            kube_controller_manager=kube / "kube-controller-manager",
            kube_scheduler=kube / "kube-scheduler",
            etcd=cache / f"etcd-{versions['ETCD_VERSION']}" / "bin" / "etcd",
            helm=cache / f"helm-{versions['HELM_VERSION']}" / "bin" / "helm",
            sentry=dapr / "sentry",
            operator=dapr / "operator",
            injector=dapr / "injector",
            dapr_chart=modules
            / "github.com"
            / "dapr"
            / f"dapr@v{versions['DAPR_VERSION']}"
            / "charts"
            / "dapr",
            versions=versions,
        )

    def missing(self) -> list[str]:
        """What is not there yet, each as a path."""
        binaries = [
            self.kube_apiserver,
            self.kube_controller_manager,
            self.kube_scheduler,
            self.etcd,
            self.helm,
            self.sentry,
            self.operator,
            self.injector,
        ]
        gone = [str(path) for path in binaries if not (path.is_file() and os.access(path, os.X_OK))]
        if not (self.dapr_chart / "Chart.yaml").exists():
            gone.append(str(self.dapr_chart / "Chart.yaml"))
        return gone


# --------------------------------------------------------------------------------------------
# The network namespace.


def _ip_command() -> str:
    return shutil.which("ip") or next(
        (p for p in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip") if Path(p).exists()), "ip"
    )


def interfaces() -> list[str]:
    """The interfaces of the current network namespace (netlink; /sys/class/net shows the
    namespace /sys was mounted in)."""
    done = subprocess.run(
        [_ip_command(), "-j", "link", "show"], capture_output=True, text=True, timeout=10, check=True
    )
    return sorted(str(link["ifname"]) for link in json.loads(done.stdout))


def require_loopback_only_namespace() -> None:
    """Refuse to touch a network namespace that has any interface but lo: addresses are added
    to lo and components listen on them, which must never happen in the host's namespace."""
    found = interfaces()
    if found != ["lo"]:
        raise RuntimeError(
            f"this network namespace has the interfaces {found}; run under `unshare --net` "
            "(a namespace with only lo)"
        )


def bring_up_loopback() -> None:
    subprocess.run([_ip_command(), "link", "set", "lo", "up"], check=True, timeout=10)


def add_address(ip: str) -> None:
    """Adds ip/32 to lo (nothing when it is there already)."""
    done = subprocess.run(
        [_ip_command(), "addr", "add", f"{ip}/32", "dev", "lo"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    if done.returncode != 0 and not any(m in done.stderr for m in ("File exists", "already assigned")):
        raise RuntimeError(f"ip addr add {ip}/32 dev lo: {done.stderr.strip()}")


def loopback_addresses() -> list[str]:
    done = subprocess.run(
        [_ip_command(), "-j", "addr", "show", "dev", "lo"],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    found: list[str] = []
    for link in json.loads(done.stdout):
        found += [f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])]
    return found


# --------------------------------------------------------------------------------------------
# Certificates (openssl from the system: the venv has no `cryptography`).


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {done.stderr.strip()}")


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    apiserver_cert: Path
    apiserver_key: Path
    service_account_key: Path
    service_account_pub: Path

    @classmethod
    def create(cls, folder: Path) -> Pki:
        folder.mkdir(parents=True, exist_ok=True)
        ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        _openssl(
            "req", "-x509", "-new", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "3",
            "-subj", "/CN=agora-kube-test-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=folder,
        )  # fmt: skip
        names = [
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
            "localhost",
        ]
        ips = [APISERVER_IP, KUBERNETES_SERVICE_IP, "127.0.0.1"]
        san = ",".join([f"DNS:{n}" for n in names] + [f"IP:{ip}" for ip in ips])
        (folder / "apiserver.ext").write_text(
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
            f"subjectAltName={san}\n"
        )
        _openssl(
            "req", "-new", *ec, "-keyout", "apiserver.key", "-out", "apiserver.csr",
            "-subj", "/CN=kube-apiserver",
            cwd=folder,
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "apiserver.crt", "-days", "3", "-extfile", "apiserver.ext",
            cwd=folder,
        )  # fmt: skip
        _openssl(
            "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key", cwd=folder
        )
        _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=folder)
        return cls(
            ca_cert=folder / "ca.crt",
            ca_key=folder / "ca.key",
            apiserver_cert=folder / "apiserver.crt",
            apiserver_key=folder / "apiserver.key",
            service_account_key=folder / "sa.key",
            service_account_pub=folder / "sa.pub",
        )


def write_kubeconfig(path: Path, server: str, ca: Path, token: str, user: str = "admin") -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "agora-test", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "agora-test", "context": {"cluster": "agora-test", "user": user}}],
        "current-context": "agora-test",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


# --------------------------------------------------------------------------------------------
# The API server's REST API, with plain httpx.


@dataclass(frozen=True)
class Resource:
    """One kind's REST collection: its path prefix (/api/v1 or /apis/<group>/<version>), plural
    name and whether it is namespaced."""

    prefix: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        parts = [self.prefix]
        if self.namespaced and namespace:
            parts += ["namespaces", namespace]
        parts.append(self.plural)
        if name:
            parts.append(name)
        return "/".join(parts)


class Kube:
    def __init__(self, server: str, ca: Path, token: str) -> None:
        context = ssl.create_default_context(cafile=str(ca))
        self.http = httpx.Client(
            base_url=server, verify=context, headers={"Authorization": f"Bearer {token}"}, timeout=60.0
        )
        self._resources: dict[tuple[str, str], Resource] = {}

    def close(self) -> None:
        self.http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Obj | list[Obj] | None = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> httpx.Response:
        content = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": content_type} if content is not None else {}
        return self.http.request(method, path, content=content, params=params, headers=headers)

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Obj | list[Obj] | None = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        ok: Sequence[int] = (200, 201, 202),
    ) -> Obj:
        response = self.request(method, path, body=body, params=params, content_type=content_type)
        if response.status_code not in ok:
            raise KubeError(f"{method} {path}: {response.status_code} {response.text[:2000]}")
        answer: Obj = response.json() if response.content else {}
        return answer

    def get(self, path: str) -> Obj | None:
        response = self.request("GET", path)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise KubeError(f"GET {path}: {response.status_code} {response.text[:2000]}")
        found: Obj = response.json()
        return found

    def items(self, path: str, **params: str) -> list[Obj]:
        listed = self.call("GET", path, params=params or None)
        items: list[Obj] = listed.get("items") or []
        return items

    def resource(self, api_version: str, kind: str) -> Resource:
        """Discovery: the REST collection of a kind (cached)."""
        key = (api_version, kind)
        if key not in self._resources:
            prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            for entry in self.call("GET", prefix)["resources"]:
                if "/" not in entry["name"]:
                    self._resources[(api_version, entry["kind"])] = Resource(
                        prefix, entry["name"], bool(entry["namespaced"])
                    )
        if key not in self._resources:
            raise KubeError(f"no resource for {api_version} {kind}")
        return self._resources[key]

    def path_of(self, obj: Obj, namespace: str | None = None) -> str:
        meta = obj.get("metadata", {})
        resource = self.resource(obj["apiVersion"], obj["kind"])
        return resource.path(meta.get("namespace") or namespace, meta.get("name"))

    def collection_of(self, obj: Obj, namespace: str | None = None) -> str:
        resource = self.resource(obj["apiVersion"], obj["kind"])
        return resource.path(obj.get("metadata", {}).get("namespace") or namespace)

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
        """Polls `check` until it returns something truthy (returned); KubeError after `timeout`."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                result = check()
                if result:
                    return result
            except (KubeError, httpx.HTTPError) as exc:
                last = exc
            time.sleep(interval)
        raise KubeError(f"{what}: not reached in {timeout:.0f}s" + (f" (last error: {last})" if last else ""))


# --------------------------------------------------------------------------------------------
# A userspace proxy for the cluster IPs of Services whose endpoints are real processes.


class ServiceProxy:
    def __init__(self, log: Path) -> None:
        self.log = log
        self.routes: dict[tuple[str, int], tuple[str, int]] = {}
        self.names: dict[tuple[str, int], str] = {}
        self.connections: dict[tuple[str, int], int] = {}
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.Server] = []
        self._thread = threading.Thread(target=self._loop.run_forever, name="service-proxy", daemon=True)
        self._thread.start()

    def _note(self, line: str) -> None:
        with self.log.open("a") as out:
            out.write(f"{time.strftime('%H:%M:%S')} {line}\n")

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _listen(self, listen: tuple[str, int], target: tuple[str, int]) -> asyncio.Server:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections[listen] = self.connections.get(listen, 0) + 1
            try:
                up_reader, up_writer = await asyncio.open_connection(*target)
            except OSError as exc:
                self._note(f"{listen[0]}:{listen[1]} -> {target[0]}:{target[1]} refused: {exc}")
                writer.close()
                return
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

        return await asyncio.start_server(handle, host=listen[0], port=listen[1], reuse_address=True)

    def add(self, listen_ip: str, port: int, target_ip: str, target_port: int, name: str = "") -> None:
        key = (listen_ip, port)
        if key in self.routes:
            return
        self.names[key] = name
        add_address(listen_ip)
        server = asyncio.run_coroutine_threadsafe(
            self._listen(key, (target_ip, target_port)), self._loop
        ).result(timeout=10)
        self._servers.append(server)
        self.routes[key] = (target_ip, target_port)
        self._note(f"{listen_ip}:{port} ({name}) -> {target_ip}:{target_port}")

    def table(self) -> dict[str, str]:
        """Every route with its Service and the connections it has carried so far."""
        return {
            f"{ip}:{port}": f"{self.names[(ip, port)]} -> {target[0]}:{target[1]}, "
            f"{self.connections.get((ip, port), 0)} connections"
            for (ip, port), target in sorted(self.routes.items())
        }

    def stop(self) -> None:
        async def close() -> None:
            for server in self._servers:
                server.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


# --------------------------------------------------------------------------------------------
# The control plane.


def _https_ok(url: str, ca: Path | None = None, token: str | None = None) -> Callable[[], bool]:
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=str(ca)) if ca else False
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    def check() -> bool:
        try:
            return httpx.get(url, verify=verify, headers=headers, timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    return check


@dataclass
class ControlPlane:
    workdir: Path
    tools: KubeTools
    # More kube-apiserver flags (node.py: how it reaches a real kubelet).
    apiserver_args: list[str] = field(default_factory=list)
    processes: list[ManagedProcess] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.logs = self.workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.token = base64.b32encode(os.urandom(20)).decode().lower().rstrip("=")
        self.server = f"https://{APISERVER_IP}:{APISERVER_PORT}"
        self.real_ips: set[str] = {APISERVER_IP}
        self.proxy: ServiceProxy | None = None
        self._kube: Kube | None = None
        self.pki: Pki | None = None
        self.kubeconfig = self.workdir / "admin.kubeconfig"

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def kube(self) -> Kube:
        if self._kube is None:
            raise RuntimeError("the control plane is not started")
        return self._kube

    def _timed(self, name: str, started: float) -> None:
        self.timings[name] = round(time.monotonic() - started, 1)

    def _process(
        self, name: str, argv: Sequence[str | Path], env: dict[str, str] | None = None
    ) -> ManagedProcess:
        process = ManagedProcess(name, [str(a) for a in argv], self.logs / f"{name}.log", env=env)
        self.processes.append(process)
        process.start()
        return process

    def start(self) -> None:
        started = time.monotonic()
        require_loopback_only_namespace()
        bring_up_loopback()
        add_address(APISERVER_IP)
        self.proxy = ServiceProxy(self.logs / "service-proxy.log")
        self.pki = Pki.create(self.workdir / "pki")
        write_kubeconfig(self.kubeconfig, self.server, self.pki.ca_cert, self.token)
        self._start_etcd()
        self._start_apiserver()
        self._kube = Kube(self.server, self.pki.ca_cert, self.token)
        self._start_controller_manager()
        self._start_scheduler()
        self.proxy_services()
        self._timed("control plane up", started)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop(timeout=10)
        if self.proxy is not None:
            self.proxy.stop()
        if self._kube is not None:
            self._kube.close()

    def stopped(self) -> list[str]:
        """Names of the processes that are not running any more (should be empty)."""
        return [p.name for p in self.processes if not p.running()]

    # -- the parts ---------------------------------------------------------------------------

    def _start_etcd(self) -> None:
        started = time.monotonic()
        client = f"http://127.0.0.1:{ETCD_CLIENT_PORT}"
        peer = f"http://127.0.0.1:{ETCD_PEER_PORT}"
        etcd = self._process(
            "etcd",
            [
                self.tools.etcd,
                "--name=default",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=2147483648",
                "--log-level=warn",
            ],
        )
        etcd.wait_until(http_ok(f"{client}/health"), "etcd healthy", timeout=60)
        self._timed("etcd", started)

    def _start_apiserver(self) -> None:
        assert self.pki is not None
        started = time.monotonic()
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{self.token},admin,admin-uid,"system:masters"\n')
        tokens.chmod(0o600)
        apiserver = self._process(
            "kube-apiserver",
            [
                self.tools.kube_apiserver,
                f"--etcd-servers=http://127.0.0.1:{ETCD_CLIENT_PORT}",
                f"--advertise-address={APISERVER_IP}",
                f"--bind-address={APISERVER_IP}",
                f"--secure-port={APISERVER_PORT}",
                f"--tls-cert-file={self.pki.apiserver_cert}",
                f"--tls-private-key-file={self.pki.apiserver_key}",
                f"--client-ca-file={self.pki.ca_cert}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                "--anonymous-auth=false",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={self.pki.service_account_pub}",
                f"--service-account-signing-key-file={self.pki.service_account_key}",
                f"--api-audiences={SERVICE_ACCOUNT_ISSUER}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--enable-aggregator-routing=true",
                "--allow-privileged=true",
                "--profiling=false",
                "--endpoint-reconciler-type=lease",
                "--v=1",
                *self.apiserver_args,
            ],
        )
        apiserver.wait_until(
            _https_ok(f"{self.server}/readyz", self.pki.ca_cert, self.token), "API server ready", timeout=180
        )
        self._timed("kube-apiserver", started)

    def _start_controller_manager(self) -> None:
        assert self.pki is not None
        started = time.monotonic()
        controllers = [
            "serviceaccount-controller",
            "serviceaccount-token-controller",
            "root-ca-certificate-publisher-controller",
            "endpoints-controller",
            "endpointslice-controller",
            "endpointslice-mirroring-controller",
            "replicaset-controller",
            "deployment-controller",
            "statefulset-controller",
            "garbage-collector-controller",
            "namespace-controller",
            # Keeps each PodDisruptionBudget's allowed disruptions: without it they stay 0 and
            # every eviction (a drain) is refused for good.
            "disruption-controller",
            # Takes the not-ready taint (TaintNodesByCondition puts it on every new node) off the
            # node once its kubelet reports it Ready.
            "node-lifecycle-controller",
        ]
        kubeconfig = str(self.kubeconfig)
        manager = self._process(
            "kube-controller-manager",
            [
                self.tools.kube_controller_manager,
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--authentication-skip-lookup=true",
                "--bind-address=127.0.0.1",
                "--secure-port=10257",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.pki.service_account_key}",
                f"--root-ca-file={self.pki.ca_cert}",
                f"--controllers={','.join(controllers)}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--v=1",
            ],
        )
        manager.wait_until(_https_ok("https://127.0.0.1:10257/healthz"), "controller manager healthy", 120)
        # The service-account controller has run once the default namespace has its account.
        self.kube.wait_for(
            "the default service account",
            lambda: self.kube.get("/api/v1/namespaces/default/serviceaccounts/default"),
            timeout=120,
        )
        self._timed("kube-controller-manager", started)

    def _start_scheduler(self) -> None:
        started = time.monotonic()
        kubeconfig = str(self.kubeconfig)
        scheduler = self._process(
            "kube-scheduler",
            [
                self.tools.kube_scheduler,
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--authentication-skip-lookup=true",
                "--bind-address=127.0.0.1",
                "--secure-port=10259",
                "--leader-elect=false",
                "--v=1",
            ],
        )
        scheduler.wait_until(_https_ok("https://127.0.0.1:10259/healthz"), "scheduler healthy", 120)
        self._timed("kube-scheduler", started)

    def helm(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        home = self.workdir / "helm"
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        started = time.monotonic()
        done = subprocess.run(
            [str(self.tools.helm), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        with (self.logs / "helm.log").open("a") as log:
            log.write(
                f"$ helm {shlex.join(args)}  # exit {done.returncode} in {time.monotonic() - started:.1f}s\n"
                f"{done.stdout}{done.stderr}\n"
            )
        return done

    # -- pods ----------------------------------------------------------------------------------

    def running_pod(self, namespace: str, selector: str, timeout: float = 120) -> Obj:
        """The one Running and Ready pod matching a label selector, with its IP."""

        def ready() -> Obj | None:
            for pod in self.kube.items(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector):
                status = pod.get("status", {})
                conditions = status.get("conditions") or []
                if (
                    "deletionTimestamp" not in pod["metadata"]
                    and status.get("podIP")
                    and any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
                ):
                    return pod
            return None

        try:
            found: Obj = self.kube.wait_for(f"a Ready pod {namespace}/{selector}", ready, timeout)
        except KubeError as exc:
            raise KubeError(f"{exc}: {self.why_not_ready(namespace, selector)}") from None
        return found

    def why_not_ready(self, namespace: str, selector: str) -> str:
        """What the API says about pods that did not become Ready, on one line (a test report's
        summary shows a failure's first): each pod's phase, conditions, containers' states and
        events, and the nodes' conditions and taints."""

        def told(condition: Obj, healthy: str) -> str:
            said = f"{condition['type']}={condition['status']}"
            if condition["status"] != healthy:
                said += f" {condition.get('reason', '')}: {condition.get('message', '')}"
            return said

        lines: list[str] = []
        try:
            for node in self.kube.items("/api/v1/nodes"):
                conditions = [
                    told(c, "True" if c["type"] == "Ready" else "False")
                    for c in node.get("status", {}).get("conditions") or []
                ]
                taints = [f"{t['key']}:{t['effect']}" for t in node.get("spec", {}).get("taints") or []]
                lines.append(f"node {node['metadata']['name']}: {', '.join(conditions)}; taints {taints}")
            for pod in self.kube.items(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector):
                name = pod["metadata"]["name"]
                status = pod.get("status", {})
                conditions = [told(c, "True") for c in status.get("conditions") or []]
                lines.append(f"pod {name}: phase {status.get('phase')}; {'; '.join(conditions)}")
                containers = (status.get("initContainerStatuses") or []) + (
                    status.get("containerStatuses") or []
                )
                for container in containers:
                    state = json.dumps(container.get("state"))[:400]
                    lines.append(
                        f"container {container['name']}: ready={container.get('ready')} "
                        f"restarts={container.get('restartCount')} state={state}"
                    )
                events = self.kube.items(
                    f"/api/v1/namespaces/{namespace}/events", fieldSelector=f"involvedObject.name={name}"
                )
                for event in events[-12:]:
                    message = str(event.get("message"))[:300]
                    lines.append(f"event {event.get('type')} {event.get('reason')}: {message}")
        except (KubeError, httpx.HTTPError) as exc:
            lines.append(f"(the API did not answer: {exc})")
        return " | ".join(lines)

    def proxy_services(self) -> dict[str, str]:
        """Serves the cluster IP of every Service whose endpoints include a real process (the API
        server, a PodProcess), forwarding to that endpoint. Returns what is routed."""
        assert self.proxy is not None
        for service in self.kube.items("/api/v1/services"):
            spec = service["spec"]
            cluster_ip = spec.get("clusterIP")
            if not cluster_ip or cluster_ip == "None":
                continue
            meta = service["metadata"]
            slices = self.kube.items(
                f"/apis/discovery.k8s.io/v1/namespaces/{meta['namespace']}/endpointslices",
                labelSelector=f"kubernetes.io/service-name={meta['name']}",
            )
            for port in spec.get("ports") or []:
                for piece in slices:
                    slice_port = next(
                        (p for p in piece.get("ports") or [] if p.get("name", "") == port.get("name", "")),
                        None,
                    )
                    addresses = [
                        a
                        for endpoint in piece.get("endpoints") or []
                        for a in endpoint.get("addresses", [])
                        if a in self.real_ips
                    ]
                    if slice_port and addresses:
                        self.proxy.add(
                            cluster_ip,
                            int(port["port"]),
                            addresses[0],
                            int(slice_port["port"]),
                            f"{meta['namespace']}/{meta['name']}",
                        )
                        break
        return self.proxy.table()
