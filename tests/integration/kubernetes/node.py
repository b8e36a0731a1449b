"""A real Kubernetes node: the kubelet built from the pinned k8s.io/kubernetes, Debian's containerd
and runc, and the CNI `bridge` + `host-local` plugins, inside the loopback-only network namespace
of the control plane (control_plane.py).

It must run in namespaces of its own (node_scenario.py is started under
`unshare --net --mount --pid --fork --mount-proc`), because the kubelet and containerd write to
fixed host paths whatever their configuration says, and leave things behind:

- mounts: /run, /var/lib and /var/log are replaced by folders of the work directory in this mount
  namespace (containerd's /run/containerd and shim sockets, the kubelet's /var/lib/kubelet with
  its device-plugins folder, /var/log/pods and /var/log/containers, the CNI plugins'
  /var/lib/cni, network namespaces under /run/netns); they are gone with the namespace;
- kernel settings: the kubelet sets vm.overcommit_memory, vm.panic_on_oom, kernel.panic,
  kernel.panic_on_oops and kernel.keys.root_max{keys,bytes} on start, machine-wide settings no
  network namespace holds; here each of those /proc/sys files is covered by a file of the work
  directory holding the value the kubelet wants, so it reads what it wants and changes nothing;
- processes: containerd's shims detach from containerd, and containers are not children of the
  kubelet; in the PID namespace every one of them is killed by the kernel when the scenario (its
  PID 1) ends, however it ends;
- cgroups: pods' cgroups are made under a cgroup root named after the run (`cgroup_root`), in
  every cgroup hierarchy; `remove_cgroups` removes them (the test calls it once the PID
  namespace is gone, so they are empty).

The network: the node's address (NODE_IP) is one more /32 on `lo` (this kernel has no `dummy`
link type) and pods get addresses from NODE_POD_CIDR on a bridge the CNI plugin makes in this
namespace, whose gateway address makes them reachable from the namespace's other processes.
A second node (`Node(index=1)`) is one more kubelet and containerd in the same namespaces, with
the next address and pod range on a bridge of its own: the namespace routes between the two
bridges, and node 0's kube-proxy serves the Services for both.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from agora.harness.processes import ManagedProcess, http_ok
from agora.harness.toolchain import cache_root
from tests.integration.kubernetes.control_plane import (
    APISERVER_IP,
    CLUSTER_DOMAIN,
    ControlPlane,
    KubeTools,
    Obj,
    add_address,
    go_module_cache,
    write_kubeconfig,
)

NODE_NAME = "agora-node-0"
NODE_IP = "10.250.0.3"
NODE_POD_CIDR = "10.244.1.0/24"
# The kube-dns Service's address (the tenth of the Service range, as kubeadm chooses).
CLUSTER_DNS_IP = "10.96.0.10"
BRIDGE = "agora0"
"""Node 0's bridge; node N's is agora<N>."""
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248
KUBE_PROXY_HEALTHZ = "127.0.0.1:10256"
KUBE_PROXY_METRICS = "127.0.0.1:10249"
CNI_BIN_DIR = Path("/usr/lib/cni")
CGROUP_MOUNTS = Path("/sys/fs/cgroup")
# The machine-wide kernel settings the kubelet's container manager sets when it starts
# (pkg/kubelet/cm/container_manager_linux.go, setupKernelTunables), with the values it wants.
KUBELET_KERNEL_SETTINGS = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}
# Host folders the node writes under, replaced in its mount namespace.
PRIVATE_FOLDERS = ("/run", "/var/lib", "/var/log")
# What must not appear on the host because of a node (checked by the test before and after).
HOST_PATHS = (
    "/run/containerd",
    "/run/netns",
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/var/lib/cni",
    "/var/log/pods",
    "/var/log/containers",
    "/opt/containerd",
    "/etc/cni",
    "/opt/cni",
)


@dataclass(frozen=True)
class NodeTools:
    kubelet: Path
    kube_proxy: Path
    kubectl: Path
    coredns: Path
    coredns_version: str
    # Kubernetes' own CoreDNS addon manifest (RBAC, ConfigMap, Deployment, Service), from the
    # kubernetes module `make kube` downloaded.
    dns_addon: Path
    containerd: Path
    containerd_shim: Path
    ctr: Path
    runc: Path
    iptables: Path
    cni_plugins: tuple[Path, ...]
    # Not the node's: written into the Redis image the node runs (images.py).
    redis_server: Path

    @classmethod
    def from_environment(cls, tools: KubeTools) -> NodeTools:
        kube_bin = tools.kube_apiserver.parent
        coredns_bin = cache_root() / f"coredns-{tools.versions['COREDNS_VERSION']}" / "bin"
        version = tools.versions["KUBERNETES_VERSION"]
        kubernetes_module = go_module_cache() / "k8s.io" / f"kubernetes@v{version}"

        def which(name: str) -> Path:
            found = shutil.which(name) or next(
                (f"{d}/{name}" for d in ("/usr/sbin", "/usr/bin", "/sbin") if Path(f"{d}/{name}").exists()),
                f"/usr/bin/{name}",
            )
            return Path(found)

        return cls(
            kubelet=kube_bin / "kubelet",
            kube_proxy=kube_bin / "kube-proxy",
            kubectl=kube_bin / "kubectl",
            coredns=coredns_bin / "coredns",
            coredns_version=tools.versions["COREDNS_VERSION"],
            dns_addon=kubernetes_module / "cluster" / "addons" / "dns" / "coredns" / "coredns.yaml.base",
            containerd=which("containerd"),
            containerd_shim=which("containerd-shim-runc-v2"),
            ctr=which("ctr"),
            runc=which("runc"),
            iptables=which("iptables"),
            cni_plugins=tuple(CNI_BIN_DIR / name for name in ("bridge", "host-local", "loopback")),
            redis_server=which("redis-server"),
        )

    def missing(self) -> list[str]:
        paths = [
            self.kubelet,
            self.kube_proxy,
            self.kubectl,
            self.coredns,
            self.containerd,
            self.containerd_shim,
            self.ctr,
            self.runc,
            self.iptables,
            *self.cni_plugins,
            self.redis_server,
        ]
        gone = [str(p) for p in paths if not (p.is_file() and os.access(p, os.X_OK))]
        return gone + ([] if self.dns_addon.is_file() else [str(self.dns_addon)])


def cgroup_root(run_id: str) -> str:
    return f"/agora-node-{run_id}"


def cgroup_hierarchies() -> list[Path]:
    """The mount points of every cgroup hierarchy (v1 controllers, named ones, v2)."""
    found: list[Path] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        separator = fields.index("-")
        if fields[separator + 1] in ("cgroup", "cgroup2"):
            found.append(Path(fields[4]))
    return sorted(set(found))


def make_cgroups(root: str) -> list[str]:
    """Creates the cgroup root in every hierarchy (the kubelet refuses a root that does not exist),
    with the parent's cpuset so that tasks may join it. Returns the folders made."""
    made: list[str] = []
    for hierarchy in cgroup_hierarchies():
        folder = hierarchy / root.lstrip("/")
        folder.mkdir(exist_ok=True)
        made.append(str(folder))
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (folder / name).exists() and not (folder / name).read_text().strip():
                (folder / name).write_text((hierarchy / name).read_text())
    return made


def remove_cgroups(root: str, timeout: float = 30) -> list[str]:
    """Removes the cgroup root and everything under it in every hierarchy, deepest first,
    retrying while the last processes are being reaped. Returns what could not be removed."""
    deadline = time.monotonic() + timeout
    while True:
        left: list[str] = []
        for hierarchy in cgroup_hierarchies():
            top = hierarchy / root.lstrip("/")
            if not top.is_dir():
                continue
            folders = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
            for folder in [*folders, top]:
                try:
                    folder.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    left.append(f"{folder}: {exc.strerror}")
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def host_paths_present() -> list[str]:
    return [path for path in HOST_PATHS if os.path.lexists(path)]


def _run(argv: list[str | Path], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(str(a) for a in argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def isolate_host_paths(folder: Path) -> Obj:
    """In this (private) mount namespace: folders of `folder` over PRIVATE_FOLDERS, and files with
    the kubelet's values over its kernel settings. Returns what was mounted."""
    mounts: Obj = {}
    for target in PRIVATE_FOLDERS:
        source = folder / "host" / target.strip("/").replace("/", "-")
        source.mkdir(parents=True, exist_ok=True)
        _run(["mount", "--bind", source, target])
        mounts[target] = str(source)
    settings = folder / "host" / "kernel-settings"
    settings.mkdir(parents=True, exist_ok=True)
    for name, value in KUBELET_KERNEL_SETTINGS.items():
        source = settings / name.replace("/", ".")
        source.write_text(value + "\n")
        _run(["mount", "--bind", source, f"/proc/sys/{name}"])
        mounts[f"/proc/sys/{name}"] = str(source)
    return mounts


# Machine-wide settings kube-proxy would change unless told not to (its conntrack settings).
KUBE_PROXY_KERNEL_SETTINGS = ("net/netfilter/nf_conntrack_max",)


def kernel_settings() -> dict[str, str]:
    """The machine-wide kernel settings the kubelet and kube-proxy may set (those that exist)."""
    names = [*KUBELET_KERNEL_SETTINGS, *KUBE_PROXY_KERNEL_SETTINGS]
    return {
        name: Path(f"/proc/sys/{name}").read_text().strip()
        for name in names
        if Path(f"/proc/sys/{name}").exists()
    }


@dataclass
class Node:
    """Node `index` of the namespace: node 0 at the defaults (NODE_NAME, NODE_IP, NODE_POD_CIDR,
    /run/containerd, /var/lib/kubelet, /var/log/pods); node N beside it with its own address,
    pod range and bridge, containerd socket and folders, kubelet folders and health port, and
    cgroup root (under node 0's, so one removal takes both). Two kubelets must not share a pod
    log folder: each removes the folders of pods it does not know."""

    plane: ControlPlane
    tools: NodeTools
    run_id: str
    sandbox_image: str
    index: int = 0
    processes: list[ManagedProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.suffix = suffix = f"-{self.index}" if self.index else ""
        self.name = f"agora-node-{self.index}"
        self.ip = str(ipaddress.ip_address(NODE_IP) + self.index)
        self.pod_cidr = str(ipaddress.ip_network(NODE_POD_CIDR).network_address + 256 * self.index) + "/24"
        self.bridge = BRIDGE.removesuffix("0") + str(self.index)
        self.socket = Path(f"/run/containerd{suffix}/containerd.sock")
        self.containerd_folders = (f"/var/lib/containerd{suffix}", f"/run/containerd{suffix}")
        self.kubelet_root = f"/var/lib/kubelet{suffix}"
        self.pod_logs = f"/var/log/pods{suffix}"
        self.healthz_port = KUBELET_HEALTHZ_PORT + 10 * self.index
        self.folder = self.plane.workdir / f"node{suffix}"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.logs = self.plane.logs / f"node{suffix}" if self.index else self.plane.logs
        self.logs.mkdir(parents=True, exist_ok=True)
        self.cgroup_root = cgroup_root(self.run_id) + (f"/node-{self.index}" if self.index else "")
        self.containerd: ManagedProcess | None = None
        self.kubelet: ManagedProcess | None = None
        self.kube_proxy: ManagedProcess | None = None

    # -- containerd ------------------------------------------------------------------------------

    def _containerd_config(self) -> Path:
        cni_conf = self.folder / "cni"
        cni_conf.mkdir(parents=True, exist_ok=True)
        network = {
            "cniVersion": "0.4.0",
            "name": self.name,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.pod_cidr}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                }
            ],
        }
        (cni_conf / f"10-{self.name}.conflist").write_text(json.dumps(network, indent=2))
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""version = 2
root = "{self.containerd_folders[0]}"
state = "{self.containerd_folders[1]}"
# The `opt` plugin would make /opt/containerd; the others need what this machine has not.
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = "{self.socket}"

[{cri}]
  sandbox_image = "{self.sandbox_image}"
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  # Without CAP_SYS_RESOURCE (this machine's bounding set lacks it) nothing may lower an
  # oom_score_adj, and runc would fail to give the sandbox the kubelet's -998: containers get
  # no lower a value than containerd's own instead.
  restrict_oom_score_adj = true
  # Pods may bind ports below 1024 without a capability (net.ipv4.ip_unprivileged_port_start=0
  # in each pod's own network namespace), as containerd 2 does by default: CoreDNS binds 53.
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        BinaryName = "{self.tools.runc}"
        SystemdCgroup = false
  [{cri}.cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{cni_conf}"
    max_conf_num = 1
"""
        path = self.folder / "containerd.toml"
        path.write_text(config)
        return path

    def start_containerd(self) -> None:
        started = time.monotonic()
        config = self._containerd_config()
        env = {**os.environ, "PATH": f"{self.tools.containerd_shim.parent}:{os.environ.get('PATH', '')}"}
        self.containerd = ManagedProcess(
            f"containerd{self.suffix}",
            [
                str(self.tools.containerd),
                "--config",
                str(config),
                "--log-level",
                os.environ.get("AGORA_CONTAINERD_LOG_LEVEL", "info"),
            ],
            self.logs / "containerd.log",
            env=env,
        )
        self.processes.append(self.containerd)
        self.containerd.start()
        self.containerd.wait_until(
            lambda: self.ctr_ok("version"), "containerd answering on its socket", timeout=60
        )
        self.plane.timings[f"containerd{self.suffix}"] = round(time.monotonic() - started, 1)

    def ctr(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return _run([self.tools.ctr, "--address", self.socket, "--namespace", "k8s.io", *args], timeout)

    def ctr_ok(self, *args: str) -> bool:
        try:
            self.ctr(*args, timeout=10)
            return True
        except (RuntimeError, subprocess.TimeoutExpired):
            return False

    def import_image(self, archive: Path) -> str:
        """Loads an OCI archive into the CRI's namespace; returns ctr's output."""
        return self.ctr("images", "import", str(archive)).stdout.strip()

    def images(self) -> list[str]:
        listed = self.ctr("images", "list", "--quiet").stdout.split()
        return sorted(name for name in listed if not name.startswith("sha256:"))

    def tasks_of_pods(self, name_prefix: str) -> list[str]:
        """The running tasks (container processes, pod sandboxes included) of the pods whose names
        start with name_prefix, as pod/container names."""
        found: list[str] = []
        for task in self.ctr("tasks", "list", "--quiet").stdout.split():
            with contextlib.suppress(RuntimeError):  # a task that ended meanwhile
                labels = json.loads(self.ctr("containers", "info", task).stdout).get("Labels") or {}
                pod = str(labels.get("io.kubernetes.pod.name", ""))
                if pod.startswith(name_prefix):
                    found.append(f"{pod}/{labels.get('io.kubernetes.container.name', 'sandbox')}")
        return sorted(found)

    # -- the kubelet -----------------------------------------------------------------------------

    def _kubelet_config(self) -> Path:
        config: Obj = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.ip,
            "port": KUBELET_PORT,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.healthz_port,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "podLogsDir": self.pod_logs,
            # This machine: cgroup v1 (hybrid), no systemd, swap allowed.
            "failCgroupV1": False,
            "failSwapOn": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "cgroupsPerQOS": True,
            # No node-allocatable cgroup to enforce (it would be made outside cgroupRoot's pods).
            "enforceNodeAllocatable": [],
            # Pods with dnsPolicy Default get an empty resolv.conf, not the host's.
            "resolvConf": "",
            "clusterDomain": CLUSTER_DOMAIN,
            "clusterDNS": [CLUSTER_DNS_IP],
            # A shared test machine's disk and memory are not this node's to guard: a nearly full
            # disk (under 1 % free on a large one) would taint the node with DiskPressure and
            # leave new pods Pending. "0%" turns a threshold off. The images cannot be pulled
            # again, so they are never collected either.
            "evictionHard": {
                "memory.available": "1Mi",
                "nodefs.available": "0%",
                "nodefs.inodesFree": "0%",
                "imagefs.available": "0%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            # The API server (inside this namespace only) calls the kubelet for logs and exec; the
            # kubelet's port listens on the node address only, which nothing outside can reach.
            "authentication": {
                "anonymous": {"enabled": True},
                "webhook": {"enabled": False},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "serializeImagePulls": False,
            "nodeStatusUpdateFrequency": "5s",
            "syncFrequency": "10s",
            "fileCheckFrequency": "5s",
            "staticPodPath": str(self.folder / "manifests"),
            "podPidsLimit": 1024,
            # Dapr's control plane (7 pods), the cluster DNS, the Agora chart (11 pods with
            # Jaeger, 21 with two replicas of each service), Redis, the test's own pods and
            # `helm test`'s, with room for a rolling update's surge.
            "maxPods": 80,
        }
        (self.folder / "manifests").mkdir(exist_ok=True)
        path = self.folder / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def start_kubelet(self) -> None:
        started = time.monotonic()
        assert self.plane.pki is not None
        add_address(self.ip)
        made = make_cgroups(self.cgroup_root)
        self.plane.timings["cgroups made"] = len(made)
        kubeconfig = write_kubeconfig(
            self.folder / "kubelet.kubeconfig",
            f"https://{APISERVER_IP}:443",
            self.plane.pki.ca_cert,
            self.plane.token,
            user="kubelet",
        )
        env = {**os.environ, "PATH": f"{self.tools.iptables.parent}:{os.environ.get('PATH', '')}"}
        self.kubelet = ManagedProcess(
            f"kubelet{self.suffix}",
            [
                str(self.tools.kubelet),
                f"--config={self._kubelet_config()}",
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.ip}",
                f"--root-dir={self.kubelet_root}",
                "--v=1",
            ],
            self.logs / "kubelet.log",
            env=env,
        )
        self.processes.append(self.kubelet)
        self.kubelet.start()
        self.kubelet.wait_until(self.ready, f"node {self.name} Ready and untainted", timeout=180)
        self.plane.timings[f"kubelet: node Ready{self.suffix}"] = round(time.monotonic() - started, 1)

    # -- kube-proxy ------------------------------------------------------------------------------

    def _kube_proxy_config(self, kubeconfig: Path) -> Path:
        config: Obj = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "mode": "iptables",
            "hostnameOverride": self.name,
            "healthzBindAddress": KUBE_PROXY_HEALTHZ,
            "metricsBindAddress": KUBE_PROXY_METRICS,
            "clusterCIDR": NODE_POD_CIDR,
            "nodePortAddresses": [f"{self.ip}/32"],
            # Every connection to a Service is masqueraded: a pod reaching a Service whose
            # endpoint is on the same bridge then gets the answer back through this namespace's
            # conntrack (no br_netfilter needed, a machine-wide module).
            "iptables": {"masqueradeAll": True, "syncPeriod": "10s", "minSyncPeriod": "0s"},
            # Zero leaves the conntrack table's size and timeouts as they are: nf_conntrack_max is
            # machine-wide, not the network namespace's.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
                "udpTimeout": "0s",
                "udpStreamTimeout": "0s",
            },
        }
        path = self.folder / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def start_kube_proxy(self) -> None:
        started = time.monotonic()
        env = {**os.environ, "PATH": f"{self.tools.iptables.parent}:{os.environ.get('PATH', '')}"}
        self.kube_proxy = ManagedProcess(
            "kube-proxy",
            [
                str(self.tools.kube_proxy),
                f"--config={self._kube_proxy_config(self.folder / 'kubelet.kubeconfig')}",
                "--v=1",
            ],
            self.logs / "kube-proxy.log",
            env=env,
        )
        self.processes.append(self.kube_proxy)
        self.kube_proxy.start()
        self.kube_proxy.wait_until(
            http_ok(f"http://{KUBE_PROXY_HEALTHZ}/healthz"), "kube-proxy healthy", timeout=60
        )
        self.plane.timings["kube-proxy"] = round(time.monotonic() - started, 1)

    def node(self) -> Obj:
        return self.plane.kube.get(f"/api/v1/nodes/{self.name}") or {}

    def ready(self) -> bool:
        found = self.node()
        conditions = found.get("status", {}).get("conditions") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        return ready and not found.get("spec", {}).get("taints")

    # -- stopping --------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stops kube-proxy and the kubelet, then every container containerd runs, then containerd. Whatever
        survives this dies with the PID namespace."""
        if self.kube_proxy is not None:
            self.kube_proxy.stop(timeout=10)
        if self.kubelet is not None:
            self.kubelet.stop(timeout=15)
        if self.containerd is not None and self.containerd.running():
            with contextlib.suppress(Exception):
                for line in self.ctr("tasks", "list", "--quiet", timeout=20).stdout.split():
                    with contextlib.suppress(Exception):
                        self.ctr("tasks", "kill", "--signal", "SIGKILL", line, timeout=10)
            self.containerd.stop(timeout=15)

    def log_tails(self, lines: int = 20) -> dict[str, str]:
        return {p.name: p.log_tail(lines) for p in self.processes}

    def running(self) -> list[str]:
        return [p.name for p in self.processes if p.running()]
