"""A Kubernetes control plane on loopback, with Dapr's control plane installed by Dapr's own chart.

Everything runs inside the current network namespace, which must have no interface but `lo`
(scenario.py is started under `unshare --net`); nothing here can send a packet anywhere else.
The addresses the cluster needs are added to `lo`:

- the API server's advertise address (APISERVER_IP, the endpoint of the `kubernetes` Service) and
  the fake node's address;
- the cluster IP of every Service whose endpoints are real processes, where a small userspace
  proxy (ServiceProxy, what kube-proxy's old userspace mode did) forwards to the endpoint;
- the pod IP kwok gave each Dapr pod that runs for real.

The parts: etcd, kube-apiserver (RBAC, a static admin token in system:masters, service-account
signing keys, `--enable-aggregator-routing=true`), kube-controller-manager (service-account and
token controllers, endpoints/endpointslices, replicasets, deployments, statefulsets, garbage
collector, namespaces, root CA publisher, node lifecycle), kube-scheduler, and kwok, which plays
the kubelet of one fake node: pods get IPs from POD_CIDR and become Running/Ready, and no
container runs.

`--enable-aggregator-routing=true` makes the API server call admission webhooks at an endpoint
(the pod IP) instead of the Service's cluster IP: kube-apiserver builds one service resolver
(cmd/kube-apiserver/app/server.go, buildServiceResolver: NewEndpointServiceResolver when the flag
is on, NewClusterIPServiceResolver otherwise) and hands the same resolver to the aggregator and
to the admission plugin initializer that configures the webhook clients
(pkg/controlplane/apiserver/config.go, genericAdmissionConfig.New(..., serviceResolver, ...)),
whose webhook initializer passes it on to the MutatingAdmissionWebhook and
ValidatingAdmissionWebhook plugins (k8s.io/apiserver pkg/admission/plugin/webhook/initializer:
SetServiceResolver). The Service proxy below counts its connections, so the report shows the
injector's cluster IP was never used by the API server.

Dapr's sentry, operator and sidecar injector run for real (PodProcess, a stand-in for the
kubelet): the container's command, args and environment are the ones Dapr's chart gave the pod
(env `valueFrom` resolved as the kubelet does), and its volumes (the trust bundle ConfigMap, the
sentry-audience projected service-account token, the API access token) are written from the API
server, tokens by TokenRequest bound to the pod, and bind-mounted at the pod's mount paths in a
mount namespace of the process's own. /etc/hosts there maps each Service's DNS name to its
cluster IP (the cluster DNS stand-in). What differs from a real pod: the process shares the one
network namespace with the others, so a listener that the binary binds on every address with a
port another Dapr pod also uses is moved (Dapr chart values where it has one, else
PodProcess.extra_args; both recorded in the report). The process runs as the image's non-root
user (uid 65532), as Dapr requires in Kubernetes mode.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import json
import os
import shlex
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from agora.harness.processes import ManagedProcess, ProcessFailed, http_ok
from agora.harness.toolchain import cache_root, pinned_versions

REPO = Path(__file__).resolve().parents[3]

SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
POD_CIDR = "10.244.0.0/24"
APISERVER_IP = "10.250.0.1"
APISERVER_PORT = 443
NODE_IP = "10.250.0.2"
NODE_NAME = "kwok-node-0"
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
CLUSTER_DOMAIN = "cluster.local"
SERVICE_ACCOUNT_ISSUER = f"https://kubernetes.default.svc.{CLUSTER_DOMAIN}"
DAPR_NAMESPACE = "dapr-system"

Obj = dict[str, Any]


class KubeError(RuntimeError):
    """An API call that did not answer as expected; the message has the status and the body."""


# --------------------------------------------------------------------------------------------
# Where the binaries, Dapr's chart and kwok's stages are (`make kube` builds or downloads them).


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
    kwok: Path
    sentry: Path
    operator: Path
    injector: Path
    # Dapr's chart and kwok's stages, from the Go module downloads the builds made.
    dapr_chart: Path
    kwok_stages: Path
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
            kwok=cache / f"kwok-{versions['KWOK_VERSION']}" / "bin" / "kwok",
            sentry=dapr / "sentry",
            operator=dapr / "operator",
            injector=dapr / "injector",
            dapr_chart=modules
            / "github.com"
            / "dapr"
            / f"dapr@v{versions['DAPR_VERSION']}"
            / "charts"
            / "dapr",
            kwok_stages=modules / "sigs.k8s.io" / f"kwok@v{versions['KWOK_VERSION']}" / "kustomize" / "stage",
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
            self.kwok,
            self.sentry,
            self.operator,
            self.injector,
        ]
        gone = [str(path) for path in binaries if not (path.is_file() and os.access(path, os.X_OK))]
        gone += [
            str(path) for path in (self.dapr_chart / "Chart.yaml", self.kwok_stages) if not path.exists()
        ]
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
class _Token:
    path: Path
    namespace: str
    service_account: str
    audience: str | None
    expiration: int
    pod: tuple[str, str]  # name, uid
    written: float = 0.0


@dataclass
class ControlPlane:
    workdir: Path
    tools: KubeTools
    # False for a cluster whose nodes are real kubelets (node.py): no fake node to schedule onto.
    with_kwok: bool = True
    # More kube-apiserver flags (node.py: how it reaches a real kubelet).
    apiserver_args: list[str] = field(default_factory=list)
    processes: list[ManagedProcess] = field(default_factory=list)
    pods: list[PodProcess] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.logs = self.workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.token = base64.b32encode(os.urandom(20)).decode().lower().rstrip("=")
        self.server = f"https://{APISERVER_IP}:{APISERVER_PORT}"
        self.real_ips: set[str] = {APISERVER_IP}
        self._tokens: list[_Token] = []
        self._tokens_lock = threading.Lock()
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None
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
        for ip in (APISERVER_IP, NODE_IP):
            add_address(ip)
        self.proxy = ServiceProxy(self.logs / "service-proxy.log")
        self.pki = Pki.create(self.workdir / "pki")
        write_kubeconfig(self.kubeconfig, self.server, self.pki.ca_cert, self.token)
        self._start_etcd()
        self._start_apiserver()
        self._kube = Kube(self.server, self.pki.ca_cert, self.token)
        self._start_controller_manager()
        self._start_scheduler()
        if self.with_kwok:
            self._start_kwok()
        self.proxy_services()
        self._refresher = threading.Thread(target=self._refresh_tokens, name="token-refresher", daemon=True)
        self._refresher.start()
        self._timed("control plane up", started)

    def stop(self) -> None:
        self._stop.set()
        for pod in reversed(self.pods):
            pod.stop()
        for process in reversed(self.processes):
            process.stop(timeout=10)
        if self.proxy is not None:
            self.proxy.stop()
        if self._kube is not None:
            self._kube.close()

    def stopped(self) -> list[str]:
        """Names of the processes that are not running any more (should be empty)."""
        dead = [p.name for p in self.processes if not p.running()]
        return dead + [p.name for p in self.pods if not p.running()]

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
            # Takes the not-ready taint (TaintNodesByCondition puts it on every new node) off the
            # node once kwok reports it Ready.
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

    def _start_kwok(self) -> None:
        started = time.monotonic()
        stages = [
            self.tools.kwok_stages / "node" / "fast" / "node-initialize.yaml",
            self.tools.kwok_stages / "node" / "heartbeat-with-lease" / "node-heartbeat-with-lease.yaml",
            self.tools.kwok_stages / "pod" / "fast" / "pod-ready.yaml",
            self.tools.kwok_stages / "pod" / "fast" / "pod-complete.yaml",
            self.tools.kwok_stages / "pod" / "fast" / "pod-delete.yaml",
        ]
        config = self.workdir / "kwok.yaml"
        config.write_text("\n---\n".join(stage.read_text().strip() for stage in stages) + "\n")
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": NODE_NAME,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/hostname": NODE_NAME,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                },
            },
            "spec": {},
            "status": {
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "250"},
                "capacity": {"cpu": "64", "memory": "256Gi", "pods": "250"},
            },
        }
        self.kube.call("POST", "/api/v1/nodes", body=node)
        kwok = self._process(
            "kwok",
            [
                self.tools.kwok,
                f"--kubeconfig={self.kubeconfig}",
                f"--config={config}",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                f"--cidr={POD_CIDR}",
                f"--node-ip={NODE_IP}",
                "--node-lease-duration-seconds=40",
            ],
            env={**os.environ, "HOME": str(self.workdir / "home")},
        )

        def node_ready() -> bool:
            found = self.kube.get(f"/api/v1/nodes/{NODE_NAME}") or {}
            conditions = found.get("status", {}).get("conditions") or []
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            return ready and not found.get("spec", {}).get("taints")

        kwok.wait_until(node_ready, "the kwok node Ready and untainted", timeout=120)
        self._timed("kwok", started)

    # -- helm ----------------------------------------------------------------------------------

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

    def run_pod(
        self,
        namespace: str,
        selector: str,
        container: str,
        binary: Path,
        extra_args: Sequence[str] = (),
    ) -> PodProcess:
        pod = PodProcess(self, self.running_pod(namespace, selector), container, binary, list(extra_args))
        self.pods.append(pod)
        pod.start()
        return pod

    def register_token(self, token: _Token) -> None:
        self._write_token(token)
        with self._tokens_lock:
            self._tokens.append(token)

    def _write_token(self, token: _Token) -> None:
        spec: Obj = {
            "expirationSeconds": token.expiration,
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": token.pod[0], "uid": token.pod[1]},
        }
        if token.audience:
            spec["audiences"] = [token.audience]
        answer = self.kube.call(
            "POST",
            f"/api/v1/namespaces/{token.namespace}/serviceaccounts/{token.service_account}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        temporary = token.path.with_name(f".{token.path.name}.new")
        temporary.write_text(answer["status"]["token"])
        temporary.replace(token.path)
        token.written = time.monotonic()

    def _refresh_tokens(self) -> None:
        """Renews projected tokens at 80% of their lifetime, as the kubelet does."""
        while not self._stop.wait(15):
            with self._tokens_lock:
                due = [t for t in self._tokens if time.monotonic() - t.written > 0.8 * t.expiration]
            for token in due:
                with contextlib.suppress(Exception):
                    self._write_token(token)

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

    def hosts_file(self, extra: Sequence[tuple[str, str]] = ()) -> str:
        """/etc/hosts for a pod: every Service's DNS names at its cluster IP."""
        lines = ["127.0.0.1 localhost", *(f"{ip} {name}" for ip, name in extra)]
        for service in self.kube.items("/api/v1/services"):
            ip = service["spec"].get("clusterIP")
            if ip and ip != "None":
                name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
                base = f"{name}.{namespace}.svc"
                lines.append(f"{ip} {base}.{CLUSTER_DOMAIN} {base}")
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# A container of a kwok pod, run for real.


class UnsupportedPod(RuntimeError):
    pass


_MOUNT_ROOTS = (Path("/run"), Path("/var/run"), Path("/tmp"))
NONROOT_UID = 65532


class PodProcess:
    """Runs one container of a (kwok) pod as a process, the way a kubelet would run it: the
    container's command and args (the image's binary swapped for the one built here), its
    environment with `valueFrom` resolved, the kubelet's KUBERNETES_SERVICE_* variables, and its
    volumes written from the API server and bind-mounted at their mount paths in a mount
    namespace of its own (over a tmpfs on /run, so nothing of the host's /run is touched)."""

    def __init__(
        self, plane: ControlPlane, pod: Obj, container: str, binary: Path, extra_args: list[str]
    ) -> None:
        self.plane = plane
        self.pod = pod
        self.namespace: str = pod["metadata"]["namespace"]
        self.name: str = pod["metadata"]["name"]
        self.ip: str = pod["status"]["podIP"]
        self.container: Obj = next(c for c in pod["spec"]["containers"] if c["name"] == container)
        self.binary = binary
        self.extra_args = extra_args
        self.folder = plane.workdir / "pods" / f"{self.namespace}_{self.name}"
        self.process: ManagedProcess | None = None
        self.argv: list[str] = []
        self.env: dict[str, str] = {}
        self.mounts: list[tuple[str, str]] = []
        self.user = ""

    def running(self) -> bool:
        return self.process is not None and self.process.running()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(timeout=10)

    def log_tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines) if self.process else "(not started)"

    # -- the pod's parts -------------------------------------------------------------------------

    def _config_map(self, name: str) -> dict[str, str]:
        found = self.plane.kube.get(f"/api/v1/namespaces/{self.namespace}/configmaps/{name}")
        if found is None:
            raise UnsupportedPod(f"ConfigMap {self.namespace}/{name} is missing")
        data: dict[str, str] = found.get("data") or {}
        return data

    def _secret(self, name: str) -> dict[str, bytes]:
        found = self.plane.kube.get(f"/api/v1/namespaces/{self.namespace}/secrets/{name}")
        if found is None:
            raise UnsupportedPod(f"Secret {self.namespace}/{name} is missing")
        return {key: base64.b64decode(value) for key, value in (found.get("data") or {}).items()}

    def _field(self, path: str) -> str:
        meta, spec, status = self.pod["metadata"], self.pod["spec"], self.pod["status"]
        fields = {
            "metadata.name": meta["name"],
            "metadata.namespace": meta["namespace"],
            "metadata.uid": meta["uid"],
            "spec.nodeName": spec.get("nodeName", ""),
            "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            "status.podIP": status.get("podIP", ""),
            "status.hostIP": status.get("hostIP", ""),
        }
        if path in fields:
            return str(fields[path])
        for prefix, values in (
            ("metadata.labels", meta.get("labels")),
            ("metadata.annotations", meta.get("annotations")),
        ):
            if path == prefix:
                return "\n".join(f'{k}="{v}"' for k, v in sorted((values or {}).items()))
            if path.startswith(prefix + "['"):
                return str((values or {}).get(path[len(prefix) + 2 : -2], ""))
        raise UnsupportedPod(f"fieldRef {path} is not supported")

    @staticmethod
    def _write(folder: Path, relative: str, data: bytes) -> None:
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def _keys(self, folder: Path, data: dict[str, bytes], items: list[Obj] | None) -> None:
        if items:
            for item in items:
                if item["key"] in data:
                    self._write(folder, item["path"], data[item["key"]])
        else:
            for key, value in data.items():
                self._write(folder, key, value)

    def _materialize(self, volume: Obj, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        if "emptyDir" in volume:
            return
        if "configMap" in volume:
            source = volume["configMap"]
            data = {k: v.encode() for k, v in self._config_map(source["name"]).items()}
            self._keys(folder, data, source.get("items"))
        elif "secret" in volume:
            source = volume["secret"]
            self._keys(folder, self._secret(source["secretName"]), source.get("items"))
        elif "downwardAPI" in volume:
            for item in volume["downwardAPI"].get("items", []):
                self._write(folder, item["path"], self._field(item["fieldRef"]["fieldPath"]).encode())
        elif "projected" in volume:
            for source in volume["projected"]["sources"]:
                if "serviceAccountToken" in source:
                    spec = source["serviceAccountToken"]
                    self.plane.register_token(
                        _Token(
                            path=folder / spec["path"],
                            namespace=self.namespace,
                            service_account=self.pod["spec"].get("serviceAccountName", "default"),
                            audience=spec.get("audience"),
                            expiration=int(spec.get("expirationSeconds", 3600)),
                            pod=(self.name, self.pod["metadata"]["uid"]),
                        )
                    )
                elif "configMap" in source:
                    data = {k: v.encode() for k, v in self._config_map(source["configMap"]["name"]).items()}
                    self._keys(folder, data, source["configMap"].get("items"))
                elif "secret" in source:
                    self._keys(folder, self._secret(source["secret"]["name"]), source["secret"].get("items"))
                elif "downwardAPI" in source:
                    for item in source["downwardAPI"].get("items", []):
                        self._write(folder, item["path"], self._field(item["fieldRef"]["fieldPath"]).encode())
                else:
                    raise UnsupportedPod(f"projected source {sorted(source)} is not supported")
        else:
            raise UnsupportedPod(f"volume {volume['name']} ({sorted(volume)}) is not supported")

    def _environment(self) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOSTNAME": self.name,
            "HOME": "/home/nonroot",  # the image's; not there, like ~/.kube
            # What the kubelet gives every container: the `kubernetes` Service's address.
            "KUBERNETES_SERVICE_HOST": KUBERNETES_SERVICE_IP,
            "KUBERNETES_SERVICE_PORT": "443",
            "KUBERNETES_SERVICE_PORT_HTTPS": "443",
            "KUBERNETES_PORT": f"tcp://{KUBERNETES_SERVICE_IP}:443",
            "KUBERNETES_PORT_443_TCP": f"tcp://{KUBERNETES_SERVICE_IP}:443",
            "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
            "KUBERNETES_PORT_443_TCP_PORT": "443",
            "KUBERNETES_PORT_443_TCP_ADDR": KUBERNETES_SERVICE_IP,
        }
        if os.environ.get("AGORA_RUN_ID"):  # tags the process, so a leftover could be found
            env["AGORA_RUN_ID"] = os.environ["AGORA_RUN_ID"]
        for var in self.container.get("env") or []:
            if "value" in var:
                env[var["name"]] = str(var["value"])
            elif "valueFrom" in var:
                source = var["valueFrom"]
                if "fieldRef" in source:
                    env[var["name"]] = self._field(source["fieldRef"]["fieldPath"])
                elif "configMapKeyRef" in source:
                    ref = source["configMapKeyRef"]
                    env[var["name"]] = self._config_map(ref["name"])[ref["key"]]
                elif "secretKeyRef" in source:
                    ref = source["secretKeyRef"]
                    env[var["name"]] = self._secret(ref["name"])[ref["key"]].decode()
                else:
                    raise UnsupportedPod(f"env {var['name']}: {sorted(source)} is not supported")
            else:
                env[var["name"]] = ""
        return env

    def start(self) -> None:
        """Writes the pod's volumes and starts the container's process."""
        self.folder.mkdir(parents=True, exist_ok=True)
        add_address(self.ip)
        self.plane.real_ips.add(self.ip)
        command = list(self.container.get("command") or [])
        if not command or Path(command[0]).name != self.binary.name:
            raise UnsupportedPod(f"container {self.container['name']} runs {command}, not {self.binary.name}")
        volumes = {v["name"]: v for v in self.pod["spec"].get("volumes") or []}
        hosts = self.folder / "hosts"
        hosts.write_text(self.plane.hosts_file([(self.ip, self.name)]))
        # The binary is bind-mounted into the new /run: the user below may not be able to reach
        # it where it was built (e.g. under /root).
        binary = f"/run/agora-pod/bin/{self.binary.name}"
        script = [
            "set -e",
            "mount -t tmpfs -o mode=0755 agora-pod /run",
            "mkdir -p /run/agora-pod/bin",
            f": > {binary}",
            f"mount --bind {shlex.quote(str(self.binary))} {binary}",
            f"mount --bind {shlex.quote(str(hosts))} /etc/hosts",
        ]
        # Mounts over /tmp last: the pod's own folder may be under /tmp.
        mounts = sorted(
            self.container.get("volumeMounts") or [],
            key=lambda m: Path(m["mountPath"]).is_relative_to("/tmp"),
        )
        for mount in mounts:
            target = Path(mount["mountPath"])
            if not any(target == root or root in target.parents for root in _MOUNT_ROOTS):
                raise UnsupportedPod(f"mount path {target} is outside {[str(r) for r in _MOUNT_ROOTS]}")
            if mount.get("subPath"):
                raise UnsupportedPod(f"volume mount {mount['name']} uses subPath")
            source = self.folder / "volumes" / mount["name"]
            self._materialize(volumes[mount["name"]], source)
            options = "bind,ro" if mount.get("readOnly") else "bind"
            script += [
                f"mkdir -p {shlex.quote(str(target))}",
                f"mount -o {options} {shlex.quote(str(source))} {shlex.quote(str(target))}",
            ]
        # The container's user: its securityContext's, else the pod's, else the image's (Dapr's
        # control-plane images are distroless "nonroot", uid 65532). Dapr refuses to run as root
        # in Kubernetes mode. setpriv restores the parent-death signal the uid change clears.
        security = {
            **(self.pod["spec"].get("securityContext") or {}),
            **(self.container.get("securityContext") or {}),
        }
        uid = int(security.get("runAsUser", NONROOT_UID))
        gid = int(security.get("runAsGroup", uid))
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        script += [
            "cd /",
            f'exec {setpriv} --reuid={uid} --regid={gid} --clear-groups --pdeathsig=keep -- "$@"',
        ]
        self.argv = [binary, *command[1:], *(self.container.get("args") or []), *self.extra_args]
        self.env = self._environment()
        self.user = f"{uid}:{gid}"
        self.mounts = [(m["name"], m["mountPath"]) for m in self.container.get("volumeMounts") or []]
        unshare = shutil.which("unshare") or "/usr/bin/unshare"
        wrapper = [unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", "\n".join(script)]
        self.process = ManagedProcess(
            f"pod-{self.name}",
            [*wrapper, self.name, *self.argv],
            self.plane.logs / f"pod-{self.name}.log",
            env=self.env,
        )
        self.process.start()

    def wait_healthy(self, port: int, timeout: float = 120) -> None:
        """Until the process's healthz server (on every address, port `port`) answers 200."""
        if self.process is None:
            raise ProcessFailed(f"{self.name} is not started")
        self.process.wait_until(http_ok(f"http://{self.ip}:{port}/healthz"), f"{self.name} healthy", timeout)

    def describe(self) -> Obj:
        return {
            "pod": f"{self.namespace}/{self.name}",
            "pod_ip": self.ip,
            "argv": self.argv,
            "user": self.user,
            "extra_args": self.extra_args,
            "env": sorted(k for k in self.env if not k.startswith("KUBERNETES_PORT_")),
            "mounts": [f"{name} -> {path}" for name, path in self.mounts],
        }


# --------------------------------------------------------------------------------------------
# Dapr's control plane, installed by Dapr's own chart.

# The chart's values for this cluster, and why.
DAPR_VALUES: Obj = {
    "global": {
        # One replica of each: one fake node, and the real processes share one network namespace.
        "ha": {"enabled": False},
        "tag": "",  # set from DAPR_VERSION below (the images are never pulled: kwok runs no container)
        # Every control-plane binary binds its metrics port (9090) on all addresses; in the one
        # network namespace the second would fail.
        "prometheus": {"enabled": False},
    },
    # No PersistentVolumes here: the (fake) scheduler keeps its data in memory.
    "dapr_scheduler": {"cluster": {"inMemoryStorage": True}},
    # Sentry's healthz port is 8080 and not configurable in the chart; the injector's is.
    "dapr_sidecar_injector": {"healthzPort": 8081},
}
SENTRY_HEALTHZ = 8080
INJECTOR_HEALTHZ = 8081
# The operator's healthz port is fixed at 8080 by its chart (like sentry's): moved with its own flag.
OPERATOR_HEALTHZ = 8082


@dataclass
class Dapr:
    plane: ControlPlane
    sentry: PodProcess | None = None
    operator: PodProcess | None = None
    injector: PodProcess | None = None
    values: Obj = field(default_factory=dict)

    def install(self) -> Obj:
        """helm install Dapr's chart, then run sentry, operator and injector for real. Returns
        evidence for the report."""
        plane, kube = self.plane, self.plane.kube
        started = time.monotonic()
        self.values = json.loads(json.dumps(DAPR_VALUES))
        self.values["global"]["tag"] = plane.tools.versions["DAPR_VERSION"]
        values_file = plane.workdir / "dapr-values.yaml"
        values_file.write_text(yaml.safe_dump(self.values))
        done = plane.helm(
            "install", "dapr", str(plane.tools.dapr_chart), "--namespace", DAPR_NAMESPACE,
            "--create-namespace", "--values", str(values_file), "--wait", "--timeout", "5m",
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"helm install dapr failed: {done.stderr.strip()}")
        plane.timings["helm install dapr"] = round(time.monotonic() - started, 1)

        started = time.monotonic()
        self.sentry = plane.run_pod(DAPR_NAMESPACE, "app=dapr-sentry", "dapr-sentry", plane.tools.sentry)
        self.sentry.wait_healthy(SENTRY_HEALTHZ)
        trust_anchors: str = kube.wait_for(
            "sentry's trust anchors in ConfigMap dapr-trust-bundle",
            lambda: (
                (kube.get(f"/api/v1/namespaces/{DAPR_NAMESPACE}/configmaps/dapr-trust-bundle") or {})
                .get("data", {})
                .get("ca.crt")
            ),
            timeout=60,
        )
        plane.proxy_services()
        self.operator = plane.run_pod(
            DAPR_NAMESPACE,
            "app=dapr-operator",
            "dapr-operator",
            plane.tools.operator,
            ["--healthz-port", str(OPERATOR_HEALTHZ)],
        )
        self.injector = plane.run_pod(
            DAPR_NAMESPACE, "app=dapr-sidecar-injector", "dapr-sidecar-injector", plane.tools.injector
        )
        self.operator.wait_healthy(OPERATOR_HEALTHZ, timeout=180)
        self.injector.wait_healthy(INJECTOR_HEALTHZ, timeout=180)
        routes = plane.proxy_services()

        def webhook_ca() -> str | None:
            hook = kube.get(
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/dapr-sidecar-injector"
            )
            ca = (hook or {}).get("webhooks", [{}])[0].get("clientConfig", {}).get("caBundle")
            return str(ca) if ca else None

        ca_bundle = kube.wait_for("the injector's caBundle in its webhook", webhook_ca, timeout=60)
        plane.timings["dapr control plane processes up"] = round(time.monotonic() - started, 1)
        return {
            "chart": str(plane.tools.dapr_chart),
            "values": self.values,
            "processes": [p.describe() for p in (self.sentry, self.operator, self.injector)],
            "service_proxy": routes,
            "trust_anchors_from_sentry": trust_anchors.startswith("-----BEGIN CERTIFICATE-----"),
            "webhook_ca_bundle_is_sentry_root": base64.b64decode(ca_bundle).decode().strip()
            == trust_anchors.strip(),
        }

    def trust_anchors(self) -> str:
        found = self.plane.kube.get(f"/api/v1/namespaces/{DAPR_NAMESPACE}/configmaps/dapr-trust-bundle") or {}
        return str(found.get("data", {}).get("ca.crt", ""))


def pod_ip_in_cidr(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip) in ipaddress.ip_network(POD_CIDR)
    except ValueError:
        return False


@contextlib.contextmanager
def control_plane(workdir: Path, tools: KubeTools | None = None) -> Iterator[ControlPlane]:
    """A started control plane, stopped (every process) on the way out, also on failure."""
    plane = ControlPlane(workdir, tools or KubeTools.from_environment())
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()
