"""The Helm chart deploy/helm/agora on a real Kubernetes control plane with Dapr's own sidecar
injector, inside a network namespace that has only loopback.

    unshare --net -- .venv/bin/python -m tests.integration.kubernetes.scenario <workdir>

starts the control plane and Dapr (control_plane.py), exercises the chart and writes what it found
to <workdir>/report.json (every check with its evidence), logs to <workdir>/logs/. It exits 0 when
every check passed, 1 when one failed, 2 when it could not run at all.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import secrets
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.integration.kubernetes.control_plane import (
    APISERVER_IP,
    DAPR_NAMESPACE,
    NODE_NAME,
    POD_CIDR,
    REPO,
    ControlPlane,
    Dapr,
    Kube,
    KubeTools,
    Obj,
    interfaces,
    loopback_addresses,
    pod_ip_in_cidr,
)

CHART = REPO / "deploy" / "helm" / "agora"
RELEASE = "agora"
NAMESPACE = "agora"
INSTANCE = f"app.kubernetes.io/instance={RELEASE}"
# The value changed by the upgrade: one service's environment.
UPGRADED_SERVICE = "allocator"
UPGRADE_SETS = (
    f"services.{UPGRADED_SERVICE}.env[0].name=AGORA_MAX_IN_FLIGHT",
    f"services.{UPGRADED_SERVICE}.env[0].value=8",
)
AGENT_APP = "calculator"
SCHEMA_REFUSAL = "values don't meet the specifications of the schema"

# The checks, in the order they run (test_kubernetes.py asserts each by these names).
LINT = "helm lint --strict"
SECRETS = "the chart's Secrets created with random values"
DRY_RUN = "helm install --dry-run=server, and the API server's strict dry run of every rendered object"
INSTALL = "helm install --wait"
INJECTION = (
    "every Deployment has a ReplicaSet and Ready pods; each Dapr pod has a daprd container injected by "
    "Dapr's injector with the chart's --app-id, --app-port and --config"
)
OPERATOR = "Dapr's operator made each app's <app-id>-dapr Service"
COMPONENTS = "every Component is accepted by the API server (Dapr's CRD schema) and scoped"
NO_SECRETS = "no Secret value in any manifest, value or object of the release"
UPGRADE = "helm upgrade of one service's env rolls that Deployment only"
ROLLBACK = "helm rollback to the first revision"
BAD_VALUES = (
    "bad values (replicaCount=-1, a misspelt key) refused with the schema's message, release unchanged"
)
PROCESSES = "the control plane's processes stayed up"
UNINSTALL = "helm uninstall leaves no object of the release behind"
CHECKS = (
    LINT, SECRETS, DRY_RUN, INSTALL, INJECTION, OPERATOR, COMPONENTS, NO_SECRETS, UPGRADE, ROLLBACK,
    BAD_VALUES, PROCESSES, UNINSTALL,
)  # fmt: skip

NOT_COVERED = [
    "No container runs: kwok plays the kubelet, so pods become Running/Ready without their images "
    "being pulled or started. The Agora apps, their daprd sidecars, the probes, Jaeger and "
    "`helm test` (its pod needs the running system) are not executed here; what is proven is what "
    "the API server, Dapr's injector, sentry and operator make of the chart.",
    "Dapr's placement and scheduler are kwok pods too (nothing answers at their addresses).",
    "No Redis: the Components are accepted and scoped, never connected.",
    "No kube-proxy, CNI or cluster DNS: the cluster IPs of Services whose endpoints are real "
    "processes are served by a userspace proxy, and the real processes resolve Service names "
    "through /etc/hosts (control_plane.py).",
    "Resource limits, securityContext (seccomp, read-only root, capabilities), "
    "PodDisruptionBudgets and autoscalers are accepted by the API server but enforced by nothing.",
]

DEVIATIONS = [
    "Dapr's sentry, operator and injector share one network namespace instead of one each: the "
    "chart's values turn Prometheus metrics off (every binary binds :9090) and move the "
    "injector's healthz port (dapr_sidecar_injector.healthzPort=8081); the operator, whose "
    "healthz port (8080, like sentry's) has no chart value, gets `--healthz-port 8082`.",
    "They run as uid 65532 (the distroless nonroot user of Dapr's images) in a mount namespace "
    "of their own, with their volumes written from the API server (tokens by TokenRequest bound "
    "to their pod) instead of by a kubelet.",
]


class CheckFailed(AssertionError):
    pass


def expect(condition: object, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


@dataclass
class Report:
    path: Path
    started: float = field(default_factory=time.monotonic)
    checks: list[Obj] = field(default_factory=list)
    extra: Obj = field(default_factory=dict)
    not_covered: list[str] = field(default_factory=lambda: NOT_COVERED)
    deviations: list[str] = field(default_factory=lambda: DEVIATIONS)

    def write(self) -> None:
        body = {
            "passed": bool(self.checks) and all(c["status"] == "passed" for c in self.checks),
            "duration_seconds": round(time.monotonic() - self.started, 1),
            "checks": self.checks,
            "not_covered": self.not_covered,
            "deviations_from_a_real_cluster": self.deviations,
            **self.extra,
        }
        temporary = self.path.with_suffix(".json.new")
        temporary.write_text(json.dumps(body, indent=2, sort_keys=False, default=str) + "\n")
        temporary.replace(self.path)

    def run(self, name: str, check: Callable[[], Obj], *, needs: tuple[str, ...] = ()) -> bool:
        """Runs one check and records it: passed with its evidence, failed with the error (and
        the evidence gathered before it), or skipped when a check it needs did not pass."""
        failed_needs = [n for n in needs if not self.passed(n)]
        if failed_needs:
            self.checks.append({"name": name, "status": "skipped", "reason": f"needs {failed_needs}"})
            self.write()
            return False
        started = time.monotonic()
        entry: Obj = {"name": name}
        try:
            entry["evidence"] = check()
            entry["status"] = "passed"
        except CheckFailed as exc:
            entry["status"] = "failed"
            entry["error"] = str(exc)
        except Exception as exc:  # a crash is a failed check, with its traceback
            entry["status"] = "failed"
            entry["error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc(limit=8)
        entry["seconds"] = round(time.monotonic() - started, 1)
        self.checks.append(entry)
        self.write()
        return bool(entry["status"] == "passed")

    def passed(self, name: str) -> bool:
        return any(c["name"] == name and c["status"] == "passed" for c in self.checks)


def docs(text: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]


def walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def arg_value(args: list[str], flag: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def chart_secrets() -> dict[str, dict[str, str]]:
    """The run's own random credentials, in the Secrets the chart names (existingSecret), by
    Secret and key."""
    return {
        "redis": {"redis-password": secrets.token_hex(24)},
        "agora-console-api-token": {"token": secrets.token_hex(32)},
        "agora-escalation-token": {"token": secrets.token_hex(32)},
    }


class Scenario:
    def __init__(self, plane: ControlPlane, dapr: Dapr, report: Report) -> None:
        self.plane = plane
        self.dapr = dapr
        self.report = report
        self.kube: Kube = plane.kube
        self.secret_values = chart_secrets()
        self.install_sets = [
            "escalationToken.existingSecret=agora-escalation-token",
            # An agent app beside the services: its Deployment, injection, Configuration and
            # scopes go through the same checks.
            f"agentApps[0].name={AGENT_APP}",
            "agentApps[0].agentsFile=/opt/agora/examples/agents/calculator.py",
        ]
        self.rendered: list[Obj] = []
        self.before_upgrade: dict[str, Obj] = {}
        self.first_templates: dict[str, Obj] = {}

    # -- helpers -------------------------------------------------------------------------------

    def helm(self, *args: str, timeout: float = 600) -> tuple[int, str, str]:
        done = self.plane.helm(*args, timeout=timeout)
        return done.returncode, done.stdout, done.stderr

    def sets(self, values: list[str] | tuple[str, ...], flag: str = "--set") -> list[str]:
        return [arg for value in values for arg in (flag, value)]

    def release_objects(self) -> list[Obj]:
        code, out, err = self.helm("get", "manifest", RELEASE, "--namespace", NAMESPACE)
        expect(code == 0, f"helm get manifest: {err}")
        return docs(out)

    def deployments(self) -> dict[str, Obj]:
        found = self.kube.items(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", labelSelector=INSTANCE)
        return {d["metadata"]["name"]: d for d in found}

    def owned(self, kind_path: str, owner_uid: str) -> list[Obj]:
        return [
            o
            for o in self.kube.items(kind_path)
            if any(ref["uid"] == owner_uid for ref in o["metadata"].get("ownerReferences") or [])
        ]

    def current_replica_set(self, deployment: Obj) -> Obj | None:
        revision = deployment["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision")
        for rs in self.owned(
            f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets", deployment["metadata"]["uid"]
        ):
            if rs["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision") == revision:
                return rs
        return None

    def rollout_state(self) -> dict[str, Obj]:
        """Per Deployment: generation, template and its current ReplicaSet (name, hash)."""
        state: dict[str, Obj] = {}
        for name, deployment in self.deployments().items():
            rs = self.current_replica_set(deployment)
            state[name] = {
                "generation": deployment["metadata"]["generation"],
                "template": deployment["spec"]["template"],
                "replica_set": rs["metadata"]["name"] if rs else None,
                "pod_template_hash": (rs or {})
                .get("metadata", {})
                .get("labels", {})
                .get("pod-template-hash"),
            }
        return state

    def settled(self, deployment: Obj) -> bool:
        status, spec = deployment.get("status", {}), deployment["spec"]
        replicas = spec.get("replicas", 1)
        return bool(
            status.get("observedGeneration") == deployment["metadata"]["generation"]
            and status.get("updatedReplicas", 0) == replicas
            and status.get("readyReplicas", 0) == replicas
            and status.get("replicas", 0) == replicas
        )

    def wait_settled(self, timeout: float = 180) -> None:
        def all_settled() -> bool:
            deployments = self.deployments()
            if not deployments or not all(self.settled(d) for d in deployments.values()):
                return False
            # No pod of an old ReplicaSet left (kwok deletes a terminating pod at once).
            for deployment in deployments.values():
                rs = self.current_replica_set(deployment)
                if rs is None:
                    return False
                pods = self.kube.items(
                    f"/api/v1/namespaces/{NAMESPACE}/pods",
                    labelSelector=",".join(
                        f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items()
                    ),
                )
                if any(
                    p["metadata"]["labels"].get("pod-template-hash")
                    != rs["metadata"]["labels"]["pod-template-hash"]
                    for p in pods
                ):
                    return False
            return True

        self.kube.wait_for("every Deployment rolled out", all_settled, timeout, interval=1.0)

    # -- the checks ----------------------------------------------------------------------------

    def lint(self) -> Obj:
        code, out, err = self.helm("lint", "--strict", str(CHART))
        expect(code == 0, f"helm lint --strict failed:\n{out}{err}")
        expect("0 chart(s) failed" in out, out)
        expect("[WARNING]" not in out and "[ERROR]" not in out, out)
        return {"command": "helm lint --strict deploy/helm/agora", "output": out.strip().splitlines()}

    def create_secrets(self) -> Obj:
        self.kube.call(
            "POST",
            "/api/v1/namespaces",
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
        # Pods without an account of their own (the chart's test hook) need the namespace's default.
        self.kube.wait_for(
            "the namespace's default ServiceAccount",
            lambda: self.kube.get(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"),
            timeout=60,
        )
        for name, data in self.secret_values.items():
            self.kube.call(
                "POST",
                f"/api/v1/namespaces/{NAMESPACE}/secrets",
                body={
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": name},
                    "type": "Opaque",
                    "stringData": data,
                },
            )
        return {
            "namespace": NAMESPACE,
            "secrets": {name: sorted(data) for name, data in self.secret_values.items()},
            "values": "random per run (secrets.token_hex), never written to the report",
        }

    def dry_run(self) -> Obj:
        sets = self.sets(self.install_sets)
        code, out, err = self.helm(
            "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=server", *sets
        )
        expect(code == 0, f"helm install --dry-run=server failed: {err}")
        code, out, err = self.helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *sets)
        expect(code == 0, f"helm template failed: {err}")
        self.rendered = docs(out)
        # Helm's server dry run renders with the cluster's capabilities; the API server's own
        # dry run of every object (strict field validation: an unknown field is an error, not a
        # warning) runs its validation, Dapr's CRD schemas and the admission chain.
        accepted: list[str] = []
        refused: list[str] = []
        warnings: list[str] = []
        for obj in self.rendered:
            response = self.kube.request(
                "POST",
                self.kube.collection_of(obj, NAMESPACE),
                body=obj,
                params={"dryRun": "All", "fieldValidation": "Strict"},
            )
            label = f"{obj['kind']}/{obj['metadata']['name']}"
            if response.status_code in (200, 201):
                accepted.append(label)
            else:
                refused.append(
                    f"{label}: {response.status_code} {response.json().get('message', response.text)}"
                )
            warnings += [f"{label}: {w}" for w in response.headers.get_list("warning")]
        expect(not refused, f"the API server refused: {refused}")
        expect(not warnings, f"the API server warned: {warnings}")
        # The CRD schema is live: a malformed Component is refused with a message naming the field.
        bad = {
            "apiVersion": "dapr.io/v1alpha1",
            "kind": "Component",
            "metadata": {"name": "schema-probe", "namespace": NAMESPACE},
            "spec": {"type": "state.redis", "version": "v1", "metadata": "not-a-list"},
        }
        response = self.kube.request(
            "POST",
            f"/apis/dapr.io/v1alpha1/namespaces/{NAMESPACE}/components",
            body=bad,
            params={"dryRun": "All", "fieldValidation": "Strict"},
        )
        expect(response.status_code == 422, f"a malformed Component was not refused: {response.status_code}")
        probe = response.json().get("message", "")
        expect("spec.metadata" in probe, probe)
        return {
            "helm": "helm install --dry-run=server: exit 0",
            "server_dry_run_strict": {"accepted": accepted, "count": len(accepted)},
            "crd_schema_refuses_malformed_component": probe,
        }

    def install(self) -> Obj:
        started = time.monotonic()
        code, out, err = self.helm(
            "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace",
            *self.sets(self.install_sets), "--wait", "--timeout", "5m",
        )  # fmt: skip
        expect(code == 0, f"helm install failed: {err}")
        seconds = round(time.monotonic() - started, 1)
        self.plane.timings["helm install agora --wait"] = seconds
        self.wait_settled()
        state = self.rollout_state()
        self.first_templates = {name: s["template"] for name, s in state.items()}
        status = re.search(r"STATUS: (\S+)", out)
        warnings = [
            line.split("Warning: ", 1)[1].replace('\\"', '"').removesuffix('"')
            for line in err.splitlines()
            if "Warning: " in line
        ]
        return {
            "api_server_warnings": warnings,
            "command": "helm install agora deploy/helm/agora --namespace agora --create-namespace "
            + " ".join(self.sets(self.install_sets))
            + " --wait",
            "seconds": seconds,
            "status": status.group(1) if status else out.strip().splitlines()[:3],
            "objects": sorted(f"{o['kind']}/{o['metadata']['name']}" for o in self.release_objects()),
        }

    def workloads_and_injection(self) -> Obj:
        trust_anchors = self.dapr.trust_anchors().strip()
        expect(trust_anchors, "no trust anchors in dapr-trust-bundle")
        manifest = [o for o in self.release_objects() if o["kind"] == "Deployment"]
        deployments = self.deployments()
        expect(
            sorted(deployments) == sorted(o["metadata"]["name"] for o in manifest),
            f"Deployments {sorted(deployments)} are not the release's",
        )
        evidence: Obj = {}
        for name, deployment in sorted(deployments.items()):
            rs = self.current_replica_set(deployment)
            expect(rs is not None, f"{name}: no ReplicaSet")
            assert rs is not None
            pods = self.owned(f"/api/v1/namespaces/{NAMESPACE}/pods", rs["metadata"]["uid"])
            replicas = deployment["spec"].get("replicas", 1)
            expect(len(pods) == replicas, f"{name}: {len(pods)} pods, {replicas} wanted")
            template = deployment["spec"]["template"]
            annotations = template["metadata"].get("annotations") or {}
            dapr_enabled = annotations.get("dapr.io/enabled") == "true"
            entry: Obj = {"replica_set": rs["metadata"]["name"], "pods": []}
            for pod in pods:
                status = pod["status"]
                ready = any(
                    c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
                )
                expect(
                    ready and status.get("phase") == "Running",
                    f"{pod['metadata']['name']} is not Running/Ready",
                )
                expect(
                    pod_ip_in_cidr(status.get("podIP", "")),
                    f"{pod['metadata']['name']}: IP {status.get('podIP')}",
                )
                expect(
                    pod["spec"].get("nodeName") == NODE_NAME,
                    f"{pod['metadata']['name']} is not on {NODE_NAME}",
                )
                containers = {c["name"]: c for c in pod["spec"]["containers"]}
                pod_entry: Obj = {
                    "name": pod["metadata"]["name"],
                    "ip": status["podIP"],
                    "containers": sorted(containers),
                }
                if not dapr_enabled:
                    expect("daprd" not in containers, f"{name} is not a Dapr app but got a daprd container")
                    entry["pods"].append(pod_entry)
                    continue
                expect("daprd" in containers, f"{pod['metadata']['name']}: no daprd container (not injected)")
                daprd = containers["daprd"]
                args = [*daprd.get("command", []), *daprd.get("args", [])]
                wanted = {
                    "--app-id": annotations["dapr.io/app-id"],
                    "--config": annotations["dapr.io/config"],
                    "--app-port": annotations.get("dapr.io/app-port"),
                    "--log-level": annotations.get("dapr.io/log-level"),
                    "--max-body-size": annotations.get("dapr.io/max-body-size"),
                    "--app-channel-address": annotations.get("dapr.io/app-channel-address"),
                    "--dapr-graceful-shutdown-seconds": annotations.get("dapr.io/graceful-shutdown-seconds"),
                }
                if "dapr.io/sidecar-listen-addresses" in annotations:
                    wanted["--dapr-listen-addresses"] = annotations["dapr.io/sidecar-listen-addresses"]
                got = {flag: arg_value(args, flag) for flag in wanted}
                expect(got == wanted, f"{pod['metadata']['name']}: daprd has {got}, the chart set {wanted}")
                expect("--disable-builtin-k8s-secret-store" in args, f"{pod['metadata']['name']}: {args}")
                expect(arg_value(args, "--mode") == "kubernetes", f"{pod['metadata']['name']}: {args}")
                resources = daprd.get("resources", {})
                sidecar = {
                    "requests.cpu": resources.get("requests", {}).get("cpu"),
                    "limits.memory": resources.get("limits", {}).get("memory"),
                }
                expect(
                    sidecar
                    == {
                        "requests.cpu": annotations["dapr.io/sidecar-cpu-request"],
                        "limits.memory": annotations["dapr.io/sidecar-memory-limit"],
                    },
                    f"{pod['metadata']['name']}: daprd resources {resources}",
                )
                env = {e["name"]: e for e in daprd.get("env") or []}
                anchors = str(env.get("DAPR_TRUST_ANCHORS", {}).get("value", "")).strip()
                expect(
                    anchors == trust_anchors,
                    f"{pod['metadata']['name']}: DAPR_TRUST_ANCHORS is not sentry's root",
                )
                if "dapr.io/api-token-secret" in annotations:
                    token = env.get("DAPR_API_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef")
                    expect(
                        token == {"name": annotations["dapr.io/api-token-secret"], "key": "token"},
                        f"{pod['metadata']['name']}: DAPR_API_TOKEN is {env.get('DAPR_API_TOKEN')}",
                    )
                pod_entry["daprd"] = {
                    "image": daprd.get("image"),
                    **{flag: value for flag, value in got.items() if value is not None},
                    "sentry_address": arg_value(args, "--sentry-address"),
                    "resources": sidecar,
                    "trust_anchors_are_sentrys": True,
                }
                entry["pods"].append(pod_entry)
            evidence[name] = entry
        injected = sum(1 for e in evidence.values() for p in e["pods"] if "daprd" in p)
        # The injector's own account of the admission requests the API server sent it.
        injector = self.dapr.injector
        log = injector.process.log_path.read_text(errors="replace") if injector and injector.process else ""
        by_app = Counter(re.findall(r"succeeded injection for app '([^']+)'", log))
        apps: set[str] = {
            str(annotations["dapr.io/app-id"])
            for d in deployments.values()
            if "dapr.io/app-id" in (annotations := d["spec"]["template"]["metadata"].get("annotations") or {})
        }
        expect(apps <= set(by_app), f"the injector's log has no injection for {sorted(apps - set(by_app))}")
        # The API server called the webhook at the injector's pod IP (aggregator routing), not at
        # the Service's cluster IP, where the proxy counts every connection.
        proxy = self.plane.proxy
        assert proxy is not None
        via_cluster_ip = {
            f"{ip}:{port}": proxy.connections.get((ip, port), 0)
            for (ip, port), name in proxy.names.items()
            if name == f"{DAPR_NAMESPACE}/dapr-sidecar-injector"
        }
        expect(
            not any(via_cluster_ip.values()),
            f"the injector's cluster IP carried connections: {via_cluster_ip}",
        )
        return {
            "webhook_called_at": f"{injector.ip if injector else '?'}:4000, the injector pod's IP",
            "injector_cluster_ip_connections": via_cluster_ip,
            "deployments": evidence,
            "pods_with_injected_daprd": injected,
            "injector_log_successful_injections": dict(sorted(by_app.items())),
        }

    def operator_services(self) -> Obj:
        """Dapr's operator gives every Dapr app a `<app-id>-dapr` Service (its service reconciler)."""
        apps = {
            d["spec"]["template"]["metadata"]["annotations"]["dapr.io/app-id"]: name
            for name, d in self.deployments().items()
            if (d["spec"]["template"]["metadata"].get("annotations") or {}).get("dapr.io/enabled") == "true"
        }

        def all_there() -> dict[str, str] | None:
            services = {
                s["metadata"]["name"]: s for s in self.kube.items(f"/api/v1/namespaces/{NAMESPACE}/services")
            }
            found = {app: f"{app}-dapr" for app in apps if f"{app}-dapr" in services}
            return found if len(found) == len(apps) else None

        found: dict[str, str] = self.kube.wait_for(
            "the operator's <app-id>-dapr Services", all_there, timeout=60
        )
        return {"services": found}

    def components(self) -> Obj:
        rendered = {o["metadata"]["name"]: o for o in self.release_objects() if o["kind"] == "Component"}
        expect(rendered, "the release has no Component")
        evidence: Obj = {}
        for name, component in sorted(rendered.items()):
            live = self.kube.get(f"/apis/dapr.io/v1alpha1/namespaces/{NAMESPACE}/components/{name}")
            expect(live is not None, f"Component {name} is not in the API server")
            assert live is not None
            expect(live.get("scopes"), f"Component {name} is not scoped")
            expect(live.get("scopes") == component.get("scopes"), f"{name}: scopes {live.get('scopes')}")
            expect(live["spec"]["type"] == component["spec"]["type"], f"{name}: type {live['spec']['type']}")
            expect(live.get("auth") == {"secretStore": "kubernetes"}, f"{name}: auth {live.get('auth')}")
            secret_refs = [
                f"{item['name']} <- {item['secretKeyRef']['name']}/{item['secretKeyRef']['key']}"
                for item in live["spec"].get("metadata") or []
                if "secretKeyRef" in item
            ]
            evidence[name] = {
                "type": live["spec"]["type"],
                "scopes": live["scopes"],
                "secret_refs": secret_refs,
            }
        expect(
            AGENT_APP in evidence.get("agora-pubsub", {}).get("scopes", []),
            f"the agent app {AGENT_APP} is not in agora-pubsub's scopes",
        )
        return {"components": evidence}

    def no_secret_values(self) -> Obj:
        needles: dict[str, str] = {}
        for name, data in self.secret_values.items():
            for key, value in data.items():
                needles[f"{name}/{key}"] = value
                needles[f"{name}/{key} (base64)"] = base64.b64encode(value.encode()).decode()
        searched: dict[str, int] = {}

        def search(where: str, text: str) -> None:
            searched[where] = len(text)
            found = [label for label, needle in needles.items() if needle in text]
            expect(not found, f"{where} holds the value of {found}")

        code, out, err = self.helm("get", "all", RELEASE, "--namespace", NAMESPACE)
        expect(code == 0, err)
        search("helm get all (manifest, hooks, values, notes)", out)
        code, out, err = self.helm(
            "get", "values", RELEASE, "--namespace", NAMESPACE, "--all", "--output", "json"
        )
        expect(code == 0, err)
        search("helm get values --all", out)
        # The release as Helm stores it: Secrets sh.helm.release.v1.<release>.v<n>, whose
        # `release` is base64 (over the API's own base64) of a gzipped JSON.
        releases = self.kube.items(
            f"/api/v1/namespaces/{NAMESPACE}/secrets", labelSelector=f"owner=helm,name={RELEASE}"
        )
        expect(releases, "no Helm release Secret found")
        for stored in releases:
            payload = gzip.decompress(base64.b64decode(base64.b64decode(stored["data"]["release"])))
            search(f"Secret/{stored['metadata']['name']} (decoded)", payload.decode())
        # Every live object of the release, and every pod its Deployments made (as injected).
        objects = 0
        for obj in self.release_objects():
            live = self.kube.get(self.kube.path_of(obj, NAMESPACE))
            expect(live is not None, f"{obj['kind']}/{obj['metadata']['name']} is missing")
            search(f"{obj['kind']}/{obj['metadata']['name']}", json.dumps(live))
            objects += 1
        pods = self.kube.items(f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector=INSTANCE)
        for pod in pods:
            search(f"Pod/{pod['metadata']['name']}", json.dumps(pod))
        return {
            "secret_values_searched_for": sorted(needles),
            "places_searched": len(searched),
            "release_objects": objects,
            "pods": len(pods),
            "release_secrets_decoded": [s["metadata"]["name"] for s in releases],
        }

    def upgrade(self) -> Obj:
        self.before_upgrade = self.rollout_state()
        target = f"{self.plane_fullname()}-{UPGRADED_SERVICE}"
        code, _, err = self.helm(
            "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values",
            "--set", UPGRADE_SETS[0], "--set-string", UPGRADE_SETS[1], "--wait", "--timeout", "5m",
        )  # fmt: skip
        expect(code == 0, f"helm upgrade failed: {err}")
        self.wait_settled()
        after = self.rollout_state()
        changed = sorted(n for n in after if after[n]["template"] != self.before_upgrade[n]["template"])
        rolled = sorted(
            n for n in after if after[n]["pod_template_hash"] != self.before_upgrade[n]["pod_template_hash"]
        )
        bumped = sorted(n for n in after if after[n]["generation"] != self.before_upgrade[n]["generation"])
        expect(changed == [target], f"templates changed: {changed}, expected only {target}")
        expect(rolled == [target], f"new ReplicaSets for {rolled}, expected only {target}")
        expect(bumped == [target], f"generations changed: {bumped}, expected only {target}")
        deployment = self.deployments()[target]
        rs = self.current_replica_set(deployment)
        assert rs is not None
        pods = self.owned(f"/api/v1/namespaces/{NAMESPACE}/pods", rs["metadata"]["uid"])
        expect(pods, f"{target}: no pod of the new ReplicaSet")
        app = next(c for c in pods[0]["spec"]["containers"] if c["name"] == UPGRADED_SERVICE)
        env = {e["name"]: e.get("value") for e in app.get("env") or []}
        expect(env.get("AGORA_MAX_IN_FLIGHT") == "8", f"{target}'s new pod has env {env}")
        expect("daprd" in {c["name"] for c in pods[0]["spec"]["containers"]}, "the new pod was not injected")
        old_rs = self.kube.get(
            f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets/{self.before_upgrade[target]['replica_set']}"
        )
        expect(
            old_rs is not None and old_rs["spec"]["replicas"] == 0, "the old ReplicaSet was not scaled down"
        )
        return {
            "change": " ".join(UPGRADE_SETS),
            "rolled": {
                target: {
                    "pod_template_hash": [
                        self.before_upgrade[target]["pod_template_hash"],
                        after[target]["pod_template_hash"],
                    ],
                    "replica_set": [self.before_upgrade[target]["replica_set"], after[target]["replica_set"]],
                    "new_pod": pods[0]["metadata"]["name"],
                    "new_pod_env_AGORA_MAX_IN_FLIGHT": env.get("AGORA_MAX_IN_FLIGHT"),
                }
            },
            "unchanged": sorted(n for n in after if n != target),
        }

    def rollback(self) -> Obj:
        target = f"{self.plane_fullname()}-{UPGRADED_SERVICE}"
        code, out, err = self.helm(
            "rollback", RELEASE, "1", "--namespace", NAMESPACE, "--wait", "--timeout", "5m"
        )
        expect(code == 0, f"helm rollback failed: {err}")
        self.wait_settled()
        after = self.rollout_state()
        differs = sorted(n for n in after if after[n]["template"] != self.first_templates.get(n))
        expect(not differs, f"after the rollback these templates differ from the first install's: {differs}")
        expect(
            after[target]["pod_template_hash"] == self.before_upgrade[target]["pod_template_hash"],
            f"{target} did not return to its first ReplicaSet",
        )
        code, out, err = self.helm("history", RELEASE, "--namespace", NAMESPACE, "--output", "json")
        expect(code == 0, err)
        history = [
            {"revision": h["revision"], "status": h["status"], "description": h["description"]}
            for h in json.loads(out)
        ]
        expect(history[-1]["description"] == "Rollback to 1", f"history: {history}")
        return {
            "target_back_on": after[target]["replica_set"],
            "pod_template_hash": after[target]["pod_template_hash"],
            "history": history,
        }

    def bad_values(self) -> Obj:
        history_before = self.helm("history", RELEASE, "--namespace", NAMESPACE, "--output", "json")[1]
        generations = {n: s["generation"] for n, s in self.rollout_state().items()}
        cases = {
            "services.allocator.replicaCount=-1": ("replicaCount", "minimum"),
            "services.allocator.replicaCont=2": ("replicaCont", "additional properties"),
        }
        evidence: Obj = {}
        for value, fragments in cases.items():
            code, _, err = self.helm(
                "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values", "--set", value
            )
            expect(code != 0, f"helm upgrade --set {value} was accepted")
            expect(SCHEMA_REFUSAL in err, f"--set {value}: not the schema's refusal: {err}")
            for fragment in ("services", "allocator", *fragments):
                expect(fragment in err, f"--set {value}: {fragment!r} not in {err}")
            evidence[value] = err.strip()
        history_after = self.helm("history", RELEASE, "--namespace", NAMESPACE, "--output", "json")[1]
        expect(
            json.loads(history_after) == json.loads(history_before), "a refused upgrade changed the release"
        )
        after = {n: s["generation"] for n, s in self.rollout_state().items()}
        expect(after == generations, "a refused upgrade changed a Deployment")
        return {"refusals": evidence, "release_unchanged": True}

    def uninstall(self) -> Obj:
        manifest = self.release_objects()
        kinds = sorted({(o["apiVersion"], o["kind"]) for o in manifest})
        cluster_scoped = [f"{v} {k}" for v, k in kinds if not self.kube.resource(v, k).namespaced]
        code, out, err = self.helm(
            "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "5m"
        )
        expect(code == 0, f"helm uninstall failed: {err}")
        ours = {f"{name}" for name in self.secret_values} | {"default", "kube-root-ca.crt"}

        def leftovers() -> list[str]:
            """Every object in the namespace of every listable namespaced kind, but the Secrets the
            test made, the namespace's default ServiceAccount and CA ConfigMap, and Events."""
            left: list[str] = []
            for collection in self.namespaced_kinds():
                for obj in self.kube.items(collection):
                    name = obj["metadata"]["name"]
                    kind = collection.rsplit("/", 1)[1]
                    if kind == "events" or (
                        kind in {"secrets", "serviceaccounts", "configmaps"} and name in ours
                    ):
                        continue
                    left.append(f"{kind}/{name}")
            for api_version, kind in kinds:
                resource = self.kube.resource(api_version, kind)
                if not resource.namespaced:
                    left += [
                        f"{kind}/{o['metadata']['name']}"
                        for o in self.kube.items(resource.path(), labelSelector=INSTANCE)
                    ]
            return left

        deadline = time.monotonic() + 120
        left = leftovers()
        while left and time.monotonic() < deadline:
            time.sleep(1)
            left = leftovers()
        expect(not left, f"left behind after helm uninstall: {left}")
        return {
            "helm": out.strip(),
            "kinds_the_chart_renders": [f"{v} {k}" for v, k in kinds],
            "cluster_scoped_kinds": cluster_scoped,
            "namespaced_kinds_listed": len(self.namespaced_kinds()),
            "left_in_namespace": (
                "only the test's Secrets, the default ServiceAccount, kube-root-ca.crt and Events"
            ),
        }

    def namespaced_kinds(self) -> list[str]:
        """The collection path in NAMESPACE of every namespaced kind that can be listed."""
        paths: list[str] = []
        groups = self.kube.call("GET", "/apis")["groups"]
        prefixes = ["/api/v1"] + [f"/apis/{g['preferredVersion']['groupVersion']}" for g in groups]
        for prefix in prefixes:
            for entry in self.kube.call("GET", prefix)["resources"]:
                if entry["namespaced"] and "/" not in entry["name"] and "list" in entry.get("verbs", []):
                    paths.append(f"{prefix}/namespaces/{NAMESPACE}/{entry['name']}")
        return paths

    def processes_stayed_up(self) -> Obj:
        dead = self.plane.stopped()
        expect(not dead, f"stopped during the run: {dead}")
        return {"running": [p.name for p in self.plane.processes] + [p.name for p in self.plane.pods]}

    def plane_fullname(self) -> str:
        return RELEASE  # the release name contains the chart's name: objects are "agora-<part>"

    def run(self) -> None:
        for name, check, needs in (
            (LINT, self.lint, ()),
            (SECRETS, self.create_secrets, ()),
            (DRY_RUN, self.dry_run, (SECRETS,)),
            (INSTALL, self.install, (SECRETS,)),
            (INJECTION, self.workloads_and_injection, (INSTALL,)),
            (OPERATOR, self.operator_services, (INSTALL,)),
            (COMPONENTS, self.components, (INSTALL,)),
            (NO_SECRETS, self.no_secret_values, (INSTALL,)),
            (UPGRADE, self.upgrade, (INSTALL,)),
            (ROLLBACK, self.rollback, (UPGRADE,)),
            (BAD_VALUES, self.bad_values, (INSTALL,)),
            (PROCESSES, self.processes_stayed_up, ()),
            (UNINSTALL, self.uninstall, (INSTALL,)),
        ):
            self.report.run(name, check, needs=needs)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    workdir = Path(argv[1]).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    report = Report(workdir / "report.json")
    tools = KubeTools.from_environment()
    missing = tools.missing()
    report.extra["versions"] = {
        k: v for k, v in tools.versions.items() if k.endswith("_VERSION") or k.endswith("_BUILD")
    }
    if missing:
        report.extra["error"] = f"missing (build them with `make kube`): {missing}"
        report.write()
        return 2
    plane = ControlPlane(workdir, tools)
    code = 1
    try:
        plane.start()
        report.extra["network_namespace"] = {
            "interfaces": interfaces(),
            "lo_addresses_at_start": loopback_addresses(),
            "apiserver": f"https://{APISERVER_IP}:443",
            "pod_cidr": POD_CIDR,
        }
        dapr = Dapr(plane)
        report.extra["dapr"] = dapr.install()
        report.extra["dapr"]["namespace"] = DAPR_NAMESPACE
        Scenario(plane, dapr, report).run()
        report.extra["network_namespace"]["lo_addresses_at_end"] = loopback_addresses()
        report.extra["service_proxy_at_end"] = plane.proxy.table() if plane.proxy else {}
        code = 0 if all(c["status"] == "passed" for c in report.checks) else 1
    except (Exception, KeyboardInterrupt) as exc:
        report.extra["error"] = f"{type(exc).__name__}: {exc}"
        report.extra["traceback"] = traceback.format_exc(limit=12)
        report.extra["log_tails"] = {
            **{p.name: p.log_tail(15) for p in plane.processes},
            **{p.name: p.log_tail(15) for p in plane.pods},
        }
        code = 2 if not report.checks else 1
    finally:
        report.extra["timings_seconds"] = plane.timings
        report.write()
        plane.stop()
    print(f"report: {report.path} ({'passed' if code == 0 else 'failed'})", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
