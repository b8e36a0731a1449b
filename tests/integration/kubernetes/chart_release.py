"""What the API server, Dapr's injector and operator, and Helm make of the Agora chart on the node:
the checks of the release's objects that need no traffic (agora_on_node.py runs them around the
install, and the checks that send tasks through the running system).
"""

from __future__ import annotations

import base64
import gzip
import ipaddress
import json
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import yaml

from tests.integration.kubernetes.control_plane import REPO, Kube, Obj
from tests.integration.kubernetes.node import NODE_NAME, NODE_POD_CIDR
from tests.integration.kubernetes.report import CheckFailed, expect

CHART = REPO / "deploy" / "helm" / "agora"
NAMESPACE = "agora"
RELEASE = "agora"
INSTANCE = f"app.kubernetes.io/instance={RELEASE}"
DAPR_NAMESPACE = "dapr-system"
# The value the one-service upgrade changes: one service's environment.
UPGRADED_SERVICE = "allocator"
UPGRADE_SETS = (
    f"services.{UPGRADED_SERVICE}.env[0].name=AGORA_MAX_IN_FLIGHT",
    f"services.{UPGRADED_SERVICE}.env[0].value=8",
)
SCHEMA_REFUSAL = "values don't meet the specifications of the schema"

LINT = "helm lint --strict"
DRY_RUN = "helm install --dry-run=server, and the API server's strict dry run of every rendered object"
INJECTION = (
    "each Dapr pod of the release has a daprd container injected by Dapr's injector with the "
    "chart's --app-id, --app-port, --config and resources, and sentry's trust anchors"
)
OPERATOR = "Dapr's operator made each app's <app-id>-dapr Service"
COMPONENTS = "every Component is accepted by the API server (Dapr's CRD schema) and scoped"
NO_SECRETS = "no Secret value in any manifest, value or object of the release"
ONE_SERVICE_UPGRADE = "helm upgrade of one service's env rolls that Deployment only"
ROLLBACK = "helm rollback to the first revision restores every Deployment's template"
BAD_VALUES = (
    "bad values (replicaCount=-1, a misspelt key) refused with the schema's message, release unchanged"
)

Helm = Callable[..., subprocess.CompletedProcess[str]]


def rendered(text: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]


def arg_value(args: list[str], flag: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def in_pod_cidr(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip) in ipaddress.ip_network(NODE_POD_CIDR)
    except ValueError:
        return False


class ChartRelease:
    """The release's objects as the cluster holds them. `helm` runs Helm in NAMESPACE; `sets`
    gives the install's --set values."""

    def __init__(
        self, kube: Kube, helm: Helm, secret_values: dict[str, dict[str, str]], sets: Callable[[], list[str]]
    ) -> None:
        self.kube = kube
        self.helm = helm
        self.secret_values = secret_values
        self.sets = sets
        self.first_templates: dict[str, Obj] = {}
        self.before_upgrade: dict[str, Obj] = {}

    # -- helpers -------------------------------------------------------------------------------

    def set_args(self) -> list[str]:
        return [arg for value in self.sets() for arg in ("--set", value)]

    def objects(self) -> list[Obj]:
        done = self.helm("get", "manifest", RELEASE)
        expect(done.returncode == 0, f"helm get manifest: {done.stderr}")
        return rendered(done.stdout)

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
                "pod_template_hash": (
                    (rs or {}).get("metadata", {}).get("labels", {}).get("pod-template-hash")
                ),
            }
        return state

    def wait_rolled_out(self, timeout: float = 300) -> None:
        def settled(deployment: Obj) -> bool:
            status, replicas = deployment.get("status", {}), deployment["spec"].get("replicas", 1)
            return bool(
                status.get("observedGeneration") == deployment["metadata"]["generation"]
                and status.get("updatedReplicas", 0) == replicas
                and status.get("readyReplicas", 0) == replicas
                and status.get("replicas", 0) == replicas
            )

        self.kube.wait_for(
            "every Deployment rolled out",
            lambda: all(settled(d) for d in self.deployments().values()),
            timeout,
            interval=1.0,
        )

    def remember_first_install(self) -> None:
        self.first_templates = {name: s["template"] for name, s in self.rollout_state().items()}

    # -- before the install --------------------------------------------------------------------

    def lint(self) -> Obj:
        done = self.helm("lint", "--strict", str(CHART))
        out = done.stdout + done.stderr
        expect(done.returncode == 0, f"helm lint --strict failed:\n{out}")
        expect("0 chart(s) failed" in out, out)
        expect("[WARNING]" not in out and "[ERROR]" not in out, out)
        return {"command": "helm lint --strict deploy/helm/agora", "output": done.stdout.strip().splitlines()}

    def dry_run(self) -> Obj:
        done = self.helm("install", RELEASE, str(CHART), "--dry-run=server", *self.set_args())
        expect(done.returncode == 0, f"helm install --dry-run=server failed: {done.stderr}")
        done = self.helm("template", RELEASE, str(CHART), *self.set_args())
        expect(done.returncode == 0, f"helm template failed: {done.stderr}")
        # Helm's server dry run renders with the cluster's capabilities; the API server's own
        # dry run of every object (strict field validation: an unknown field is an error, not a
        # warning) runs its validation, Dapr's CRD schemas and the admission chain.
        accepted: list[str] = []
        refused: list[str] = []
        warnings: list[str] = []
        for obj in rendered(done.stdout):
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

    # -- after the install ---------------------------------------------------------------------

    def injection(self) -> Obj:
        bundle = self.kube.get(f"/api/v1/namespaces/{DAPR_NAMESPACE}/configmaps/dapr-trust-bundle") or {}
        trust_anchors = str(bundle.get("data", {}).get("ca.crt", "")).strip()
        expect(trust_anchors, "no trust anchors in dapr-trust-bundle")
        deployments = self.deployments()
        manifest = sorted(o["metadata"]["name"] for o in self.objects() if o["kind"] == "Deployment")
        expect(sorted(deployments) == manifest, f"Deployments {sorted(deployments)} are not the release's")
        evidence: Obj = {}
        for name, deployment in sorted(deployments.items()):
            annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
            rs = self.current_replica_set(deployment)
            expect(rs is not None, f"{name}: no ReplicaSet")
            assert rs is not None
            pods = [
                p
                for p in self.owned(f"/api/v1/namespaces/{NAMESPACE}/pods", rs["metadata"]["uid"])
                if "deletionTimestamp" not in p["metadata"]
            ]
            expect(pods, f"{name}: no pod of its current ReplicaSet")
            evidence[name] = [self.injected(pod, annotations, trust_anchors) for pod in pods]
        # The injector's own account of the admission requests the API server sent it.
        injectors = self.kube.items(
            f"/api/v1/namespaces/{DAPR_NAMESPACE}/pods", labelSelector="app=dapr-sidecar-injector"
        )
        expect(injectors, "no injector pod")
        log = self.kube.http.get(
            f"/api/v1/namespaces/{DAPR_NAMESPACE}/pods/{injectors[0]['metadata']['name']}/log"
        ).text
        by_app = Counter(re.findall(r"succeeded injection for app '([^']+)'", log))
        apps = {
            str(annotations["dapr.io/app-id"])
            for d in deployments.values()
            if "dapr.io/app-id" in (annotations := d["spec"]["template"]["metadata"].get("annotations") or {})
        }
        expect(apps <= set(by_app), f"the injector's log has no injection for {sorted(apps - set(by_app))}")
        return {
            "deployments": evidence,
            "pods_with_injected_daprd": sum(1 for pods in evidence.values() for p in pods if "daprd" in p),
            "injector_log_successful_injections": dict(sorted(by_app.items())),
        }

    @staticmethod
    def injected(pod: Obj, annotations: dict[str, str], trust_anchors: str) -> Obj:
        name, status = pod["metadata"]["name"], pod["status"]
        expect(in_pod_cidr(status.get("podIP", "")), f"{name}: IP {status.get('podIP')}")
        expect(pod["spec"].get("nodeName") == NODE_NAME, f"{name} is not on {NODE_NAME}")
        containers = {c["name"]: c for c in pod["spec"]["containers"]}
        entry: Obj = {"name": name, "ip": status["podIP"], "containers": sorted(containers)}
        if annotations.get("dapr.io/enabled") != "true":
            expect("daprd" not in containers, f"{name} is not a Dapr app but got a daprd container")
            return entry
        expect("daprd" in containers, f"{name}: no daprd container (not injected)")
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
        expect(got == wanted, f"{name}: daprd has {got}, the chart set {wanted}")
        expect("--disable-builtin-k8s-secret-store" in args, f"{name}: {args}")
        expect(arg_value(args, "--mode") == "kubernetes", f"{name}: {args}")
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
            f"{name}: daprd resources {resources}",
        )
        env = {e["name"]: e for e in daprd.get("env") or []}
        anchors = str(env.get("DAPR_TRUST_ANCHORS", {}).get("value", "")).strip()
        expect(anchors == trust_anchors, f"{name}: DAPR_TRUST_ANCHORS is not sentry's root")
        if "dapr.io/api-token-secret" in annotations:
            token = env.get("DAPR_API_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef")
            expect(
                token == {"name": annotations["dapr.io/api-token-secret"], "key": "token"},
                f"{name}: DAPR_API_TOKEN is {env.get('DAPR_API_TOKEN')}",
            )
        entry["daprd"] = {
            "image": daprd.get("image"),
            **{flag: value for flag, value in got.items() if value is not None},
            "sentry_address": arg_value(args, "--sentry-address"),
            "resources": sidecar,
            "trust_anchors_are_sentrys": True,
        }
        return entry

    def operator_services(self) -> Obj:
        """Dapr's operator gives every Dapr app a `<app-id>-dapr` Service (its service reconciler)."""
        apps = {
            d["spec"]["template"]["metadata"]["annotations"]["dapr.io/app-id"]: name
            for name, d in self.deployments().items()
            if (d["spec"]["template"]["metadata"].get("annotations") or {}).get("dapr.io/enabled") == "true"
        }

        def all_there() -> dict[str, str] | None:
            services = {
                s["metadata"]["name"] for s in self.kube.items(f"/api/v1/namespaces/{NAMESPACE}/services")
            }
            found = {app: f"{app}-dapr" for app in apps if f"{app}-dapr" in services}
            return found if len(found) == len(apps) else None

        found: dict[str, str] = self.kube.wait_for(
            "the operator's <app-id>-dapr Services", all_there, timeout=60
        )
        return {"services": found}

    def components(self) -> Obj:
        wanted = {o["metadata"]["name"]: o for o in self.objects() if o["kind"] == "Component"}
        expect(wanted, "the release has no Component")
        evidence: Obj = {}
        for name, component in sorted(wanted.items()):
            live = self.kube.get(f"/apis/dapr.io/v1alpha1/namespaces/{NAMESPACE}/components/{name}")
            expect(live is not None, f"Component {name} is not in the API server")
            assert live is not None
            expect(live.get("scopes"), f"Component {name} is not scoped")
            expect(live.get("scopes") == component.get("scopes"), f"{name}: scopes {live.get('scopes')}")
            expect(live["spec"]["type"] == component["spec"]["type"], f"{name}: type {live['spec']['type']}")
            expect(live.get("auth") == {"secretStore": "kubernetes"}, f"{name}: auth {live.get('auth')}")
            evidence[name] = {
                "type": live["spec"]["type"],
                "scopes": live["scopes"],
                "secret_refs": [
                    f"{item['name']} <- {item['secretKeyRef']['name']}/{item['secretKeyRef']['key']}"
                    for item in live["spec"].get("metadata") or []
                    if "secretKeyRef" in item
                ],
            }
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

        done = self.helm("get", "all", RELEASE)
        expect(done.returncode == 0, done.stderr)
        search("helm get all (manifest, hooks, values, notes)", done.stdout)
        done = self.helm("get", "values", RELEASE, "--all", "--output", "json")
        expect(done.returncode == 0, done.stderr)
        search("helm get values --all", done.stdout)
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
        for obj in self.objects():
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

    def one_service_upgrade(self) -> Obj:
        self.before_upgrade = self.rollout_state()
        target = f"{RELEASE}-{UPGRADED_SERVICE}"
        done = self.helm(
            "upgrade", RELEASE, str(CHART), "--reuse-values", "--set", UPGRADE_SETS[0],
            "--set-string", UPGRADE_SETS[1], "--wait", "--timeout", "5m", timeout=400,
        )  # fmt: skip
        expect(done.returncode == 0, f"helm upgrade failed: {done.stderr}")
        self.wait_rolled_out()
        after = self.rollout_state()
        changed = sorted(n for n in after if after[n]["template"] != self.before_upgrade[n]["template"])
        rolled = sorted(
            n for n in after if after[n]["pod_template_hash"] != self.before_upgrade[n]["pod_template_hash"]
        )
        bumped = sorted(n for n in after if after[n]["generation"] != self.before_upgrade[n]["generation"])
        expect(changed == [target], f"templates changed: {changed}, expected only {target}")
        expect(rolled == [target], f"new ReplicaSets for {rolled}, expected only {target}")
        expect(bumped == [target], f"generations changed: {bumped}, expected only {target}")
        rs = self.current_replica_set(self.deployments()[target])
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
                    "new_pod": pods[0]["metadata"]["name"],
                    "new_pod_env_AGORA_MAX_IN_FLIGHT": env.get("AGORA_MAX_IN_FLIGHT"),
                }
            },
            "unchanged": sorted(n for n in after if n != target),
        }

    def rollback(self) -> Obj:
        target = f"{RELEASE}-{UPGRADED_SERVICE}"
        done = self.helm("rollback", RELEASE, "1", "--wait", "--timeout", "5m", timeout=400)
        expect(done.returncode == 0, f"helm rollback failed: {done.stderr}")
        self.wait_rolled_out()
        after = self.rollout_state()
        differs = sorted(n for n in after if after[n]["template"] != self.first_templates.get(n))
        expect(not differs, f"after the rollback these templates differ from the first install's: {differs}")
        expect(
            after[target]["pod_template_hash"] == self.before_upgrade[target]["pod_template_hash"],
            f"{target} did not return to its first ReplicaSet",
        )
        done = self.helm("history", RELEASE, "--output", "json")
        expect(done.returncode == 0, done.stderr)
        history = [
            {"revision": h["revision"], "status": h["status"], "description": h["description"]}
            for h in json.loads(done.stdout)
        ]
        expect(history[-1]["description"] == "Rollback to 1", f"history: {history}")
        return {"target_back_on": after[target]["replica_set"], "history": history}

    def bad_values(self) -> Obj:
        history_before = self.helm("history", RELEASE, "--output", "json").stdout
        generations = {n: s["generation"] for n, s in self.rollout_state().items()}
        cases = {
            "services.allocator.replicaCount=-1": ("replicaCount", "minimum"),
            "services.allocator.replicaCont=2": ("replicaCont", "additional properties"),
        }
        evidence: Obj = {}
        for value, fragments in cases.items():
            done = self.helm("upgrade", RELEASE, str(CHART), "--reuse-values", "--set", value)
            expect(done.returncode != 0, f"helm upgrade --set {value} was accepted")
            expect(SCHEMA_REFUSAL in done.stderr, f"--set {value}: not the schema's refusal: {done.stderr}")
            for fragment in ("services", "allocator", *fragments):
                expect(fragment in done.stderr, f"--set {value}: {fragment!r} not in {done.stderr}")
            evidence[value] = done.stderr.strip()
        history_after = self.helm("history", RELEASE, "--output", "json").stdout
        expect(
            json.loads(history_after) == json.loads(history_before), "a refused upgrade changed the release"
        )
        after = {n: s["generation"] for n, s in self.rollout_state().items()}
        expect(after == generations, "a refused upgrade changed a Deployment")
        return {"refusals": evidence, "release_unchanged": True}

    # -- after the uninstall -------------------------------------------------------------------

    def kinds(self, manifest: list[Obj]) -> list[tuple[str, str]]:
        return sorted({(o["apiVersion"], o["kind"]) for o in manifest})

    def leftovers(self, kinds: list[tuple[str, str]], kept: Callable[[str, str], bool]) -> list[str]:
        """Every object in NAMESPACE of every listable namespaced kind, and every object of the
        release's cluster-scoped kinds labelled as the release's, but what `kept(kind, name)` says
        the test made itself, and Events."""
        left: list[str] = []
        for collection in self.namespaced_kinds():
            for obj in self.kube.items(collection):
                name, kind = obj["metadata"]["name"], collection.rsplit("/", 1)[1]
                if kind != "events" and not kept(kind, name):
                    left.append(f"{kind}/{name}")
        for api_version, kind in kinds:
            resource = self.kube.resource(api_version, kind)
            if not resource.namespaced:
                left += [
                    f"{kind}/{o['metadata']['name']}"
                    for o in self.kube.items(resource.path(), labelSelector=INSTANCE)
                ]
        return left

    def wait_no_leftovers(
        self, kinds: list[tuple[str, str]], kept: Callable[[str, str], bool], timeout: float = 120
    ) -> Obj:
        deadline = time.monotonic() + timeout
        left = self.leftovers(kinds, kept)
        while left and time.monotonic() < deadline:
            time.sleep(1)
            left = self.leftovers(kinds, kept)
        if left:
            raise CheckFailed(f"left behind after helm uninstall: {left}")
        return {
            "kinds_the_chart_renders": [f"{v} {k}" for v, k in kinds],
            "namespaced_kinds_listed": len(self.namespaced_kinds()),
        }

    def namespaced_kinds(self) -> list[str]:
        """The collection path in NAMESPACE of every namespaced kind that can be listed."""
        paths: list[str] = []
        groups: list[Any] = self.kube.call("GET", "/apis")["groups"]
        prefixes = ["/api/v1"] + [f"/apis/{g['preferredVersion']['groupVersion']}" for g in groups]
        for prefix in prefixes:
            for entry in self.kube.call("GET", prefix)["resources"]:
                if entry["namespaced"] and "/" not in entry["name"] and "list" in entry.get("verbs", []):
                    paths.append(f"{prefix}/namespaces/{NAMESPACE}/{entry['name']}")
        return paths
