"""A real node on the loopback-only control plane: the kubelet, containerd, runc and CNI run a
Deployment's pod from an image built here, without a registry.

    unshare --net --mount --pid --fork --mount-proc -- \\
        .venv/bin/python -m tests.integration.kubernetes.node_scenario <workdir>

(AGORA_RUN_ID names the run's cgroups; AGORA_HOST_MOUNT_NAMESPACE is the inode of the mount
namespace it must not be in.) It builds deploy/kubernetes/testpod (a static Go program) into two
OCI archives (the pod sandbox's pause image and the test image), starts the control plane
(control_plane.py) and the node (node.py), runs the checks and writes
<workdir>/report.json; logs go to <workdir>/logs/. The Agora chart's checks are in
agora_on_node.py. Exit 0 when every check passed, 1 when one
failed, 2 when it could not run at all.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import socket
import struct
import subprocess
import sys
import time
import traceback
from pathlib import Path

import httpx
import yaml

from tests.integration.kubernetes.agora_on_node import CHECKS as AGORA_CHECKS
from tests.integration.kubernetes.agora_on_node import AgoraOnNode
from tests.integration.kubernetes.control_plane import (
    CLUSTER_DOMAIN,
    REPO,
    SERVICE_CIDR,
    ControlPlane,
    KubeError,
    KubeTools,
    Obj,
    interfaces,
    loopback_addresses,
)
from tests.integration.kubernetes.images import (
    DAPR_BINARIES,
    dapr_image_name,
    redis_container,
    write_coredns_image,
    write_dapr_image,
    write_redis_image,
)
from tests.integration.kubernetes.node import (
    BRIDGE,
    CLUSTER_DNS_IP,
    NODE_IP,
    NODE_NAME,
    NODE_POD_CIDR,
    Node,
    NodeTools,
    isolate_host_paths,
    kernel_settings,
)
from tests.integration.kubernetes.oci import ImageFile, write_image
from tests.integration.kubernetes.report import CheckFailed, Report, expect

PAUSE_IMAGE = "agora.local/pause:1"
TEST_IMAGE = "agora.local/testpod:1"
NAMESPACE = "default"
DEPLOYMENT = "testpod"
PORT = 8080
MEMORY_LIMIT = "64Mi"
CPU_LIMIT = "200m"
POD_USER = 10001

# The checks, in the order they run (test_kubernetes_node.py asserts each by these names).
IMAGES = "OCI archives written here are imported into containerd (no registry)"
NODE_READY = "the kubelet registers its node Ready with the control plane; kube-proxy is healthy"
POD_RUNNING = (
    "a Deployment's pod runs from the local image: Ready by its HTTP probe, on the bridge's pod CIDR, "
    "reachable from the namespace, with its limits and non-root user applied"
)
LOGS = "the API server serves the container's log from the kubelet"
LIVENESS = "a failing exec liveness probe makes the kubelet restart the container, which becomes Ready again"
SERVICE = (
    "kube-proxy's iptables rules take a Service's cluster IP to its pod, from the namespace and "
    "from another pod"
)
DNS = (
    "CoreDNS, built here and deployed by Kubernetes' own DNS addon manifest, resolves Service "
    "names: a pod reaches a Service by its short name"
)
DELETION = "deleting the Deployment removes its pod and stops every container process of it"
DAPRD = (
    "Dapr's daprd image, written from the cached build under the name Dapr's injector uses, runs on "
    "the node as uid 65532 and becomes Ready by daprd's own health endpoint"
)
REDIS = (
    "Debian's redis-server, written with its shared libraries into an image, runs on the node as "
    "uid 999 with a read-only root, Ready by a TCP probe, and answers commands at its pod address"
)
DAPR = (
    "Dapr's chart runs Dapr's control plane as pods on the node from images written here, each "
    "requesting CPU, and its injector gives an annotated pod a daprd that gets its identity from "
    "sentry and becomes Ready"
)
PROCESSES = "the control plane and node processes stayed up"
CHECKS = (
    IMAGES,
    NODE_READY,
    POD_RUNNING,
    LOGS,
    LIVENESS,
    SERVICE,
    DNS,
    DELETION,
    DAPRD,
    REDIS,
    DAPR,
    *AGORA_CHECKS,
    PROCESSES,
)
DAPR_APP_ID = "node-app"
# Dapr's chart on one node: one replica of each but the scheduler (its chart always runs three),
# the scheduler's data in memory (no volumes).
#
# Every control-plane pod requests some CPU, as Dapr's production guidelines say. Without
# requests they are BestEffort, and the kubelet gives the BestEffort cgroup the smallest CPU
# weight there is: while the release's pods (which request CPU) are busy, as the ten of a
# `helm upgrade` starting at once are, the control plane gets almost nothing. On a busy node that
# lasted past its liveness probes: the kubelet restarted the three schedulers and placement
# timed out its dissemination rounds, and with Dapr 1.18.2's scheduler (which loses track of a
# namespace's connected sidecars under such churn) no reminder or workflow of the release ran
# again. The requests are small (they only need to exist to weigh as much as a release's pod).
_CONTROL_PLANE_REQUESTS: Obj = {"resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}
DAPR_CHART_VALUES: Obj = {
    "global": {"ha": {"enabled": False}},
    "dapr_scheduler": {"cluster": {"inMemoryStorage": True}, **_CONTROL_PLANE_REQUESTS},
    "dapr_placement": _CONTROL_PLANE_REQUESTS,
    "dapr_operator": _CONTROL_PLANE_REQUESTS,
    "dapr_sentry": _CONTROL_PLANE_REQUESTS,
    # The injector's webhook fails closed, as docs/kubernetes.md recommends: with Dapr's default
    # (Ignore) a pod created while the injector is slow to answer (ten pods of a rolling upgrade
    # at once did it here) starts without daprd and never becomes Ready. Failing, its creation is
    # retried by its ReplicaSet. Dapr's and the cluster's own namespaces are left out, so the
    # injector itself can always start.
    "dapr_sidecar_injector": {
        **_CONTROL_PLANE_REQUESTS,
        "webhookFailurePolicy": "Fail",
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["dapr-system", "kube-system"],
                }
            ]
        },
    },
}
DAPRD_APP_ID = "node-check"
# daprd alone: no placement, scheduler or sentry; the HTTP API on 3500, health on 3501 as injected.
DAPRD_ARGS = [
    "--app-id", DAPRD_APP_ID, "--mode", "standalone",
    "--dapr-http-port", "3500", "--dapr-grpc-port", "50001", "--dapr-public-port", "3501",
    "--enable-metrics=false", "--placement-host-address", "", "--scheduler-host-address", "",
    "--log-as-json",
]  # fmt: skip

NOT_COVERED = [
    "Cluster DNS answers for the cluster's names only: nothing outside the namespace is asked.",
    "One node; the kubelet authenticates with the admin token and serves the API server "
    "anonymously (AlwaysAllow), instead of node credentials and webhook authorization.",
    "Nothing crosses a node, no drain tests a PodDisruptionBudget, and the autoscalers, the "
    "Ingress, network policies and agent apps do not run on the node.",
    "Images are imported into containerd, never pulled; Redis is one pod of Debian's "
    "redis-server, Dapr's scheduler keeps its data in memory, and the model backend is offline.",
]
DEVIATIONS = [
    "The node's address is a /32 on the namespace's lo (no dummy link type on this kernel).",
    "The namespace has no default route: the Service range is routed to the pods' bridge so that "
    "packets it sends to a cluster IP reach kube-proxy's DNAT; kube-proxy masquerades every "
    "Service connection (masqueradeAll) and leaves the machine-wide conntrack settings alone.",
    "The kubelet and containerd see private /run, /var/lib and /var/log, and files holding the "
    "values the kubelet wants over its machine-wide kernel settings (node.py).",
    "Pods' cgroups are under a cgroup root named after the run, not at the top of each hierarchy.",
    "containerd restricts pods' OOM score adjustment to its own (this machine's processes lack "
    "CAP_SYS_RESOURCE, so runc could not give the pod sandbox the kubelet's -998) and lets pods "
    "bind ports below 1024 (CoreDNS's published binary has a file capability for that instead).",
    "The images hold the program and what it loads, not a distroless or Debian base; Dapr's and "
    "CoreDNS's carry the names upstream publishes them under, and nothing is pulled.",
    "The DNS addon's Corefile is applied without its forward block (nothing to forward to).",
]


def build_testpod(workdir: Path) -> Path:
    """The static test program (pure Go, no cgo), built from this repository's sources."""
    binary = workdir / "images" / "testpod"
    binary.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}
    done = subprocess.run(
        ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(binary), "./testpod"],
        cwd=REPO / "deploy" / "kubernetes",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"go build ./testpod: {done.stderr.strip()}")
    return binary


def in_cidr(ip: str, cidr: str) -> bool:
    try:
        return ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)
    except ValueError:
        return False


class NodeScenario:
    def __init__(
        self, plane: ControlPlane, node: Node, report: Report, binary: Path, second_node: Node
    ) -> None:
        self.plane = plane
        self.node = node
        self.second_node = second_node
        self.kube = plane.kube
        self.report = report
        self.binary = binary
        self.archives: dict[str, Path] = {}
        self.written: list[Obj] = []
        self.pod_name = ""
        self.cluster_ip = ""

    # -- helpers -----------------------------------------------------------------------------

    def pods(self) -> list[Obj]:
        return self.kube.items(f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector=f"app={DEPLOYMENT}")

    def ready_pod(self, timeout: float, not_named: str = "") -> Obj:
        def ready() -> Obj | None:
            for pod in self.pods():
                status = pod.get("status", {})
                conditions = status.get("conditions") or []
                if (
                    "deletionTimestamp" not in pod["metadata"]
                    and pod["metadata"]["name"] != not_named
                    and any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
                ):
                    return pod
            return None

        try:
            found: Obj = self.kube.wait_for("a Ready testpod pod", ready, timeout)
        except KubeError as exc:
            raise CheckFailed(f"{exc}; pods: {[self._summary(p) for p in self.pods()]}") from exc
        return found

    @staticmethod
    def _summary(pod: Obj) -> Obj:
        status = pod.get("status", {})
        return {
            "name": pod["metadata"]["name"],
            "phase": status.get("phase"),
            "conditions": {c["type"]: c["status"] for c in status.get("conditions") or []},
            "containers": [
                {"name": c["name"], "state": c.get("state"), "restarts": c.get("restartCount")}
                for c in status.get("containerStatuses") or []
            ],
        }

    def events(self, pod: str) -> list[str]:
        items = self.kube.items(
            f"/api/v1/namespaces/{NAMESPACE}/events", fieldSelector=f"involvedObject.name={pod}"
        )
        return [f"{e.get('reason')}: {e.get('message', '')[:200]}" for e in items]

    # -- the checks --------------------------------------------------------------------------

    def images(self) -> Obj:
        outputs = {name: self.node.import_image(path) for name, path in self.archives.items()}
        listed = self.node.images()
        expect(
            all(name in listed for name in self.archives),
            f"ctr lists {listed}, not all of {sorted(self.archives)}",
        )
        return {"written": self.written, "ctr_import": outputs, "ctr_images": listed}

    def node_ready(self) -> Obj:
        self.node.start_kubelet()
        self.node.start_kube_proxy()
        found = self.node.node()
        info = found["status"]["nodeInfo"]
        addresses = {a["type"]: a["address"] for a in found["status"].get("addresses", [])}
        expect(addresses.get("InternalIP") == NODE_IP, f"node addresses {addresses}")
        return {
            "node": NODE_NAME,
            "kubelet_version": info.get("kubeletVersion"),
            "container_runtime": info.get("containerRuntimeVersion"),
            "kernel": info.get("kernelVersion"),
            "addresses": addresses,
            "conditions": {c["type"]: c["status"] for c in found["status"].get("conditions", [])},
            "allocatable": found["status"].get("allocatable"),
            "taints": found.get("spec", {}).get("taints"),
        }

    def deployment(self) -> Obj:
        probe_url = f"http://127.0.0.1:{PORT}/healthz"
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": DEPLOYMENT}},
                "template": {
                    "metadata": {"labels": {"app": DEPLOYMENT}},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
                        "enableServiceLinks": False,
                        # No cluster DNS yet (the kubelet would warn and fall back to this).
                        "dnsPolicy": "Default",
                        "automountServiceAccountToken": False,
                        "terminationGracePeriodSeconds": 10,
                        "securityContext": {
                            "runAsUser": POD_USER,
                            "runAsGroup": POD_USER,
                            "runAsNonRoot": True,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "testpod",
                                "image": TEST_IMAGE,
                                "imagePullPolicy": "Never",
                                "args": ["serve", "-port", str(PORT)],
                                "env": [
                                    {
                                        "name": "POD_NAME",
                                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                    }
                                ],
                                "ports": [{"name": "http", "containerPort": PORT}],
                                "resources": {
                                    "requests": {"cpu": "50m", "memory": "16Mi"},
                                    "limits": {"cpu": CPU_LIMIT, "memory": MEMORY_LIMIT},
                                },
                                "readinessProbe": {
                                    "httpGet": {"path": "/healthz", "port": PORT},
                                    "periodSeconds": 2,
                                    "failureThreshold": 1,
                                },
                                "livenessProbe": {
                                    "exec": {"command": ["/testpod", "probe", probe_url]},
                                    "periodSeconds": 2,
                                    "timeoutSeconds": 2,
                                    "failureThreshold": 2,
                                },
                                "securityContext": {
                                    "readOnlyRootFilesystem": True,
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                            }
                        ],
                    },
                },
            },
        }

    def info(self, ip: str) -> Obj:
        answer = httpx.get(f"http://{ip}:{PORT}/info", timeout=5)
        answer.raise_for_status()
        found: Obj = answer.json()
        return found

    def pod_running(self) -> Obj:
        started = time.monotonic()
        self.kube.call("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", body=self.deployment())
        pod = self.ready_pod(timeout=180)
        self.pod_name = pod["metadata"]["name"]
        ip = pod["status"]["podIP"]
        expect(in_cidr(ip, NODE_POD_CIDR), f"pod IP {ip} is not in {NODE_POD_CIDR}")
        expect(pod["spec"]["nodeName"] == NODE_NAME, f"scheduled to {pod['spec']['nodeName']}")
        info = self.info(ip)
        expect(info["hostname"] == self.pod_name, f"the pod answered as {info['hostname']}")
        expect(info["env_pod_name"] == self.pod_name, f"POD_NAME={info['env_pod_name']}")
        expect(info["uid"] == POD_USER, f"runs as uid {info['uid']}")
        expect(info["memory_limit"] == str(64 * 1024 * 1024), f"memory limit {info['memory_limit']}")
        expect(
            info["cpu_quota"] == "20000" and info["cpu_period"] == "100000",
            f"CPU quota {info['cpu_quota']} per {info['cpu_period']} us (200m is 20000 per 100000)",
        )
        status = pod["status"]["containerStatuses"][0]
        return {
            "pod": self.pod_name,
            "pod_ip": ip,
            "node": pod["spec"]["nodeName"],
            "image": status.get("image"),
            "image_id": status.get("imageID"),
            "container_id": status.get("containerID"),
            "seconds_to_ready": round(time.monotonic() - started, 1),
            "answered_from_the_namespace": info,
        }

    def logs(self) -> Obj:
        text = self.kube.http.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{self.pod_name}/log").text
        expect(f"testpod serving on :{PORT} as {self.pod_name}" in text, f"the log reads {text[:500]!r}")
        return {"log": text.strip().splitlines()[:5]}

    def liveness(self) -> Obj:
        pod = self.ready_pod(timeout=30)
        ip = pod["status"]["podIP"]
        before = int(pod["status"]["containerStatuses"][0].get("restartCount", 0))
        httpx.post(f"http://{ip}:{PORT}/fail", timeout=5).raise_for_status()

        def restarted() -> Obj | None:
            found = self.kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{self.pod_name}") or {}
            statuses = found.get("status", {}).get("containerStatuses") or [{}]
            return found if int(statuses[0].get("restartCount", 0)) > before else None

        try:
            after = self.kube.wait_for("the container restarted", restarted, timeout=90)
        except KubeError as exc:
            raise CheckFailed(f"{exc}; events: {self.events(self.pod_name)}") from exc
        again = self.ready_pod(timeout=60)
        expect(again["metadata"]["name"] == self.pod_name, "the pod was replaced, not its container")
        healthy = httpx.get(f"http://{again['status']['podIP']}:{PORT}/healthz", timeout=5)
        expect(healthy.status_code == 200, f"after the restart /healthz answers {healthy.status_code}")
        events = self.events(self.pod_name)
        expect(any("Liveness probe failed" in e for e in events), f"events: {events}")
        last = after["status"]["containerStatuses"][0].get("lastState", {})
        return {
            "restart_count": after["status"]["containerStatuses"][0]["restartCount"],
            "last_state": last,
            "events": events,
        }

    def service(self) -> Obj:
        path = f"/api/v1/namespaces/{NAMESPACE}/services"
        created = self.kube.call(
            "POST",
            path,
            body={
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE},
                "spec": {"selector": {"app": DEPLOYMENT}, "ports": [{"port": 80, "targetPort": PORT}]},
            },
        )
        cluster_ip = created["spec"]["clusterIP"]
        # The namespace has no default route: without a route to the Service range, a packet this
        # namespace sends to a cluster IP would be refused before kube-proxy's DNAT rewrote it.
        route = ["ip", "route", "replace", SERVICE_CIDR, "dev", BRIDGE]
        subprocess.run(route, check=True, timeout=10, capture_output=True)

        def answered() -> Obj | None:
            try:
                found: Obj = httpx.get(f"http://{cluster_ip}/info", timeout=2).json()
            except (httpx.HTTPError, ValueError):
                return None
            return found

        info = self.kube.wait_for(f"an answer at {cluster_ip}:80", answered, timeout=60)
        expect(info["hostname"] == self.pod_name, f"{cluster_ip} answered as {info['hostname']}")
        client = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "service-client", "namespace": NAMESPACE},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
                "restartPolicy": "Never",
                "dnsPolicy": "Default",
                "enableServiceLinks": False,
                "automountServiceAccountToken": False,
                "securityContext": {"runAsUser": POD_USER, "runAsNonRoot": True},
                "containers": [
                    {
                        "name": "probe",
                        "image": TEST_IMAGE,
                        "imagePullPolicy": "Never",
                        "args": ["probe", f"http://{cluster_ip}/healthz"],
                    }
                ],
            },
        }
        pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
        self.kube.call("POST", pods, body=client)

        def finished() -> str | None:
            phase = str((self.kube.get(f"{pods}/service-client") or {}).get("status", {}).get("phase", ""))
            return phase if phase in ("Succeeded", "Failed") else None

        phase = self.kube.wait_for("the client pod finished", finished, timeout=90)
        log = self.kube.http.get(f"{pods}/service-client/log").text
        expect(phase == "Succeeded", f"the client pod {phase}: {log[:500]}")
        self.delete_pod("service-client")
        rules = subprocess.run(
            ["iptables-save", "-t", "nat"], check=True, timeout=20, capture_output=True, text=True
        ).stdout
        service_rules = [line for line in rules.splitlines() if cluster_ip in line]
        expect(service_rules, f"no nat rule mentions {cluster_ip}")
        self.cluster_ip = cluster_ip
        return {
            "cluster_ip": cluster_ip,
            "answered_from_the_namespace_as": info["hostname"],
            "client_pod": phase,
            "route": " ".join(route),
            "nat_rules": service_rules[:6],
        }

    def dns_objects(self) -> list[Obj]:
        """Kubernetes' CoreDNS addon for this cluster. Its Corefile forwards other names to the
        pod's resolv.conf, which is empty here (nothing outside the namespace to ask): that
        block is left out."""
        text = self.node.tools.dns_addon.read_text()
        for key, value in (
            ("__DNS__DOMAIN__", CLUSTER_DOMAIN),
            ("__DNS__SERVER__", CLUSTER_DNS_IP),
            ("__DNS__MEMORY__LIMIT__", "170Mi"),
        ):
            text = text.replace(key, value)
        text, forwards = re.subn(r"\n\s*forward \. /etc/resolv\.conf \{[^}]*\}", "", text)
        expect(forwards == 1, "the addon's Corefile has no `forward . /etc/resolv.conf` block to leave out")
        return [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]

    def pod_runs_to_completion(self, name: str, args: list[str], dns_policy: str) -> tuple[str, str]:
        pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
        client = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
                "restartPolicy": "Never",
                "dnsPolicy": dns_policy,
                "enableServiceLinks": False,
                "automountServiceAccountToken": False,
                "securityContext": {"runAsUser": POD_USER, "runAsNonRoot": True},
                "containers": [
                    {"name": "probe", "image": TEST_IMAGE, "imagePullPolicy": "Never", "args": args}
                ],
            },
        }
        self.kube.call("POST", pods, body=client)

        def finished() -> str | None:
            phase = str((self.kube.get(f"{pods}/{name}") or {}).get("status", {}).get("phase", ""))
            return phase if phase in ("Succeeded", "Failed") else None

        phase: str = self.kube.wait_for(f"the {name} pod finished", finished, timeout=90)
        log = self.kube.http.get(f"{pods}/{name}/log").text
        self.delete_pod(name)
        return phase, log

    def dns(self) -> Obj:
        started = time.monotonic()
        tools = self.node.tools
        written = write_coredns_image(self.plane.workdir / "images", tools.coredns, tools.coredns_version)
        imported = self.node.import_image(written.archive)
        written.archive.unlink()
        objects = self.dns_objects()
        deployments = [o for o in objects if o["kind"] == "Deployment"]
        containers = [c for o in deployments for c in o["spec"]["template"]["spec"]["containers"]]
        addon_images = [c["image"] for c in containers]
        expect(
            [image.rsplit(":", 1)[0] for image in addon_images] == [written.name.rsplit(":", 1)[0]],
            f"the addon runs {addon_images}, the image written here is {written.name}",
        )
        # The addon names kubeadm's CoreDNS (1.12.1 for Kubernetes 1.34); the one built here is
        # newer (deploy/versions.env says why), as a cluster pins its own registry's tag.
        for container in containers:
            container["image"] = written.name
        for obj in objects:
            self.kube.call("POST", self.kube.collection_of(obj), body=obj)
        coredns = self.plane.running_pod("kube-system", "k8s-app=kube-dns", timeout=120)
        service = self.kube.get("/api/v1/namespaces/kube-system/services/kube-dns") or {}
        expect(service.get("spec", {}).get("clusterIP") == CLUSTER_DNS_IP, f"kube-dns: {service.get('spec')}")
        name = f"{DEPLOYMENT}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}"

        def resolved() -> list[str] | None:
            # Until kube-proxy has the Ready endpoint, its rules refuse the packet (EPERM).
            try:
                return resolve(name, CLUSTER_DNS_IP, timeout=2)
            except (OSError, CheckFailed):
                return None

        answer: list[str] = self.kube.wait_for(f"{name} resolved by {CLUSTER_DNS_IP}", resolved, timeout=60)
        expect(
            answer == [self.cluster_ip],
            f"{DEPLOYMENT}.{NAMESPACE}.svc resolved to {answer}, not {self.cluster_ip}",
        )
        phase, log = self.pod_runs_to_completion(
            "dns-client", ["probe", f"http://{DEPLOYMENT}/healthz"], "ClusterFirst"
        )
        expect(phase == "Succeeded", f"the client pod {phase}: {log[:500]}")
        return {
            "image": written.describe(),
            "addon_image": addon_images[0],
            "ctr_import": imported,
            "coredns_pod": coredns["metadata"]["name"],
            "objects": [f"{o['kind']} {o['metadata']['name']}" for o in objects],
            "resolved_from_the_namespace": answer,
            "client_pod": f"{phase}: http://{DEPLOYMENT}/healthz",
            "seconds": round(time.monotonic() - started, 1),
        }

    def deletion(self) -> Obj:
        self.kube.call("DELETE", f"/api/v1/namespaces/{NAMESPACE}/services/{DEPLOYMENT}", ok=(200, 202, 404))
        self.kube.call("DELETE", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{DEPLOYMENT}")
        self.kube.wait_for("the testpod pods gone", lambda: not self.pods(), timeout=90)

        # A task is a container's running process; the stopped containers' records stay until
        # the kubelet's garbage collection (every minute) removes them.
        self.kube.wait_for(
            "no container process of the Deployment's pods left in containerd",
            lambda: not self.node.tasks_of_pods(f"{DEPLOYMENT}-"),
            timeout=90,
        )
        return {"tasks_of_the_pods": [], "tasks_left_of_other_pods": self.node.tasks_of_pods("")}

    def daprd_pod(self) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "daprd", "namespace": NAMESPACE, "labels": {"app": "daprd"}},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
                "enableServiceLinks": False,
                "automountServiceAccountToken": False,
                "dnsPolicy": "Default",
                "terminationGracePeriodSeconds": 10,
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [
                    {
                        "name": "daprd",
                        "image": dapr_image_name("daprd"),
                        # As Dapr's injector sets it: the imported image is found, nothing is pulled.
                        "imagePullPolicy": "IfNotPresent",
                        "args": DAPRD_ARGS,
                        "ports": [{"name": "dapr-http", "containerPort": 3500}],
                        # The probes Dapr's injector gives its sidecars.
                        "readinessProbe": {
                            "httpGet": {"path": "/v1.0/healthz", "port": 3501},
                            "periodSeconds": 2,
                        },
                        "livenessProbe": {
                            "httpGet": {"path": "/v1.0/healthz", "port": 3501},
                            "periodSeconds": 5,
                        },
                        "resources": {"limits": {"cpu": "1", "memory": "256Mi"}},
                        "securityContext": {
                            "runAsNonRoot": True,
                            "readOnlyRootFilesystem": True,
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
            },
        }

    def daprd(self) -> Obj:
        started = time.monotonic()
        image_dir = self.plane.workdir / "images"
        written = write_dapr_image("daprd", image_dir)
        imported = self.node.import_image(written.archive)
        written.archive.unlink()  # containerd holds its own copy
        self.kube.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=self.daprd_pod())
        pod = self.wait_pod_ready("daprd", timeout=120)
        ip = pod["status"]["podIP"]
        metadata = httpx.get(f"http://{ip}:3500/v1.0/metadata", timeout=5).json()
        version = self.plane.tools.versions["DAPR_VERSION"]
        expect(metadata.get("id") == DAPRD_APP_ID, f"daprd's metadata: {metadata}")
        expect(metadata.get("runtimeVersion") == version, f"daprd runs {metadata.get('runtimeVersion')}")
        status = pod["status"]["containerStatuses"][0]
        uid_line = self.container_uid(pod)
        expect(uid_line.split()[1] == "65532", f"daprd's process: {uid_line}")
        seconds = round(time.monotonic() - started, 1)
        self.delete_pod("daprd")
        return {
            "image": written.describe(),
            "ctr_import": imported,
            "pod_ip": ip,
            "image_id": status.get("imageID"),
            "process_uid": uid_line,
            "metadata": {k: metadata.get(k) for k in ("id", "runtimeVersion", "enabledFeatures")},
            "seconds_to_ready": seconds,
        }

    def redis_pod(self, image: str) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "redis", "namespace": NAMESPACE, "labels": {"app": "redis"}},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
                "enableServiceLinks": False,
                "automountServiceAccountToken": False,
                "dnsPolicy": "Default",
                "terminationGracePeriodSeconds": 10,
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 999},
                "containers": [
                    redis_container(
                        image,
                        [
                            "--port",
                            "6379",
                            "--save",
                            "",
                            "--appendonly",
                            "no",
                            "--protected-mode",
                            "no",
                            "--dir",
                            "/data",
                        ],
                        {"limits": {"cpu": "500m", "memory": "128Mi"}},
                    )
                ],
                "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "64Mi"}}],
            },
        }

    def container_uid(self, pod: Obj) -> str:
        """The Uid line of the container's process (containerd runs in this PID namespace)."""
        container_id = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
        tasks = dict(
            line.split()[:2]
            for line in self.node.ctr("tasks", "list").stdout.splitlines()[1:]
            if line.strip()
        )
        status = Path(f"/proc/{tasks[container_id]}/status").read_text()
        return next(line for line in status.splitlines() if line.startswith("Uid:"))

    def wait_pod_ready(self, name: str, timeout: float) -> Obj:
        path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}"

        def ready() -> Obj | None:
            pod = self.kube.get(path) or {}
            conditions = pod.get("status", {}).get("conditions") or []
            return pod if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else None

        try:
            found: Obj = self.kube.wait_for(f"the {name} pod Ready", ready, timeout=timeout)
        except KubeError as exc:
            pod = self.kube.get(path) or {}
            summary = self._summary(pod) if pod else "no pod"
            raise CheckFailed(f"{exc}; {summary}; events: {self.events(name)}") from exc
        return found

    def delete_pod(self, name: str) -> None:
        path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}"
        self.kube.call("DELETE", path)
        self.kube.wait_for(f"the {name} pod gone", lambda: self.kube.get(path) is None, timeout=60)

    def redis(self) -> Obj:
        started = time.monotonic()
        written = write_redis_image(self.plane.workdir / "images")
        imported = self.node.import_image(written.archive)
        written.archive.unlink()
        self.kube.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=self.redis_pod(written.name))
        pod = self.wait_pod_ready("redis", timeout=120)
        ip = pod["status"]["podIP"]
        with socket.create_connection((ip, 6379), timeout=5) as conn:
            answers = []
            for command in (b"PING\r\n", b"SET node-check ok\r\n", b"GET node-check\r\n"):
                conn.sendall(command)
                answers.append(conn.recv(1024).decode())
        expect(answers == ["+PONG\r\n", "+OK\r\n", "$2\r\nok\r\n"], f"Redis answered {answers}")
        uid = self.container_uid(pod)
        expect(uid.split()[1] == "999", f"redis-server's process: {uid}")
        seconds = round(time.monotonic() - started, 1)
        self.delete_pod("redis")
        return {
            "image": written.describe(),
            "ctr_import": imported,
            "pod_ip": ip,
            "answers": answers,
            "process_uid": uid,
            "seconds_to_ready": seconds,
        }

    def dapr(self) -> Obj:
        started = time.monotonic()
        images = self.plane.workdir / "images"
        written = []
        for binary in DAPR_BINARIES:
            if binary == "daprd":
                continue  # imported by the daprd check
            image = write_dapr_image(binary, images)
            self.node.import_image(image.archive)
            image.archive.unlink()
            written.append(image.name)
        values = json.loads(json.dumps(DAPR_CHART_VALUES))
        values["global"]["tag"] = self.plane.tools.versions["DAPR_VERSION"]
        values_file = self.plane.workdir / "dapr-node-values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        done = self.plane.helm(
            "install",
            "dapr",
            str(self.plane.tools.dapr_chart),
            "--namespace",
            "dapr-system",
            "--create-namespace",
            "--values",
            str(values_file),
            "--wait",
            "--timeout",
            "5m",
        )
        if done.returncode != 0:
            pods = self.kube.items("/api/v1/namespaces/dapr-system/pods")
            raise CheckFailed(
                f"helm install dapr: {done.stderr.strip()[-1500:]}; pods: {[self._summary(p) for p in pods]}"
            )
        control_plane_pods = self.kube.items("/api/v1/namespaces/dapr-system/pods")
        control_plane = {p["metadata"]["name"]: p["status"]["podIP"] for p in control_plane_pods}
        best_effort = [
            p["metadata"]["name"] for p in control_plane_pods if p["status"].get("qosClass") == "BestEffort"
        ]
        expect(not best_effort, f"control-plane pods without CPU requests (BestEffort): {best_effort}")
        installed = round(time.monotonic() - started, 1)
        app = self.deployment()
        app["metadata"]["name"] = "dapr-app"
        template = app["spec"]["template"]
        app["spec"]["selector"]["matchLabels"] = {"app": "dapr-app"}
        # daprd finds sentry, placement and the scheduler by their Service names.
        template["spec"]["dnsPolicy"] = "ClusterFirst"
        template["metadata"] = {
            "labels": {"app": "dapr-app"},
            "annotations": {
                "dapr.io/enabled": "true",
                "dapr.io/app-id": DAPR_APP_ID,
                "dapr.io/app-port": str(PORT),
                "dapr.io/log-as-json": "true",
                # As the chart's pods: no Kubernetes API token in the pod, so no built-in
                # Kubernetes secret store (it would need one).
                "dapr.io/disable-builtin-k8s-secret-store": "true",
            },
        }
        self.kube.call("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", body=app)
        path = f"/api/v1/namespaces/{NAMESPACE}/pods"

        def ready() -> Obj | None:
            for pod in self.kube.items(path, labelSelector="app=dapr-app"):
                conditions = pod.get("status", {}).get("conditions") or []
                if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                    return pod
            return None

        try:
            pod: Obj = self.kube.wait_for("the Dapr app's pod Ready", ready, timeout=120)
        except KubeError as exc:
            pods = self.kube.items(path, labelSelector="app=dapr-app")
            logs = {
                p["metadata"]["name"]: self.kube.http.get(
                    f"{path}/{p['metadata']['name']}/log", params={"container": "daprd"}
                ).text[-1500:]
                for p in pods
            }
            raise CheckFailed(f"{exc}; {[self._summary(p) for p in pods]}; daprd logs: {logs}") from exc
        containers = [c["name"] for c in pod["spec"]["containers"]]
        expect("daprd" in containers, f"containers: {containers}")
        daprd = next(c for c in pod["spec"]["containers"] if c["name"] == "daprd")
        log = self.kube.http.get(f"{path}/{pod['metadata']['name']}/log", params={"container": "daprd"}).text
        identity = []
        for line in log.splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if "security" in str(entry.get("scope", "")):
                    identity.append(str(entry.get("msg", ""))[:200])
        expect(
            any("identity" in message.lower() for message in identity),
            f"daprd's security log says nothing of its identity: {identity}",
        )
        healthz = httpx.get(f"http://{pod['status']['podIP']}:3501/v1.0/healthz", timeout=5).status_code
        expect(healthz == 204, f"daprd's /v1.0/healthz answered {healthz}")
        return {
            "images": written,
            "control_plane_pods": control_plane,
            "helm_install_seconds": installed,
            "app_pod": pod["metadata"]["name"],
            "containers": containers,
            "daprd_image": daprd["image"],
            "daprd_identity_log": identity[:8],
            "seconds": round(time.monotonic() - started, 1),
        }

    def processes(self) -> Obj:
        nodes = (self.node, self.second_node)
        dead = self.plane.stopped() + [p.name for node in nodes for p in node.processes if not p.running()]
        expect(not dead, f"stopped: {dead}")
        running = [p.name for p in self.plane.processes] + [n for node in nodes for n in node.running()]
        return {"running": running}

    def run(self) -> None:
        for name, check, needs in (
            (IMAGES, self.images, ()),
            (NODE_READY, self.node_ready, (IMAGES,)),
            (POD_RUNNING, self.pod_running, (NODE_READY,)),
            (LOGS, self.logs, (POD_RUNNING,)),
            (LIVENESS, self.liveness, (POD_RUNNING,)),
            (SERVICE, self.service, (POD_RUNNING,)),
            (DNS, self.dns, (SERVICE,)),
            (DELETION, self.deletion, (POD_RUNNING,)),
            (DAPRD, self.daprd, (NODE_READY,)),
            (REDIS, self.redis, (NODE_READY,)),
            (DAPR, self.dapr, (DAPRD, DNS)),
        ):
            self.report.run(name, check, needs=needs)
        AgoraOnNode(self.plane, self.node, self.report, self.second_node).run(needs=(DAPR, REDIS))
        self.report.run(PROCESSES, self.processes)


def resolve(name: str, server: str, timeout: float = 5) -> list[str]:
    """The A records a DNS server gives for a name (one UDP query, no recursion wanted)."""
    query_id = secrets.randbelow(1 << 16)
    question = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
    packet = struct.pack("!HHHHHH", query_id, 0x0100, 1, 0, 0, 0) + question + struct.pack("!HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.sendto(packet, (server, 53))
        reply = sock.recv(4096)
    answer_id, flags, _, answers, _, _ = struct.unpack("!HHHHHH", reply[:12])
    if answer_id != query_id or flags & 0x000F:
        raise CheckFailed(f"{server} answered {name} with rcode {flags & 0x000F}")
    offset = 12 + len(question) + 4
    found: list[str] = []
    for _ in range(answers):
        offset += 2 if reply[offset] & 0xC0 == 0xC0 else len(question)  # the name (a pointer here)
        kind, _, _, length = struct.unpack("!HHIH", reply[offset : offset + 10])
        offset += 10
        if kind == 1 and length == 4:
            found.append(".".join(str(b) for b in reply[offset : offset + 4]))
        offset += length
    return found


def refuse_to_run_outside_namespaces() -> None:
    """The node writes host paths and leaves processes unless it runs in namespaces of its own."""
    if os.getpid() != 1:
        raise RuntimeError("run in a PID namespace of its own, as its PID 1 (unshare --pid --fork)")
    host = os.environ.get("AGORA_HOST_MOUNT_NAMESPACE", "")
    here = str(os.stat("/proc/self/ns/mnt").st_ino)
    if not host or host == here:
        raise RuntimeError(
            "run in a mount namespace of its own (unshare --mount) and pass the host's mount "
            "namespace inode in AGORA_HOST_MOUNT_NAMESPACE"
        )


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    workdir = Path(argv[1]).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    report = Report(workdir / "report.json", not_covered=NOT_COVERED, deviations=DEVIATIONS)
    tools = KubeTools.from_environment()
    node_tools = NodeTools.from_environment(tools)
    missing = tools.missing() + node_tools.missing()
    report.extra["versions"] = {k: v for k, v in tools.versions.items() if k.endswith("_VERSION")}
    if missing:
        report.extra["error"] = f"missing (`make kube-node` builds and installs them): {missing}"
        report.write()
        return 2
    plane = ControlPlane(
        workdir,
        tools,
        # The kubelet's name is no DNS name here: the API server calls it at its node address.
        apiserver_args=["--kubelet-preferred-address-types=InternalIP"],
    )
    node: Node | None = None
    second: Node | None = None
    code = 1
    try:
        refuse_to_run_outside_namespaces()
        report.extra["kernel_settings_seen_by_the_host"] = kernel_settings()
        report.extra["private_mounts"] = isolate_host_paths(workdir / "node")
        started = time.monotonic()
        binary = build_testpod(workdir)
        plane.timings["go build testpod"] = round(time.monotonic() - started, 1)
        images = workdir / "images"
        pause = write_image(
            images / "pause.tar", PAUSE_IMAGE, [ImageFile(binary, "/testpod")], ["/testpod", "pause"]
        )
        test = write_image(
            images / "testpod.tar", TEST_IMAGE, [ImageFile(binary, "/testpod")], ["/testpod"], ["serve"]
        )
        plane.start()
        report.extra["network_namespace"] = {
            "interfaces_at_start": interfaces(),
            "lo_addresses_at_start": loopback_addresses(),
            "node_ip": NODE_IP,
            "pod_cidr": NODE_POD_CIDR,
        }
        node = Node(plane, node_tools, os.environ.get("AGORA_RUN_ID", "manual"), PAUSE_IMAGE)
        # The second node starts only for the drain (agora_on_node.py), after everything else.
        second = Node(plane, node_tools, node.run_id, PAUSE_IMAGE, index=1)
        report.extra["cgroup_root"] = node.cgroup_root
        node.start_containerd()
        scenario = NodeScenario(plane, node, report, binary, second)
        scenario.archives = {PAUSE_IMAGE: pause.archive, TEST_IMAGE: test.archive}
        scenario.written = [pause.describe(), test.describe()]
        scenario.run()
        report.extra["network_namespace"]["interfaces_at_end"] = interfaces()
        report.extra["kernel_settings_the_kubelet_saw"] = kernel_settings()
        code = 0 if all(c["status"] == "passed" for c in report.checks) else 1
    except (Exception, KeyboardInterrupt) as exc:
        report.extra["error"] = f"{type(exc).__name__}: {exc}"
        report.extra["traceback"] = traceback.format_exc(limit=12)
        code = 2 if not report.checks else 1
    finally:
        if code != 0:
            # The node's own logs first: a pod that does not start is told of there.
            report.extra["log_tails"] = {
                **(node.log_tails(25) if node else {}),
                **(second.log_tails(25) if second else {}),
                **{p.name: p.log_tail(15) for p in plane.processes},
            }
        report.extra["timings_seconds"] = plane.timings
        report.write()
        if second is not None:
            second.stop()
        if node is not None:
            node.stop()
        plane.stop()
    print(f"report: {report.path} ({'passed' if code == 0 else 'failed'})", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
