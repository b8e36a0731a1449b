"""The Agora chart on the real node (node_scenario.py runs these checks after Dapr's chart is up):
the Agora image built by deploy/image/build-from-debian.sh (deploy/image/oci-archive.sh keeps it
as an OCI archive), Jaeger's and Redis's images written here, Redis as a pod behind the Service
the chart's default `redis.host` names, `helm install agora --wait`, then `helm test agora`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import yaml

from agora.core.market import TaskSpec
from agora.harness.toolchain import Toolchain
from tests.integration.kubernetes.chart_release import (
    BAD_VALUES,
    CHART,
    COMPONENTS,
    DRY_RUN,
    INJECTION,
    LINT,
    NAMESPACE,
    NO_SECRETS,
    ONE_SERVICE_UPGRADE,
    OPERATOR,
    RELEASE,
    ROLLBACK,
    ChartRelease,
)
from tests.integration.kubernetes.control_plane import REPO, ControlPlane, Kube, KubeError, Obj
from tests.integration.kubernetes.images import redis_container, write_jaeger_image, write_redis_image
from tests.integration.kubernetes.node import NODE_NAME, Node
from tests.integration.kubernetes.report import CheckFailed, Report, chart_secrets, expect

OCI_ARCHIVE_SCRIPT = REPO / "deploy" / "image" / "oci-archive.sh"
REDIS_SERVICE = "redis-master"
PUBLISH_PATIENCE_S = 120.0
"""How long the upgrade's trickle keeps trying one task's publish (the console's sidecar, its
way in, is rolled too) before the task counts as lost."""

PREPARED = (
    "the Agora image built from Debian (deploy/image/build-from-debian.sh), Jaeger's and Redis's "
    "imported into containerd; the namespace, the chart's Secrets with random values, and Redis"
)
AGORA_INSTALL = (
    "`helm install agora --wait` brings every service's pod Ready on the node, each with an "
    "injected daprd that got its identity from sentry, beside Redis and Jaeger as pods"
)
HELM_TEST = (
    "`helm test agora` passes: its pod publishes a task through the console's sidecar and sees it decided"
)
CLI = (
    "the `agora` CLI run in the console pod (`kubectl exec`) publishes the example tasks, a plan "
    "and a debate, and shows each of them decided"
)
TRACES = (
    "a task published in the cluster is one trace in the chart's Jaeger pod, with the spans of "
    "the allocator, the task board and the worker and of their sidecars"
)
POD_KILLS = (
    "the containers of a pod of the task board, of the allocator and of the worker (the app and "
    "its daprd) killed with SIGKILL through containerd mid-burst of 200 tasks: every task ends, "
    "none is decided or counted twice"
)
REPLICAS = (
    "`helm upgrade` to two replicas of every service and of the console, each with its "
    "PodDisruptionBudget; one of the two task board pods' containers killed with SIGKILL through "
    "containerd mid-burst of 200 tasks while the other carries on: every task ends, none is "
    "decided or counted twice"
)
UPGRADE = (
    "`helm upgrade` to a new image tag rolls every Deployment while a trickle of tasks flows: "
    "every task of the trickle ends"
)
DRAIN = (
    "a second kubelet node joins; `kubectl drain` of the first (the release's pods) under a "
    "trickle of tasks moves every pod of the release to it while the PodDisruptionBudgets keep a "
    "Ready pod of every service and of the console: every task of the trickle ends, none is "
    "decided twice"
)
UNINSTALL = (
    "`helm uninstall` leaves no object of the release behind; Redis keeps the state, and a "
    "reinstall serves the tasks decided before"
)
# In the order they run.
CHECKS = (
    PREPARED, LINT, DRY_RUN, AGORA_INSTALL, INJECTION, OPERATOR, COMPONENTS, NO_SECRETS, HELM_TEST,
    CLI, TRACES, POD_KILLS, ONE_SERVICE_UPGRADE, ROLLBACK, BAD_VALUES, UPGRADE, REPLICAS, DRAIN,
    UNINSTALL,
)  # fmt: skip
SERVICES = ("registry", "taskboard", "reputation", "allocator", "worker", "escalation", "uncertainty",
            "planner", "debate")  # fmt: skip
"""The chart's services (`agora.serviceNames`), each its own Deployment."""
TERMINAL = {"COMPLETED", "FAILED", "PARTIAL", "REJECTED"}
PLAN_FINAL = {"COMPLETED", "FAILED", "ABORTED"}
DEBATE_FINAL = {"COMPLETED", "ABORTED", "FAILED"}
# The reference worker's sample agents (agora.worker): every outcome is counted on one of them.
WORKER_AGENTS = ("analyst", "researcher", "scout", "writer")
BURST = 200


class Trickle:
    """A client publishing a task every half second, on a thread of its own, while the block
    runs (and three seconds more). A publish refused for `PUBLISH_PATIENCE_S` is counted in
    `refused`: its task may still have got in on an attempt whose answer was lost."""

    def __init__(self, publish: Callable[..., None], prefix: str) -> None:
        self.prefix = prefix
        self.sent: list[str] = []
        self.refused: list[str] = []
        self._publish = publish
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._flow, name="trickle", daemon=True)

    def __enter__(self) -> Trickle:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(3)
        self._stop.set()
        self._thread.join(PUBLISH_PATIENCE_S + 30)

    def _flow(self) -> None:
        while not self._stop.is_set():
            task_id = f"{self.prefix}{len(self.sent):03d}"
            self.sent.append(task_id)
            try:
                self._publish(task_id, patience_s=PUBLISH_PATIENCE_S)
            except CheckFailed:
                self.refused.append(task_id)
            self._stop.wait(0.5)


WATCH_GAP_LIMIT_S = 5.0
"""The longest the drain's Ready watch may go without a sample: a part could be without a Ready
pod for less than that unseen (a pod becomes Ready in more)."""


class ReadyWatch:
    """Samples the release's pods every half second while the block runs: the fewest Ready pods
    each of `parts` (services and the console) had at once. A part none of whose pods is listed
    counts 0 at that sample, and a sample that could not be taken is counted, not dropped: the
    longest time between two samples taken bounds what the watch can have missed."""

    def __init__(self, pods: Callable[[], list[Obj]], parts: list[str]) -> None:
        self.parts = list(parts)
        self.fewest: dict[str, int] = {}
        self.samples = 0
        self.failed_samples: list[str] = []
        self.longest_gap_s = 0.0
        self._last_taken: float | None = None
        self._pods = pods
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ready-watch", daemon=True)

    def __enter__(self) -> ReadyWatch:
        self._sample()  # the first must succeed: a watch that never saw the pods shows nothing
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self._sample_or_count()
        self._note_gap(time.monotonic())

    def _sample(self) -> None:
        counts: Counter[str] = Counter({part: 0 for part in self.parts})
        for pod in self._pods():
            part = pod["metadata"].get("labels", {}).get("app.kubernetes.io/component", "")
            if ready(pod) and "deletionTimestamp" not in pod["metadata"]:
                counts[part] += 1
        for part, count in counts.items():
            self.fewest[part] = min(self.fewest.get(part, count), count)
        self.samples += 1
        self._note_gap(time.monotonic())

    def _note_gap(self, now: float) -> None:
        if self._last_taken is not None:
            self.longest_gap_s = max(self.longest_gap_s, round(now - self._last_taken, 1))
        self._last_taken = now

    def _sample_or_count(self) -> None:
        try:
            self._sample()
        except (KubeError, httpx.HTTPError) as exc:
            self.failed_samples.append(f"{type(exc).__name__}: {str(exc)[:200]}")

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            self._sample_or_count()


def containerd_name(image: str) -> str:
    """The name containerd keeps an image under: a pod's `jaegertracing/jaeger:2.13.0` is
    `docker.io/jaegertracing/jaeger:2.13.0` there (Docker's default registry and library)."""
    first, _, rest = image.partition("/")
    if not rest:
        return f"docker.io/library/{image}"
    if "." in first or ":" in first or first == "localhost":
        return image
    return f"docker.io/{image}"


def image_archive() -> tuple[Path, str]:
    """Where oci-archive.sh keeps the image of this tree's HEAD, and the image's name."""

    def ask(flag: str) -> str:
        done = subprocess.run(
            [str(OCI_ARCHIVE_SCRIPT), flag], capture_output=True, text=True, timeout=60, check=True
        )
        return done.stdout.strip()

    return Path(ask("--path")), ask("--name")


def jaeger_tag() -> str:
    """The tag of the Jaeger image the chart runs by default."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    return str(values["jaeger"]["image"]["tag"])


def ready(pod: Obj) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def summary(pod: Obj) -> Obj:
    status = pod.get("status", {})
    return {
        "name": pod["metadata"]["name"],
        "phase": status.get("phase"),
        "ready": ready(pod),
        "containers": {
            c["name"]: {
                "ready": c.get("ready"),
                "restarts": c.get("restartCount"),
                "state": list(c.get("state", {})),
            }
            for c in status.get("containerStatuses") or []
        },
    }


class AgoraOnNode:
    def __init__(self, plane: ControlPlane, node: Node, report: Report, second_node: Node) -> None:
        self.plane = plane
        self.node = node
        self.second_node = second_node
        self.report = report
        self.kube: Kube = plane.kube
        self.secret_values = chart_secrets()
        self.image_name = ""
        self._console: httpx.Client | None = None
        self.release = ChartRelease(self.kube, self.helm, self.secret_values, self.release_values)
        report.on_failure = self.keep_pod_logs

    def keep_pod_logs(self, check: str) -> None:
        """Every container log on the node as the check failed, under logs/: the pods a later
        check replaces or uninstalls take their logs with them."""
        slug = re.sub(r"[^a-z0-9]+", "-", check.lower())[:40].strip("-")
        for node in (self.node, self.second_node):
            if Path(node.pod_logs).is_dir():
                shutil.copytree(
                    node.pod_logs,
                    self.plane.logs / f"pods-when-{slug}-failed" / node.name,
                    ignore_dangling_symlinks=True,
                    dirs_exist_ok=True,
                )

    # -- helpers -------------------------------------------------------------------------------

    def pods(self, selector: str = "") -> list[Obj]:
        params = {"labelSelector": selector} if selector else {}
        return self.kube.items(f"/api/v1/namespaces/{NAMESPACE}/pods", **params)

    def release_pods(self) -> list[Obj]:
        return self.pods(f"app.kubernetes.io/instance={RELEASE}")

    def log(self, pod: str, container: str, tail: int = 40) -> str:
        response = self.kube.http.get(
            f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}/log",
            params={"container": container, "tailLines": str(tail)},
        )
        return response.text

    def create(self, path: str, body: Obj) -> None:
        self.kube.call("POST", path, body=body)

    def release_values(self) -> list[str]:
        repository, tag = self.image_name.rsplit(":", 1)
        return [
            f"image.repository={repository}",
            f"image.tag={tag}",
            "escalationToken.existingSecret=agora-escalation-token",
            # Every trace kept: the node test looks one task's trace up in Jaeger (the chart's
            # default keeps a tenth).
            "tracing.samplingRate=1",
        ]

    def helm(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return self.plane.helm(*args, "--namespace", NAMESPACE, timeout=timeout)

    def failure_context(self) -> str:
        pods = self.pods()
        lines = [json.dumps([summary(p) for p in pods])]
        for pod in pods:
            if ready(pod):
                continue
            for container in pod["spec"]["containers"]:
                with contextlib.suppress(Exception):
                    lines.append(
                        f"--- {pod['metadata']['name']}/{container['name']}\n"
                        f"{self.log(pod['metadata']['name'], container['name'], 15)[-1500:]}"
                    )
        return "\n".join(lines)

    # -- Redis ---------------------------------------------------------------------------------

    def redis_objects(self, image: str) -> list[tuple[str, Obj]]:
        labels = {"app.kubernetes.io/name": "redis"}
        deployment: Obj = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": REDIS_SERVICE, "namespace": NAMESPACE},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "strategy": {"type": "Recreate"},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
                        "enableServiceLinks": False,
                        "automountServiceAccountToken": False,
                        "terminationGracePeriodSeconds": 10,
                        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 999},
                        "containers": [
                            {
                                **redis_container(
                                    image,
                                    [
                                        "--port",
                                        "6379",
                                        "--requirepass",
                                        "$(REDIS_PASSWORD)",
                                        "--appendonly",
                                        "yes",
                                        "--save",
                                        "",
                                        "--dir",
                                        "/data",
                                    ],
                                    {
                                        "requests": {"cpu": "50m", "memory": "64Mi"},
                                        "limits": {"cpu": "1", "memory": "256Mi"},
                                    },
                                ),
                                "env": [
                                    {
                                        "name": "REDIS_PASSWORD",
                                        "valueFrom": {
                                            "secretKeyRef": {"name": "redis", "key": "redis-password"}
                                        },
                                    }
                                ],
                            }
                        ],
                        "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "256Mi"}}],
                    },
                },
            },
        }
        service: Obj = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": REDIS_SERVICE, "namespace": NAMESPACE},
            "spec": {"selector": labels, "ports": [{"name": "redis", "port": 6379, "targetPort": "redis"}]},
        }
        return [
            (f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", deployment),
            (f"/api/v1/namespaces/{NAMESPACE}/services", service),
        ]

    # -- the checks ----------------------------------------------------------------------------

    def prepare(self) -> Obj:
        started = time.monotonic()
        archive, self.image_name = image_archive()
        expect(
            archive.is_file(),
            f"{archive} is missing: `make kube-node` builds it (deploy/image/oci-archive.sh)",
        )
        imported = {"agora": self.node.import_image(archive)}
        images = self.plane.workdir / "images"
        jaeger = write_jaeger_image(images, Toolchain.from_environment().jaeger_bin / "jaeger", jaeger_tag())
        redis = write_redis_image(images)
        for written in (jaeger, redis):
            imported[written.name] = self.node.import_image(written.archive)
            written.archive.unlink()
        listed = self.node.images()
        expect(self.image_name in listed, f"ctr lists {listed}, not {self.image_name}")
        seconds_to_import = round(time.monotonic() - started, 1)

        self.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        for name, data in self.secret_values.items():
            self.create(
                f"/api/v1/namespaces/{NAMESPACE}/secrets",
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "stringData": data,
                },
            )
        for path, body in self.redis_objects(redis.name):
            self.create(path, body)
        return {
            "image": self.image_name,
            "image_archive_mb": round(archive.stat().st_size / 2**20, 1),
            "ctr_import": imported,
            "seconds_to_import_images": seconds_to_import,
            "secrets": {name: sorted(data) for name, data in self.secret_values.items()},
            "secret_values": "random per run (secrets.token_hex), never written to the report",
        }

    def install(self) -> Obj:
        installing = time.monotonic()
        sets = [arg for value in self.release_values() for arg in ("--set", value)]
        done = self.helm("install", RELEASE, str(CHART), *sets, "--wait", "--timeout", "12m", timeout=900)
        if done.returncode != 0:
            raise CheckFailed(f"helm install agora: {done.stderr.strip()[-1500:]}\n{self.failure_context()}")
        install_seconds = round(time.monotonic() - installing, 1)
        self.plane.timings["helm install agora --wait (node)"] = install_seconds
        self.release.remember_first_install()

        pods = self.pods("app.kubernetes.io/instance=agora")
        not_ready = [summary(p) for p in pods if not ready(p)]
        expect(pods and not not_ready, f"pods not Ready: {not_ready}")
        sidecars: dict[str, Obj] = {}
        for pod in pods:
            containers = [c["name"] for c in pod["spec"]["containers"]]
            if "daprd" not in containers:
                continue
            log = self.log(pod["metadata"]["name"], "daprd", tail=5000)
            sidecars[
                pod["metadata"]["labels"].get("app.kubernetes.io/component", pod["metadata"]["name"])
            ] = {
                "containers": containers,
                # Sentry signed the workload certificate daprd's mTLS connections present.
                "identity_from_sentry": "Security is initialized successfully" in log
                and "workload identity expiry watcher" in log,
            }
        missing = [name for name, s in sidecars.items() if not s["identity_from_sentry"]]
        expect(len(sidecars) >= 10, f"pods with a daprd: {sorted(sidecars)}")
        expect(not missing, f"daprd without an identity from sentry: {missing}")
        return {
            "helm_install_seconds": install_seconds,
            "pods": [summary(p) for p in pods],
            "sidecars": sidecars,
        }

    def helm_test(self) -> Obj:
        started = time.monotonic()
        pod = f"{RELEASE}-test-publish-task"
        done = self.helm("test", RELEASE, "--timeout", "5m", timeout=400)
        output = (done.stdout + done.stderr).strip()
        if done.returncode != 0:
            # A failing test keeps its pod: its log says why.
            log = self.kubectl("logs", pod).stdout
            raise CheckFailed(f"helm test agora: exit {done.returncode}\n{output[-1500:]}\n{log[-2500:]}")
        phase = re.search(r"Phase:\s+(\S+)", output)
        expect(phase is not None and phase.group(1) == "Succeeded", f"helm test:\n{output[-1500:]}")
        # A passing test deletes its pod, so that `helm uninstall` leaves nothing behind.
        self.kube.wait_for(
            "the passed test's pod deleted",
            lambda: self.kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}") is None,
            timeout=60,
        )
        return {
            "command": "helm test agora",
            "seconds": round(time.monotonic() - started, 1),
            "output": [line for line in output.splitlines() if line.startswith(("TEST SUITE", "Phase"))],
        }

    # -- the console's Dapr API, as people's tools reach it ---------------------------------------

    def console(self) -> httpx.Client:
        if self._console is None:
            service = self.kube.get(f"/api/v1/namespaces/{NAMESPACE}/services/{RELEASE}-console") or {}
            port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "dapr-http")
            self._console = httpx.Client(
                base_url=f"http://{service['spec']['clusterIP']}:{port}",
                headers={"dapr-api-token": self.secret_values["agora-console-api-token"]["token"]},
                timeout=15,
            )
        return self._console

    def publish(self, task_id: str, patience_s: float = 30.0) -> None:
        """Publish as a client would: a refusal or no answer is tried again, with backoff,
        for `patience_s`."""
        spec = TaskSpec(
            task_id=task_id,
            description=f"Summarise this week's product launches ({task_id})",
            required_skills=["web_search"],
            min_success_threshold=0.2,
        )
        give_up = time.monotonic() + patience_s
        attempt = 0
        while True:
            with contextlib.suppress(httpx.HTTPError):
                answer = self.console().post(
                    "/v1.0/publish/agora-pubsub/agora.tasks", json=spec.model_dump(mode="json")
                )
                if answer.is_success:
                    return
            if time.monotonic() >= give_up:
                raise CheckFailed(f"could not publish {task_id} through the console's sidecar")
            time.sleep(min(0.5 * 2**attempt, 5))
            attempt += 1

    def get(self, app_id: str, path: str) -> Obj | None:
        """One read through the console's sidecar; None when the record does not exist. A service
        that is restarting is asked again, with backoff."""
        failure = ""
        for attempt in range(8):
            try:
                answer = self.console().get(f"/v1.0/invoke/{app_id}/method/{path}")
            except httpx.HTTPError as exc:
                failure = f"{type(exc).__name__}: {exc}"
            else:
                if answer.status_code == 404 and "ERR_DIRECT_INVOKE" not in answer.text:
                    return None
                if answer.is_success:
                    found: Obj = answer.json()
                    return found
                failure = f"{answer.status_code} {answer.text[:300]}"
            time.sleep(min(0.5 * 2**attempt, 5))
        raise CheckFailed(f"GET {app_id} {path}: {failure}")

    def terminal(self, ids: set[str]) -> set[str]:
        done: set[str] = set()
        for status in TERMINAL:
            listing = self.get("taskboard", f"v1/tasks?status={status}") or {}
            done |= set(listing.get("task_ids") or []) & ids
        return done

    def outcomes_counted(self) -> int:
        return sum(
            (self.get("reputation", f"v1/reputation/{a}") or {}).get("total_tasks", 0) for a in WORKER_AGENTS
        )

    def skip_waiting_escalations(self, prefix: str) -> int:
        """A person skips every escalation of these tasks that waits (the escalation token)."""
        page = self.get("escalation", "v1/escalations?status=WAITING_FOR_HUMAN&limit=100") or {}
        skipped = 0
        for record in page.get("escalations") or []:
            if not str(record["waiting_party"]["id"]).startswith(prefix):
                continue
            with contextlib.suppress(httpx.HTTPError):
                answer = self.console().post(
                    f"/v1.0/invoke/escalation/method/v1/escalations/{record['escalation_id']}/resume",
                    headers={"x-agora-token": self.secret_values["agora-escalation-token"]["token"]},
                    json={
                        "decision": {"kind": "escalation", "action": "skip"},
                        "who": "node-test@example.com",
                    },
                )
                skipped += answer.status_code == 200
        return skipped

    def wait_until_ended(self, ids: set[str], prefix: str, timeout: float) -> set[str]:
        deadline = time.monotonic() + timeout
        ended: set[str] = set()
        while time.monotonic() < deadline:
            with contextlib.suppress(CheckFailed):
                ended = self.terminal(ids)
                if ended == ids:
                    return ended
                self.skip_waiting_escalations(prefix)
            time.sleep(1)
        return ended

    def where_they_stopped(self, lost: list[str]) -> dict[str, str]:
        """The board's word on the first tasks that did not end: none, or their status history."""
        where = {}
        for task_id in lost[:8]:
            try:
                record = self.get("taskboard", f"v1/tasks/{task_id}")
            except CheckFailed as exc:
                where[task_id] = f"unknown ({exc})"
                continue
            history = [h["status"] for h in (record or {}).get("history") or []]
            where[task_id] = f"{record['status']} {history}" if record else "not on the board"
        return where

    def decided_once(self, ids: set[str]) -> list[str]:
        """Tasks whose board history holds more or fewer than one market decision."""
        doubled = []
        for task_id in sorted(ids):
            record = self.get("taskboard", f"v1/tasks/{task_id}") or {}
            decisions = [h for h in record.get("history") or [] if h["status"] in {"ALLOCATED", "REJECTED"}]
            if len(decisions) != 1:
                doubled.append(f"{task_id}: {[h['status'] for h in record.get('history') or []]}")
        return doubled

    def kubectl(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.node.tools.kubectl), "--namespace", NAMESPACE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "KUBECONFIG": str(self.plane.kubeconfig)},
            check=False,
        )
        with (self.plane.logs / "kubectl.log").open("a") as log:
            log.write(f"$ kubectl {' '.join(args)}  # exit {done.returncode}\n")
            log.write(f"{done.stdout[-3000:]}{done.stderr[-3000:]}\n")
        return done

    def agora_cli(self, *args: str, timeout: float = 180) -> str:
        done = self.kubectl(
            "exec", f"deploy/{RELEASE}-console", "-c", "console", "--", "agora", *args, timeout=timeout
        )
        if done.returncode != 0:
            raise CheckFailed(
                f"agora {' '.join(args)}: exit {done.returncode}\n{done.stdout[-1500:]}{done.stderr[-1500:]}"
            )
        return done.stdout

    def cli_json(self, *args: str) -> Obj:
        found: Obj = json.loads(self.agora_cli(*args, "--json"))
        return found

    # -- the checks after the install ----------------------------------------------------------

    def cli(self) -> Obj:
        started = time.monotonic()
        published = self.agora_cli("task", "publish", "/opt/agora/examples/tasks.yaml")
        submitted = self.agora_cli("plan", "submit", "/opt/agora/examples/plan.yaml")
        debate = self.agora_cli(
            "debate",
            "ask",
            "Which storage engine suits an append-only audit log? Options: A, B",
            "--id",
            "node-debate",
            "--no-routing",
            "--wait",
            timeout=300,
        )
        tasks = ("example-launches", "example-retention", "example-release-notes")
        deadline = time.monotonic() + 240
        shown: dict[str, str] = {}
        while time.monotonic() < deadline:
            shown = {t: self.cli_json("task", "show", t).get("status", "") for t in tasks}
            plan = self.cli_json("plan", "show", "solar-report").get("state", "")
            ended = self.cli_json("debate", "show", "node-debate").get("state", "")
            shown |= {"plan solar-report": plan, "debate node-debate": ended}
            if all(shown[t] in TERMINAL for t in tasks) and plan in PLAN_FINAL and ended in DEBATE_FINAL:
                break
            self.skip_waiting_escalations("")
            time.sleep(2)
        else:
            raise CheckFailed(f"not all ended in time: {shown}")
        listed = self.agora_cli("task", "list", "--status", shown["example-launches"])
        expect("example-launches" in listed, f"agora task list: {listed}")
        return {
            "commands": [
                "kubectl exec deploy/agora-console -c console -- "
                "agora task publish /opt/agora/examples/tasks.yaml",
                "... agora plan submit /opt/agora/examples/plan.yaml",
                "... agora debate ask '...' --id node-debate --wait",
                "... agora task show <id> --json; agora plan show solar-report --json; "
                "agora debate show node-debate --json",
            ],
            "publish_output": published.strip().splitlines()[-3:],
            "plan_output": submitted.strip().splitlines()[-3:],
            "debate_output": debate.strip().splitlines()[-4:],
            "states": shown,
            "seconds": round(time.monotonic() - started, 1),
        }

    def traces(self) -> Obj:
        service = self.kube.get(f"/api/v1/namespaces/{NAMESPACE}/services/{RELEASE}-jaeger") or {}
        query = f"http://{service['spec']['clusterIP']}:16686"
        task_id = "example-launches"
        wanted = {"allocator", "taskboard", "worker"}

        def one_trace() -> Obj | None:
            answer = httpx.get(
                f"{query}/api/traces",
                params={"service": "allocator", "tags": json.dumps({"agora.task_id": task_id}), "limit": 20},
                timeout=10,
            )
            for trace in answer.json().get("data") or []:
                services: dict[str, set[str]] = {}
                for span in trace["spans"]:
                    process = trace["processes"][span["processID"]]
                    tags = {t["key"]: t["value"] for t in process.get("tags", [])}
                    origin = "app" if tags.get("service.namespace") == "agora" else "sidecar"
                    services.setdefault(process["serviceName"], set()).add(origin)
                if all({"app", "sidecar"} <= services.get(name, set()) for name in wanted):
                    return {
                        "trace_id": trace["traceID"],
                        "spans": len(trace["spans"]),
                        "services": {k: sorted(v) for k, v in sorted(services.items())},
                    }
            return None

        try:
            found: Obj = self.kube.wait_for(
                f"the trace of {task_id} in Jaeger", one_trace, timeout=60, interval=2
            )
        except KubeError as exc:
            raise CheckFailed(str(exc)) from exc
        return {"jaeger": f"{RELEASE}-jaeger Service, port 16686", "task_id": task_id, **found}

    def hard_kill_pod_of(self, component: str) -> Obj:
        """SIGKILL every container of the component's pod (the app and its daprd) through
        containerd, at once: no grace period, no preStop, nothing flushed. The kubelet sees them
        exit and starts them again in the same pod."""
        pods = [
            p
            for p in self.pods(
                f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component={component}"
            )
            if "deletionTimestamp" not in p["metadata"]
        ]
        expect(pods, f"no pod of {component}")
        pod = pods[0]
        statuses = pod.get("status", {}).get("containerStatuses") or []
        restarts_before = {c["name"]: c.get("restartCount", 0) for c in statuses}
        expect(
            {component, "daprd"} <= set(restarts_before),
            f"{component}'s containers: {sorted(restarts_before)}",
        )
        for status in statuses:
            container_id = str(status.get("containerID", "")).removeprefix("containerd://")
            expect(container_id, f"{status['name']} of {pod['metadata']['name']} has no container id")
            self.node.ctr("tasks", "kill", "--signal", "SIGKILL", container_id, timeout=10)
        name: str = pod["metadata"]["name"]
        return {"pod": name, "containers": sorted(restarts_before), "restarts_before": restarts_before}

    def killed_and_restarted(self, killed: Obj) -> Obj:
        """Each killed container's last end, as the kubelet recorded it: killed by SIGKILL
        (exit code 137), and running again."""

        def restarted() -> Obj | None:
            pod = self.kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{killed['pod']}")
            statuses = {c["name"]: c for c in (pod or {}).get("status", {}).get("containerStatuses") or []}
            ends: Obj = {}
            for name in killed["containers"]:
                status = statuses.get(name) or {}
                if status.get("restartCount", 0) <= killed["restarts_before"][name]:
                    return None
                ends[name] = (status.get("lastState") or {}).get("terminated", {}).get("exitCode")
            return ends

        try:
            ends: Obj = self.kube.wait_for(f"{killed['pod']}'s containers restarted", restarted, timeout=120)
        except KubeError as exc:
            raise CheckFailed(f"{exc}\n{self.failure_context()}") from exc
        expect(all(code == 137 for code in ends.values()), f"not ended by SIGKILL: {ends}")
        return ends

    def pod_kills(self) -> Obj:
        """One burst per stateful path; its pod is killed once a tenth of the burst has ended."""
        bursts = []
        for component in ("taskboard", "allocator", "worker"):
            bursts.append(self.burst_with_a_kill(component))
            self.wait_all_ready(timeout=180)
        return {"bursts": bursts}

    def burst_with_a_kill(self, component: str) -> Obj:
        """A burst of `BURST` tasks; once a tenth has ended, the containers of a pod of
        `component` are SIGKILLed: every task ends, decided once, its outcome counted once."""
        # The reputation counts every task's outcome: nothing else may be in flight.
        self.wait_quiet(timeout=240)
        prefix = f"node-burst-{component}-{uuid.uuid4().hex[:6]}-"
        ids = {f"{prefix}{i:03d}" for i in range(BURST)}
        counted_before = self.outcomes_counted()
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(self.publish, sorted(ids)))
        deadline = time.monotonic() + 240
        while len(ended_before_kill := self.terminal(ids)) < BURST // 10:
            expect(time.monotonic() < deadline, f"a tenth of the burst did not end in 240 s ({component})")
            time.sleep(0.2)
        killed = self.hard_kill_pod_of(component)
        expect(
            len(ended_before_kill) < BURST,
            f"the whole burst had ended before {killed['pod']} was killed: no task was in flight",
        )
        killed_at = time.monotonic()
        exit_codes = self.killed_and_restarted(killed)
        restarted_s = round(time.monotonic() - killed_at, 1)
        ended = self.wait_until_ended(ids, prefix, timeout=420)
        settled_s = round(time.monotonic() - killed_at, 1)
        lost = sorted(ids - ended)
        where = self.where_they_stopped(lost)
        expect(not lost, f"{component} killed: {len(lost)} of {BURST} tasks did not end: {where}")
        doubled = self.decided_once(ids)
        expect(not doubled, f"{component} killed: decided other than once: {doubled[:10]}")
        records = [self.get("taskboard", f"v1/tasks/{t}") or {} for t in sorted(ids)]
        outcomes = sum(1 for record in records if record.get("outcome"))
        # The board announces every outcome it records, whoever was killed.
        counting = time.monotonic() + 60
        while (counted := self.outcomes_counted() - counted_before) < outcomes:
            if time.monotonic() > counting:
                break
            time.sleep(1)
        expect(
            counted == outcomes,
            f"{component} killed: reputation counted {counted} outcomes for {outcomes} on the board",
        )
        return {
            "killed": killed["pod"],
            "exit_codes": exit_codes,
            "seconds_from_kill_to_containers_restarted": restarted_s,
            "seconds_from_kill_to_every_task_ended": settled_s,
            "tasks_ended_when_killed": len(ended_before_kill),
            "tasks": BURST,
            "ended": len(ended),
            "statuses": dict(Counter(str(record.get("status")) for record in records)),
            "outcomes_on_the_board": outcomes,
            "outcomes_counted_by_reputation": counted,
            "seconds": round(time.monotonic() - started, 1),
        }

    def replicas(self) -> Obj:
        """Two replicas of every service and of the console, then a burst with one task board
        pod killed while the other carries on."""
        started = time.monotonic()
        parts = [f"services.{name}" for name in SERVICES] + ["console"]
        # The node has 2 cores: two of every pod at the chart's CPU requests would ask for more
        # than it has, and the second replicas would stay Pending. Requests are what the
        # scheduler books, so they are lowered first (a rolling update at one replica), then
        # every Deployment is scaled (no new template, so nothing rolls).
        lowered = [
            setting
            for part in parts
            for setting in (f"{part}.resources.requests.cpu=20m", f"{part}.sidecar.cpuRequest=20m")
        ]
        doubled = [*lowered, *(f"{part}.replicaCount=2" for part in parts)]  # fmt: skip
        for step, settings in (("lower the CPU requests", lowered), ("two replicas", doubled)):
            sets = [arg for value in [*self.release_values(), *settings] for arg in ("--set", value)]
            done = self.helm("upgrade", RELEASE, str(CHART), *sets, "--wait", "--timeout", "10m", timeout=700)
            if done.returncode != 0:
                raise CheckFailed(
                    f"helm upgrade to {step}: {done.stderr.strip()[-1500:]}\n{self.failure_context()}"
                )
        scaled_s = round(time.monotonic() - started, 1)
        ready_replicas = {
            d["metadata"]["name"].removeprefix(f"{RELEASE}-"): d["status"].get("readyReplicas", 0)
            for d in self.deployments()
            if d["metadata"]["name"] != f"{RELEASE}-jaeger"
        }
        expect(all(n == 2 for n in ready_replicas.values()), f"ready replicas: {ready_replicas}")
        budgets = self.kube.items(
            f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets",
            labelSelector=f"app.kubernetes.io/instance={RELEASE}",
        )
        guarded = sorted(b["metadata"]["name"].removeprefix(f"{RELEASE}-") for b in budgets)
        expect(guarded == sorted([*SERVICES, "console"]), f"PodDisruptionBudgets of {guarded}")
        burst = self.burst_with_a_kill("taskboard")
        self.wait_all_ready(timeout=180)
        return {"helm_upgrade_seconds": scaled_s, "ready_replicas": ready_replicas,
                "pod_disruption_budgets": guarded, "burst": burst}  # fmt: skip

    def wait_quiet(self, timeout: float) -> None:
        """Until no task has waited for a decision or an outcome for three seconds running."""
        deadline = time.monotonic() + timeout
        quiet_since: float | None = None
        busy: list[str] = []
        while time.monotonic() < deadline:
            busy = []
            for status in ("PENDING", "BIDDING", "ALLOCATED"):
                listing = self.get("taskboard", f"v1/tasks?status={status}") or {}
                busy += listing.get("task_ids") or []
            if busy:
                quiet_since = None
                self.skip_waiting_escalations("")
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= 3:
                return
            time.sleep(0.5)
        raise CheckFailed(f"tasks still in flight after {timeout:.0f} s: {busy[:10]}")

    def wait_all_ready(self, timeout: float) -> None:
        def settled() -> bool:
            pods = [p for p in self.release_pods() if "deletionTimestamp" not in p["metadata"]]
            return bool(pods) and all(ready(p) for p in pods)

        try:
            self.kube.wait_for("every pod of the release Ready", settled, timeout=timeout, interval=1)
        except KubeError as exc:
            raise CheckFailed(f"{exc}\n{self.failure_context()}") from exc

    def upgrade(self) -> Obj:
        repository, tag = self.image_name.rsplit(":", 1)
        new_name = f"{repository}:{tag}-next"
        self.node.ctr("images", "tag", self.image_name, new_name)
        before = {d["metadata"]["name"]: d["metadata"]["generation"] for d in self.deployments()}
        started = time.monotonic()
        with Trickle(self.publish, f"node-trickle-{uuid.uuid4().hex[:6]}-") as trickle:
            sets = [arg for value in self.release_values() for arg in ("--set", value)]
            done = self.helm(
                "upgrade",
                RELEASE,
                str(CHART),
                *sets,
                "--set",
                f"image.tag={tag}-next",
                "--wait",
                "--timeout",
                "10m",
                timeout=700,
            )
        if done.returncode != 0:
            raise CheckFailed(f"helm upgrade: {done.stderr.strip()[-1500:]}\n{self.failure_context()}")
        rolled_seconds = round(time.monotonic() - started, 1)
        deployments = self.deployments()
        not_rolled = [
            d["metadata"]["name"]
            for d in deployments
            if d["metadata"]["name"] != f"{RELEASE}-jaeger"
            and (
                d["metadata"]["generation"] == before.get(d["metadata"]["name"])
                or d["spec"]["template"]["spec"]["containers"][0]["image"] != new_name
                or d["status"].get("updatedReplicas") != d["spec"]["replicas"]
            )
        ]
        expect(not not_rolled, f"Deployments not rolled to {new_name}: {not_rolled}")
        pods = [p for p in self.release_pods() if "deletionTimestamp" not in p["metadata"]]
        old = [
            p["metadata"]["name"]
            for p in pods
            if any(c["image"] == self.image_name for c in p["spec"]["containers"])
        ]
        expect(not old, f"pods still on the old image: {old}")
        without_sidecar = [
            p["metadata"]["name"]
            for p in pods
            if "jaeger" not in p["metadata"]["name"]
            and "daprd" not in [c["name"] for c in p["spec"]["containers"]]
        ]
        expect(not without_sidecar, f"pods without daprd: {without_sidecar}")
        ended = self.every_trickled_task_ended(trickle, "the upgrade")
        self.image_name = new_name
        return {
            "image": new_name,
            "helm_upgrade_seconds": rolled_seconds,
            "deployments_rolled": sorted(d["metadata"]["name"] for d in deployments),
            "trickled_tasks": len(trickle.sent),
            "ended": len(ended),
        }

    def every_trickled_task_ended(self, trickle: Trickle, during: str) -> set[str]:
        """Every task the trickle tried to publish ends, decided once. A publish the client gave up
        on may still have got in on an attempt whose answer was lost: such a task ends like any
        other. One that never got in is lost all the same."""
        ids = set(trickle.sent)
        expect(len(ids) >= 10, f"only {len(ids)} tasks trickled in during {during}")
        ended = self.wait_until_ended(ids, trickle.prefix, timeout=300)
        lost = sorted(ids - ended)
        expect(
            not lost,
            f"{len(lost)} of {len(ids)} trickled tasks did not end ({len(trickle.refused)} publishes "
            f"refused for {PUBLISH_PATIENCE_S} s): {self.where_they_stopped(lost)}",
        )
        doubled = self.decided_once(ids)
        expect(not doubled, f"decided other than once: {doubled[:10]}")
        return ended

    def drain(self) -> Obj:
        """A second node joins with the release's images; the first is drained of the release's
        pods (`kubectl drain --pod-selector`: Redis and Dapr's control plane stay where they are)
        under a trickle, then opened again."""
        started = time.monotonic()
        second = self.second_node
        second.start_containerd()
        # Nothing can be pulled here: the second node gets what the release's pods run, exported
        # from the first node's containerd.
        images = sorted(
            {
                containerd_name(c["image"])
                for p in self.release_pods()
                for c in [*p["spec"]["containers"], *(p["spec"].get("initContainers") or [])]
            }
            | {containerd_name(second.sandbox_image)}
        )
        archive = self.plane.workdir / "images" / "release-images.tar"
        archive.parent.mkdir(parents=True, exist_ok=True)
        self.node.ctr("images", "export", "--platform", "linux/amd64", str(archive), *images, timeout=300)
        archive_mb = round(archive.stat().st_size / 2**20, 1)
        second.import_image(archive)
        archive.unlink()
        listed = second.images()
        expect(all(name in listed for name in images), f"the second node lists {listed}, not all of {images}")
        second.start_kubelet()
        joined_s = round(time.monotonic() - started, 1)
        draining = time.monotonic()
        with (
            ReadyWatch(self.release_pods, [*SERVICES, "console"]) as watch,
            Trickle(self.publish, f"node-drain-{uuid.uuid4().hex[:6]}-") as trickle,
        ):
            done = self.kubectl(
                "drain",
                NODE_NAME,
                f"--pod-selector=app.kubernetes.io/instance={RELEASE}",
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--timeout=10m",
                timeout=700,
            )
            if done.returncode == 0:
                self.wait_all_ready(timeout=300)
        drained_s = round(time.monotonic() - draining, 1)
        if done.returncode != 0:
            raise CheckFailed(f"kubectl drain: {done.stderr.strip()[-1500:]}\n{self.failure_context()}")
        pods = [p for p in self.release_pods() if "deletionTimestamp" not in p["metadata"]]
        left = sorted(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") != second.name)
        expect(not left, f"pods of the release not on {second.name} after the drain: {left}")
        unguarded = {part: n for part, n in watch.fewest.items() if part in watch.parts and n < 1}
        expect(not unguarded, f"parts with no Ready pod at some moment of the drain: {unguarded}")
        expect(
            watch.longest_gap_s <= WATCH_GAP_LIMIT_S,
            f"the Ready watch went {watch.longest_gap_s} s without a sample "
            f"({len(watch.failed_samples)} failed: {watch.failed_samples[:3]})",
        )
        ended = self.every_trickled_task_ended(trickle, "the drain")
        opened = self.kubectl("uncordon", NODE_NAME)
        expect(opened.returncode == 0, f"kubectl uncordon: {opened.stderr.strip()[-500:]}")
        return {
            "second_node": second.name,
            "images_copied": images,
            "image_archive_mb": archive_mb,
            "seconds_to_join": joined_s,
            "seconds_to_drain_and_be_ready": drained_s,
            "evicted": sum(1 for line in done.stdout.splitlines() if line.rstrip().endswith("evicted")),
            "fewest_ready_pods_at_once": dict(sorted(watch.fewest.items())),
            "samples": watch.samples,
            "failed_samples": len(watch.failed_samples),
            "longest_gap_between_samples_s": watch.longest_gap_s,
            "trickled_tasks": len(trickle.sent),
            "publishes_refused": len(trickle.refused),
            "ended": len(ended),
        }

    def deployments(self) -> list[Obj]:
        return self.kube.items(
            f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
            labelSelector=f"app.kubernetes.io/instance={RELEASE}",
        )

    def uninstall(self) -> Obj:
        kept = "example-launches"
        before = (self.get("taskboard", f"v1/tasks/{kept}") or {}).get("status")
        expect(before in TERMINAL, f"{kept} is {before}")
        kinds = self.release.kinds(self.release.objects())
        started = time.monotonic()
        done = self.helm("uninstall", RELEASE, "--wait", "--timeout", "5m", timeout=400)
        expect(done.returncode == 0, f"helm uninstall: {done.stderr.strip()[-1500:]}")

        def gone() -> bool:
            return not self.release_pods()

        try:
            self.kube.wait_for("no pod of the release", gone, timeout=120, interval=1)
        except KubeError as exc:
            left = [summary(p) for p in self.release_pods()]
            raise CheckFailed(f"{exc}: {left}") from exc
        nothing_left = self.release.wait_no_leftovers(kinds, self.made_by_the_test)
        uninstalled = round(time.monotonic() - started, 1)
        redis = [p["metadata"]["name"] for p in self.pods("app.kubernetes.io/name=redis") if ready(p)]
        expect(redis, "Redis did not stay")
        sets = [arg for value in self.release_values() for arg in ("--set", value)]
        done = self.helm("install", RELEASE, str(CHART), *sets, "--wait", "--timeout", "10m", timeout=700)
        if done.returncode != 0:
            raise CheckFailed(
                f"helm install (again): {done.stderr.strip()[-1500:]}\n{self.failure_context()}"
            )
        self._console = None
        # The sidecars find the task board by its `taskboard-dapr` Service, which Dapr's operator
        # creates anew; until cluster DNS has it, calls fail.
        reading = time.monotonic() + 120
        while True:
            try:
                after = (self.get("taskboard", f"v1/tasks/{kept}") or {}).get("status")
                break
            except CheckFailed:
                if time.monotonic() > reading:
                    raise
        expect(after == before, f"{kept} was {before} before the reinstall, {after} after")
        return {
            "helm_uninstall_seconds": uninstalled,
            **nothing_left,
            "left_in_namespace": "only Redis, the test's Secrets, the default ServiceAccount, "
            "kube-root-ca.crt and Events",
            "redis_pod": redis,
            "reinstalled_seconds": round(time.monotonic() - started - uninstalled, 1),
            "task_after_reinstall": {kept: after},
        }

    def made_by_the_test(self, kind: str, name: str) -> bool:
        """What the namespace holds that is not the release's: Redis and its Secret, the other
        Secrets the chart names, and what Kubernetes puts in every namespace."""
        return (
            name.startswith(REDIS_SERVICE)
            or (kind == "secrets" and name in self.secret_values)
            or (kind == "serviceaccounts" and name == "default")
            or (kind == "configmaps" and name == "kube-root-ca.crt")
        )

    def run(self, needs: tuple[str, ...]) -> None:
        release = self.release
        self.report.run(PREPARED, self.prepare, needs=needs)
        self.report.run(LINT, release.lint)
        self.report.run(DRY_RUN, release.dry_run, needs=(PREPARED,))
        self.report.run(AGORA_INSTALL, self.install, needs=(PREPARED,))
        for name, check in (
            (INJECTION, release.injection),
            (OPERATOR, release.operator_services),
            (COMPONENTS, release.components),
            (NO_SECRETS, release.no_secret_values),
            (HELM_TEST, self.helm_test),
            (CLI, self.cli),
        ):
            self.report.run(name, check, needs=(AGORA_INSTALL,))
        self.report.run(TRACES, self.traces, needs=(CLI,))
        self.report.run(POD_KILLS, self.pod_kills, needs=(AGORA_INSTALL,))
        self.report.run(ONE_SERVICE_UPGRADE, release.one_service_upgrade, needs=(AGORA_INSTALL,))
        self.report.run(ROLLBACK, release.rollback, needs=(ONE_SERVICE_UPGRADE,))
        self.report.run(BAD_VALUES, release.bad_values, needs=(AGORA_INSTALL,))
        self.report.run(UPGRADE, self.upgrade, needs=(AGORA_INSTALL,))
        self.report.run(REPLICAS, self.replicas, needs=(AGORA_INSTALL,))
        self.report.run(DRAIN, self.drain, needs=(REPLICAS,))
        self.report.run(UNINSTALL, self.uninstall, needs=(CLI,))
        if self._console is not None:
            self._console.close()


__all__ = ["CHECKS", "AgoraOnNode", "KubeError", "image_archive"]
