"""The Helm chart (deploy/helm/agora), rendered by the pinned helm: every service is a Dapr app
with its annotations, probes and locked-down pod; every Component is scoped as the redis profile
scopes it; the access policies and the resiliency are the repository's own; no credential is
rendered; the values schema refuses wrong values with a message that names them.

Skipped only when the pinned helm (deploy/versions.env HELM_VERSION, built by `make kube` into
$AGORA_CACHE, default ~/.cache/agora) is not there."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.required import cannot_run

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "agora"
COMPONENTS = ROOT / "components"
RELEASE = "agora-test"
FULLNAME = "agora-test"  # the release name already contains the chart's name
NAMESPACE = "agents"
SERVICES = (
    "registry",
    "taskboard",
    "reputation",
    "allocator",
    "worker",
    "escalation",
    "uncertainty",
    "planner",
    "debate",
)
MODEL_USERS = {"allocator", "worker", "uncertainty", "planner", "debate"}
APPS = (*SERVICES, "console")
CREDENTIAL_NAME = re.compile(r"password|passwd|secret|token|api.?key|access.?key|credential|^key$", re.I)

Doc = dict[str, Any]


def _pinned_versions() -> dict[str, str]:
    versions: dict[str, str] = {}
    for line in (ROOT / "deploy" / "versions.env").read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            versions[name.strip()] = value.strip()
    return versions


def _helm_path() -> Path:
    cache = Path(os.environ.get("AGORA_CACHE") or Path.home() / ".cache" / "agora")
    version = _pinned_versions().get("HELM_VERSION")
    if version:
        return cache / f"helm-{version}" / "bin" / "helm"
    built = sorted(cache.glob("helm-*/bin/helm"))
    return built[-1] if built else cache / "helm-<HELM_VERSION>" / "bin" / "helm"


HELM = _helm_path()


@pytest.fixture(scope="module", autouse=True)
def _helm_is_built() -> None:
    if not (HELM.is_file() and os.access(HELM, os.X_OK)):
        cannot_run(f"helm is not built yet ({HELM}; `make kube`)")


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=120, check=False)


def render(*values: str) -> list[Doc]:
    """`helm template` of the chart (test hooks included) with `--set`-style values."""
    sets = [arg for value in values for arg in ("--set", value)]
    done = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *sets)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def refusal(*values: str) -> str:
    """The error of a `helm template` that must fail."""
    sets = [arg for value in values for arg in ("--set", value)]
    done = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *sets)
    assert done.returncode != 0, f"{values} rendered, but should have been refused"
    return done.stderr


def of_kind(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def component_of(doc: Doc) -> str:
    return str(doc["metadata"]["labels"]["app.kubernetes.io/component"])


def deployments_by_app(docs: list[Doc]) -> dict[str, Doc]:
    return {component_of(d): d for d in of_kind(docs, "Deployment").values()}


def repo_docs(*parts: str) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(COMPONENTS.joinpath(*parts).read_text()) if doc]


def metadata_of(component: Doc) -> dict[str, Doc]:
    return {item["name"]: item for item in component["spec"]["metadata"]}


LOCAL_ONLY_APPS = {"recorder", "agents", "agents-go"}
"""Apps the redis profile scopes that the chart does not deploy by default: the topic recorder
(a test tool) and `agents` and `agents-go`, the local agent apps (Python, and Go:
examples/go-agent); the chart deploys agent apps only as values agentApps name them."""


def without_recorder(scopes: str) -> str:
    """A redis-profile topic scope string without the local topic recorder's entry."""
    return ";".join(entry for entry in scopes.split(";") if not entry.startswith("recorder="))


ALL_ON = (
    "jaeger.enabled=false",
    "tracing.otlpEndpoint=otel-collector.observability.svc:4317",
    "console.ingress.enabled=true",
    "console.ingress.className=nginx",
    "console.ingress.tls[0].secretName=agora-console-tls",
    "console.ingress.tls[0].hosts[0]=agora.example.com",
    "model.backend=openai",
    "model.name=gpt-4o-mini",
    "model.openai.baseUrl=https://api.openai.com/v1",
    "model.openai.existingSecret=agora-openai",
    "escalationToken.existingSecret=agora-escalation-token",
    "conversation.type=conversation.openai",
    "conversation.metadata[0].name=model",
    "conversation.metadata[0].value=gpt-4o-mini",
    "conversation.secretMetadata[0].name=key",
    "conversation.secretMetadata[0].key=api-key",
    "conversation.existingSecret=agora-openai",
    *(f"services.{name}.autoscaling.enabled=true" for name in SERVICES),
)


@pytest.fixture(scope="module")
def defaults() -> list[Doc]:
    return render()


@pytest.fixture(scope="module")
def all_on() -> list[Doc]:
    return render(*ALL_ON)


def test_the_chart_passes_strict_lint() -> None:
    for values in ((), ALL_ON):
        sets = [arg for value in values for arg in ("--set", value)]
        done = helm("lint", "--strict", str(CHART), *sets)
        assert done.returncode == 0, done.stdout + done.stderr


def test_every_service_is_a_dapr_app_with_its_own_configuration(defaults: list[Doc]) -> None:
    deployments = deployments_by_app(defaults)
    configurations = of_kind(defaults, "Configuration")
    assert set(SERVICES) <= set(deployments)
    for app in SERVICES:
        pod = deployments[app]["spec"]["template"]
        annotations = pod["metadata"]["annotations"]
        assert annotations["dapr.io/enabled"] == "true"
        assert annotations["dapr.io/app-id"] == app
        assert annotations["dapr.io/app-port"] == "8000"
        assert annotations["dapr.io/app-protocol"] == "http"
        assert annotations["dapr.io/config"] == f"{FULLNAME}-{app}"
        assert annotations["dapr.io/config"] in configurations
        assert annotations["dapr.io/enable-app-health-check"] == "true"
        assert annotations["dapr.io/app-health-check-path"] == "/healthz"
        assert annotations["dapr.io/log-as-json"] == "true"
        for resource in ("cpu-request", "cpu-limit", "memory-request", "memory-limit"):
            assert annotations[f"dapr.io/sidecar-{resource}"]
        (container,) = pod["spec"]["containers"]
        assert container["args"] == [f"agora.{app}"]
        env = {e["name"]: e for e in container["env"]}
        assert env["APP_ID"]["value"] == app
        assert env["APP_PORT"]["value"] == "8000"
        assert env["AGORA_APP_HOST"]["value"] == "127.0.0.1"
        if app in MODEL_USERS:
            assert env["AGORA_MODEL_BACKEND"]["value"] == "offline"
        else:
            assert "AGORA_MODEL_BACKEND" not in env
        assert container["resources"]["requests"] and container["resources"]["limits"]


def _probe_route(probe: Doc) -> str:
    command = probe["exec"]["command"]
    assert command[:2] == ["bash", "-c"], command
    found = re.search(r"/dev/tcp/127\.0\.0\.1/8000 .*'GET (/\w+) HTTP/1\.0", command[2])
    assert found, command
    return found.group(1)


def test_every_pod_is_probed_locked_down_and_has_no_api_token(defaults: list[Doc]) -> None:
    accounts = of_kind(defaults, "ServiceAccount")
    for app, deployment in deployments_by_app(defaults).items():
        spec = deployment["spec"]["template"]["spec"]
        pod_security = spec["securityContext"]
        assert pod_security["runAsNonRoot"] is True
        assert pod_security["runAsUser"] == 10001
        assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["automountServiceAccountToken"] is False
        if app in APPS:
            assert accounts[spec["serviceAccountName"]]["automountServiceAccountToken"] is False
        tmp = {v["name"]: v for v in spec["volumes"]}["tmp"]
        assert "emptyDir" in tmp
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["runAsNonRoot"] is True
            assert security["runAsUser"] == 10001
            assert security["readOnlyRootFilesystem"] is True
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"] == {"drop": ["ALL"]}
            assert security["seccompProfile"] == {"type": "RuntimeDefault"}
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
            if app in SERVICES:
                assert _probe_route(container["livenessProbe"]) == "/healthz"
                assert _probe_route(container["startupProbe"]) == "/healthz"
                assert _probe_route(container["readinessProbe"]) == "/readyz"


def test_the_console_serves_its_web_page_beside_a_token_guarded_sidecar(defaults: list[Doc]) -> None:
    console = deployments_by_app(defaults)["console"]["spec"]["template"]
    annotations = console["metadata"]["annotations"]
    assert annotations["dapr.io/app-id"] == "console"
    assert "dapr.io/app-port" not in annotations  # nothing invokes the console through Dapr
    assert annotations["dapr.io/config"] == f"{FULLNAME}-console"
    assert annotations["dapr.io/api-token-secret"] == "agora-console-api-token"
    assert annotations["dapr.io/sidecar-listen-addresses"] == "0.0.0.0"
    (container,) = console["spec"]["containers"]
    assert container["args"] == ["agora.console"]
    env = {e["name"]: e for e in container["env"]}
    assert env["DAPR_API_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "agora-console-api-token",
        "key": "token",
    }
    assert (env["APP_PORT"]["value"], env["AGORA_APP_HOST"]["value"]) == ("8080", "0.0.0.0")
    assert env["AGORA_CONSOLE_SECURE_COOKIES"]["value"] == "true"
    assert "AGORA_CONSOLE_PROXY_USER_HEADER" not in env and "AGORA_CONSOLE_USERS_FILE" not in env
    assert "AGORA_CONSOLE_A2A_DEFAULT_SKILLS" not in env, "by default a message naming no skill is rejected"
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    service = of_kind(defaults, "Service")[f"{FULLNAME}-console"]
    ports = {port["name"]: port for port in service["spec"]["ports"]}
    assert ports["http"]["targetPort"] == "http" and ports["dapr-http"]["targetPort"] == 3500
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "console"


def test_the_console_signs_people_in_from_a_users_secret_or_a_trusted_proxy() -> None:
    rendered = render(
        "console.web.usersSecret=agora-console-users",
        "console.web.sessionKeySecret=agora-console-session",
        "console.web.proxyUserHeader=X-Forwarded-User",
        "console.web.proxyDeciders[0]=alice",
        "console.web.proxyDeciders[1]=bob",
        "console.web.a2aDefaultSkills[0]=web_search",
    )
    pod = deployments_by_app(rendered)["console"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["AGORA_CONSOLE_USERS_FILE"]["value"] == "/etc/agora/console/users.yaml"
    assert env["AGORA_CONSOLE_SESSION_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "agora-console-session",
        "key": "key",
    }
    assert env["AGORA_CONSOLE_PROXY_USER_HEADER"]["value"] == "X-Forwarded-User"
    assert env["AGORA_CONSOLE_PROXY_DECIDERS"]["value"] == "alice,bob"
    assert env["AGORA_CONSOLE_A2A_DEFAULT_SKILLS"]["value"] == "web_search"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["users"]["secret"]["secretName"] == "agora-console-users"
    assert {"name": "users", "mountPath": "/etc/agora/console", "readOnly": True} in container["volumeMounts"]


def test_every_component_is_scoped_as_the_redis_profile_scopes_it(defaults: list[Doc]) -> None:
    rendered = of_kind(defaults, "Component")
    assert set(rendered) == {"agora-state", "agora-pubsub", "agora-broadcast", "agora-llm"}
    for component in rendered.values():
        assert component["scopes"], f"{component['metadata']['name']} has no scopes"
        assert component["auth"] == {"secretStore": "kubernetes"}
    profile = {
        doc["metadata"]["name"]: doc
        for doc in [*repo_docs("redis", "statestore.yaml"), *repo_docs("redis", "pubsub.yaml")]
    }
    for name in ("agora-state", "agora-pubsub", "agora-broadcast"):
        assert rendered[name]["spec"]["type"] == profile[name]["spec"]["type"]
        assert rendered[name]["scopes"] == [
            app for app in profile[name]["scopes"] if app not in LOCAL_ONLY_APPS
        ]
        ours, theirs = metadata_of(rendered[name]), metadata_of(profile[name])
        for topic_rule in ("protectedTopics", "publishingScopes", "subscriptionScopes"):
            if topic_rule in theirs:
                assert ours[topic_rule]["value"] == without_recorder(theirs[topic_rule]["value"]), topic_rule
        assert ours["redisPassword"]["secretKeyRef"] == {"name": "redis", "key": "redis-password"}
    assert metadata_of(rendered["agora-state"])["actorStateStore"]["value"] == "true"
    assert metadata_of(rendered["agora-broadcast"])["consumerID"]["value"] == "{podName}"
    assert rendered["agora-llm"]["spec"]["type"] == "conversation.echo"
    assert set(rendered["agora-llm"]["scopes"]) == MODEL_USERS


def _strings(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair anywhere in a document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key), value
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def test_no_credential_is_rendered(defaults: list[Doc], all_on: list[Doc]) -> None:
    for docs in (defaults, all_on):
        assert not [d for d in docs if d["kind"] == "Secret"], "the chart renders no Secret"
        for doc in docs:
            for component in [doc] if doc["kind"] == "Component" else []:
                for item in component["spec"]["metadata"]:
                    if CREDENTIAL_NAME.search(item["name"]):
                        assert "value" not in item and "secretKeyRef" in item, item
            for key, value in _strings(doc):
                if key == "env":
                    for var in value:
                        if CREDENTIAL_NAME.search(var["name"]):
                            assert "value" not in var and "secretKeyRef" in var["valueFrom"], var
    env = {
        e["name"]: e
        for e in deployments_by_app(all_on)["worker"]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["AGORA_MODEL_OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "agora-openai",
        "key": "api-key",
    }
    registry_env = deployments_by_app(all_on)["registry"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert "AGORA_MODEL_OPENAI_API_KEY" not in {e["name"] for e in registry_env}
    llm_key = metadata_of(of_kind(all_on, "Component")["agora-llm"])["key"]
    assert llm_key == {"name": "key", "secretKeyRef": {"name": "agora-openai", "key": "api-key"}}


def test_access_policies_are_the_repositorys_with_the_release_namespace(defaults: list[Doc]) -> None:
    configurations = of_kind(defaults, "Configuration")
    (shared,) = repo_docs("config.yaml")
    for app in SERVICES:
        spec = configurations[f"{FULLNAME}-{app}"]["spec"]
        (repo,) = repo_docs("access-control", f"{app}.yaml")
        expected = repo["spec"]["accessControl"]
        ours = spec["accessControl"]
        assert ours["defaultAction"] == expected["defaultAction"] == "deny"
        assert ours["trustDomain"] == "public"
        assert [{k: v for k, v in p.items() if k != "namespace"} for p in ours["policies"]] == [
            {k: v for k, v in p.items() if k != "namespace"} for p in expected["policies"]
        ]
        assert {p["namespace"] for p in ours["policies"]} == {NAMESPACE}
        assert spec["secrets"] == {"scopes": [{"storeName": "kubernetes", "defaultAccess": "deny"}]}
        assert spec["features"] == shared["spec"]["features"]
        assert spec["workflow"] == shared["spec"]["workflow"]
        assert spec["mtls"]["enabled"] is True
        assert spec["tracing"]["otel"]["endpointAddress"] == f"{FULLNAME}-jaeger.{NAMESPACE}.svc:4317"
    console = configurations[f"{FULLNAME}-console"]["spec"]
    assert console["accessControl"] == {"defaultAction": "deny", "trustDomain": "public", "policies": []}


def _without_workflow_actors(spec: Doc) -> tuple[Doc, dict[str, Any]]:
    """The spec without its workflow actors' targets (named by namespace and app id), and those."""
    actors = spec["targets"]["actors"]
    workflow = {name: target for name, target in actors.items() if name.startswith("dapr.internal.")}
    others = {name: target for name, target in actors.items() if name not in workflow}
    return {**spec, "targets": {**spec["targets"], "actors": others}}, workflow


def test_the_resiliency_is_the_repositorys(defaults: list[Doc]) -> None:
    (rendered,) = of_kind(defaults, "Resiliency").values()
    (repo,) = repo_docs("common", "resiliency.yaml")
    ours, workflow = _without_workflow_actors(rendered["spec"])
    theirs, local_workflow = _without_workflow_actors(repo["spec"])
    assert ours == theirs
    assert rendered["scopes"] == list(APPS)
    assert workflow == {
        f"dapr.internal.{NAMESPACE}.{app}.workflow": {"retry": "once"} for app in ("planner", "debate")
    }
    assert local_workflow == {
        f"dapr.internal.default.{app}.workflow": {"retry": "once"} for app in ("planner", "debate", "agents")
    }


def test_every_agent_app_s_workflow_actor_has_the_one_attempt_policy() -> None:
    docs = render(
        "agentApps[0].name=calculator", "agentApps[0].agentsFile=/opt/agora/examples/agents/calculator.py"
    )
    (rendered,) = of_kind(docs, "Resiliency").values()
    assert rendered["spec"]["targets"]["actors"][f"dapr.internal.{NAMESPACE}.calculator.workflow"] == {
        "retry": "once"
    }


def test_jaeger_ingress_and_autoscalers_are_optional(defaults: list[Doc], all_on: list[Doc]) -> None:
    assert f"{FULLNAME}-jaeger" in of_kind(defaults, "Deployment")
    assert not of_kind(defaults, "Ingress") and not of_kind(defaults, "HorizontalPodAutoscaler")
    assert not of_kind(defaults, "PodDisruptionBudget")  # one pod each: a budget would protect nothing

    assert f"{FULLNAME}-jaeger" not in of_kind(all_on, "Deployment")
    for configuration in of_kind(all_on, "Configuration").values():
        assert (
            configuration["spec"]["tracing"]["otel"]["endpointAddress"]
            == "otel-collector.observability.svc:4317"
        )
    (ingress,) = of_kind(all_on, "Ingress").values()
    paths = {p["path"]: p["backend"]["service"] for p in ingress["spec"]["rules"][0]["http"]["paths"]}
    assert paths == {
        "/v1.0": {"name": f"{FULLNAME}-console", "port": {"name": "dapr-http"}},
        "/": {"name": f"{FULLNAME}-console", "port": {"name": "http"}},
    }
    autoscalers = of_kind(all_on, "HorizontalPodAutoscaler")
    budgets = of_kind(all_on, "PodDisruptionBudget")
    deployments = deployments_by_app(all_on)
    for app in SERVICES:
        assert autoscalers[f"{FULLNAME}-{app}"]["spec"]["scaleTargetRef"]["name"] == f"{FULLNAME}-{app}"
        assert budgets[f"{FULLNAME}-{app}"]["spec"]["maxUnavailable"] == 1
        assert "replicas" not in deployments[app]["spec"]

    no_tracing = render("jaeger.enabled=false")
    for configuration in of_kind(no_tracing, "Configuration").values():
        assert configuration["spec"]["tracing"] == {"samplingRate": "0"}
    env = deployments_by_app(no_tracing)["registry"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "OTEL_TRACES_EXPORTER", "value": "none"} in env


def test_a_console_of_more_than_one_pod_has_a_pod_disruption_budget() -> None:
    budgets = of_kind(render("console.replicaCount=2"), "PodDisruptionBudget")
    assert list(budgets) == [f"{FULLNAME}-console"]
    spec = budgets[f"{FULLNAME}-console"]["spec"]
    assert spec["maxUnavailable"] == 1
    assert spec["selector"]["matchLabels"]["app.kubernetes.io/component"] == "console"
    turned_off = render("console.replicaCount=2", "console.podDisruptionBudget.enabled=false")
    assert not of_kind(turned_off, "PodDisruptionBudget")


def _tracing_of(docs: list[Doc], apps: tuple[str, ...]) -> dict[str, tuple[str, str | None, str | None]]:
    """Per app: its sidecar's samplingRate, and its app container's OTEL_TRACES_SAMPLER and
    OTEL_TRACES_SAMPLER_ARG."""
    configurations = of_kind(docs, "Configuration")
    deployments = deployments_by_app(docs)
    found = {}
    for app in apps:
        (container,) = deployments[app]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        rate = configurations[f"{FULLNAME}-{app}"]["spec"]["tracing"]["samplingRate"]
        found[app] = (rate, env.get("OTEL_TRACES_SAMPLER"), env.get("OTEL_TRACES_SAMPLER_ARG"))
    return found


def test_by_default_sidecars_and_apps_keep_a_tenth_of_the_traces(defaults: list[Doc]) -> None:
    assert _tracing_of(defaults, SERVICES) == dict.fromkeys(
        SERVICES, ("0.1", "parentbased_traceidratio", "0.1")
    )
    assert (
        of_kind(defaults, "Configuration")[f"{FULLNAME}-console"]["spec"]["tracing"]["samplingRate"] == "0.1"
    )


def test_tracing_sampling_rate_drives_every_sidecar_and_app() -> None:
    docs = render(
        "tracing.samplingRate=0.25",
        "agentApps[0].name=calculator",
        "agentApps[0].agentsFile=/opt/agora/examples/agents/calculator.py",
    )
    apps = (*SERVICES, "calculator")
    assert _tracing_of(docs, apps) == dict.fromkeys(apps, ("0.25", "parentbased_traceidratio", "0.25"))
    for configuration in of_kind(docs, "Configuration").values():
        assert configuration["spec"]["tracing"]["samplingRate"] == "0.25"


def test_the_helm_test_speaks_as_the_console_through_its_service(defaults: list[Doc]) -> None:
    hooks = [d for d in defaults if d["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"]
    pods = [d for d in hooks if d["kind"] == "Pod"]
    (config_map,) = [d for d in hooks if d["kind"] == "ConfigMap"]
    (pod,) = pods
    assert not any(k.startswith("dapr.io/") for k in pod["metadata"].get("annotations", {}))
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["CONSOLE_DAPR_URL"]["value"] == f"http://{FULLNAME}-console.{NAMESPACE}.svc:3500"
    assert env["DAPR_API_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "agora-console-api-token",
        "key": "token",
    }
    script = config_map["data"]["publish_task.py"]
    compile(script, "publish_task.py", "exec")
    assert "/v1.0/publish/agora-pubsub/agora.tasks" in script
    assert "/v1.0/invoke/taskboard/method/v1/tasks/" in script


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (("services.allocator.replicaCount=-1",), ("services", "allocator", "replicaCount", "minimum")),
        (("services.allocator.replicas=3",), ("services", "allocator", "replicas")),
        (("model.backend=gpt",), ("model", "backend", "offline", "dapr", "openai")),
        (("console.apiToken.existingSecret=",), ("console", "apiToken", "existingSecret")),
        (
            ("stateStore.metadata[0].name=redisPassword", "stateStore.metadata[0].value=hunter2"),
            ("stateStore",),
        ),
        (("model.backend=openai",), ("model",)),
        (("console.web.a2aDefaultSkills[0]=web search",), ("a2aDefaultSkills", "does not match")),
    ],
)
def test_the_schema_refuses_wrong_values_readably(values: tuple[str, ...], expected: tuple[str, ...]) -> None:
    message = refusal(*values)
    assert "values don't meet the specifications of the schema" in message, message
    for fragment in expected:
        assert fragment in message, f"{fragment!r} not in: {message}"
    assert "hunter2" not in message


AGENT_APPS = (
    "agentApps[0].name=calculator",
    "agentApps[0].agentsFile=/opt/agora/examples/agents/calculator.py",
    "agentApps[0].replicaCount=2",
    "agentApps[0].env[0].name=AGORA_TASKBOARD_APP_ID",
    "agentApps[0].env[0].value=taskboard",
    "agentApps[1].name=wordsmith",
    "agentApps[1].image.repository=registry.example.com/go-agent",
    "agentApps[1].image.tag=1.2.3",
    "agentApps[1].command[0]=/usr/local/bin/go-agent",
    "agentApps[1].stateStore=false",
    "agentApps[1].usesModel=false",
    "agentApps[1].execProbes=false",
    "agentApps[2].name=agents",
    "agentApps[2].module=team.agents",
)


@pytest.fixture(scope="module")
def with_agent_apps() -> list[Doc]:
    return render(*AGENT_APPS)


def _scope_entries(component: Doc, rule: str) -> dict[str, set[str]]:
    value = metadata_of(component)[rule]["value"]
    entries = [entry.partition("=") for entry in value.split(";")]
    assert len({app for app, _, _ in entries}) == len(entries), f"an app is named twice in {rule}: {value}"
    return {app: set(topics.split(",")) for app, _, topics in entries}


def test_an_agent_app_is_a_dapr_app_of_the_chart_image_serving_its_agents_file(
    with_agent_apps: list[Doc],
) -> None:
    deployments = deployments_by_app(with_agent_apps)
    assert {"calculator", "wordsmith", "agents"} <= set(deployments)
    calculator = deployments["calculator"]
    assert calculator["metadata"]["name"] == f"{FULLNAME}-calculator"
    assert calculator["spec"]["replicas"] == 2
    pod = calculator["spec"]["template"]
    annotations = pod["metadata"]["annotations"]
    assert annotations["dapr.io/enabled"] == "true"
    assert annotations["dapr.io/app-id"] == "calculator"
    assert annotations["dapr.io/app-port"] == "8000"
    assert annotations["dapr.io/app-channel-address"] == "127.0.0.1"
    assert annotations["dapr.io/config"] == f"{FULLNAME}-calculator"
    assert annotations["dapr.io/config"] in of_kind(with_agent_apps, "Configuration")
    assert annotations["dapr.io/app-health-check-path"] == "/healthz"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "agora:0.1.0"
    assert container["args"] == ["agora.sdk"]
    assert "command" not in container
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["APP_ID"] == "calculator"
    assert env["APP_PORT"] == "8000"
    assert env["AGORA_APP_HOST"] == "127.0.0.1"
    assert env["AGORA_AGENTS_FILE"] == "/opt/agora/examples/agents/calculator.py"
    assert env["AGORA_MODEL_BACKEND"] == "offline"
    assert env["AGORA_TASKBOARD_APP_ID"] == "taskboard"
    assert _probe_route(container["readinessProbe"]) == "/readyz"
    assert _probe_route(container["livenessProbe"]) == "/healthz"
    assert container["resources"]["requests"] and container["resources"]["limits"]
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert (
        of_kind(with_agent_apps, "ServiceAccount")[spec["serviceAccountName"]]["automountServiceAccountToken"]
        is False
    )
    assert container["securityContext"]["readOnlyRootFilesystem"] is True

    (module_app,) = deployments["agents"]["spec"]["template"]["spec"]["containers"]
    assert module_app["args"] == ["team.agents"]
    assert "AGORA_AGENTS_FILE" not in {e["name"] for e in module_app["env"]}


def test_a2a_agents_are_served_by_an_agent_app_of_the_chart_image_by_their_card_urls() -> None:
    docs = render(
        "agentApps[0].name=remote",
        "agentApps[0].a2aAgents[0].name=poet",
        "agentApps[0].a2aAgents[0].cardUrl=http://poet.team.svc:9100",
        "agentApps[0].a2aAgents[1].name=clerk",
        "agentApps[0].a2aAgents[1].cardUrl=https://clerk.example/card.json",
    )
    (container,) = deployments_by_app(docs)["remote"]["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["agora.sdk"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["AGORA_A2A_AGENTS"] == "poet=http://poet.team.svc:9100,clerk=https://clerk.example/card.json"
    assert "AGORA_AGENTS_FILE" not in env
    assert "remote" in of_kind(docs, "Component")["agora-pubsub"]["scopes"]


def test_an_agent_app_of_its_own_image_runs_its_command_without_state_or_model(
    with_agent_apps: list[Doc],
) -> None:
    pod = deployments_by_app(with_agent_apps)["wordsmith"]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "registry.example.com/go-agent:1.2.3"
    assert container["command"] == ["/usr/local/bin/go-agent"]
    assert "args" not in container
    env = {e["name"] for e in container["env"]}
    assert {"APP_ID", "APP_PORT", "AGORA_APP_HOST"} <= env
    assert not {"AGORA_MODEL_BACKEND", "AGORA_AGENTS_FILE"} & env
    assert not {"startupProbe", "livenessProbe", "readinessProbe"} & set(container)
    components = of_kind(with_agent_apps, "Component")
    assert "wordsmith" not in components["agora-state"]["scopes"]
    assert "wordsmith" not in components["agora-llm"]["scopes"]
    assert "wordsmith" in components["agora-pubsub"]["scopes"]


def test_an_agent_apps_id_is_in_every_scope_and_policy_an_agent_app_needs(with_agent_apps: list[Doc]) -> None:
    components = of_kind(with_agent_apps, "Component")
    pubsub = components["agora-pubsub"]
    publishing = _scope_entries(pubsub, "publishingScopes")
    subscriptions = _scope_entries(pubsub, "subscriptionScopes")
    for app in ("calculator", "wordsmith", "agents"):
        assert app in pubsub["scopes"]
        assert publishing[app] == {"agora.task.outcome", "agora.cost.events", "agora.tasks", "agora.plans",
                                   "agora.debates", "agora.deadletter"}  # fmt: skip
        assert subscriptions[app] == {"agora.task.awarded", "agora.task.cancelled",
                                      "agora.escalation.resolved", "agora.task.outcome.recorded",
                                      "agora.task.rejected", "agora.task.award_lapsed",
                                      "agora.plan.completed", "agora.debate.completed"}  # fmt: skip
        assert app not in components["agora-broadcast"]["scopes"]
    assert publishing["agents-go"] == {"agora.task.outcome", "agora.deadletter"}  # the local profile's
    assert {"calculator", "agents"} <= set(components["agora-state"]["scopes"])
    assert {"calculator", "agents"} <= set(components["agora-llm"]["scopes"])
    assert pubsub["scopes"].count("agents") == 1

    configurations = of_kind(with_agent_apps, "Configuration")
    registry = configurations[f"{FULLNAME}-registry"]["spec"]["accessControl"]["policies"]
    by_caller = {policy["appId"]: policy for policy in registry}
    assert len(by_caller) == len(registry), "a caller is named twice in the registry's policy"
    board = configurations[f"{FULLNAME}-taskboard"]["spec"]["accessControl"]["policies"]
    disputers = {policy["appId"]: policy for policy in board}
    assert len(disputers) == len(board), "a caller is named twice in the task board's policy"
    for app in ("calculator", "wordsmith", "agents"):  # each disputes the tasks that answer to it
        dispute = {"name": "/v1/tasks/**/dispute", "httpVerb": ["POST"], "action": "allow"}
        assert disputers[app]["operations"] == [dispute] and disputers[app]["defaultAction"] == "deny"
    uncertainty = configurations[f"{FULLNAME}-uncertainty"]["spec"]["accessControl"]["policies"]
    monitored = {policy["appId"]: policy for policy in uncertainty}
    assert len(monitored) == len(uncertainty), "a caller is named twice in the uncertainty monitor's policy"
    for app in ("calculator", "wordsmith", "agents"):
        policy = by_caller[app]
        assert policy["defaultAction"] == "deny"
        assert policy["namespace"] == NAMESPACE
        assert policy["operations"] == [{"name": "/v1/agents", "httpVerb": ["POST"], "action": "allow"}]
        # its graphs read the plans and debates their nodes wait for
        for service, path in (("planner", "/v1/plans/*"), ("debate", "/v1/debates/*")):
            readers = configurations[f"{FULLNAME}-{service}"]["spec"]["accessControl"]["policies"]
            [reader] = [p for p in readers if p["appId"] == app]
            assert reader["defaultAction"] == "deny"
            assert reader["operations"] == [{"name": path, "httpVerb": ["GET"], "action": "allow"}]
        # like the worker, an agent app reports its runs' steps to the uncertainty monitor
        assert monitored[app]["defaultAction"] == "deny"
        assert monitored[app]["operations"] == monitored["worker"]["operations"]

        own = configurations[f"{FULLNAME}-{app}"]["spec"]
        assert own["accessControl"]["defaultAction"] == "deny"
        callers = {p["appId"]: p for p in own["accessControl"]["policies"]}
        assert set(callers) == {"allocator", "console"}
        assert callers["allocator"]["defaultAction"] == "deny"
        assert callers["allocator"]["operations"] == [
            {"name": "/v1/bids", "httpVerb": ["POST"], "action": "allow"}
        ]
        assert callers["console"]["defaultAction"] == "allow"
        assert own["mtls"]["enabled"] is True
        assert own["secrets"] == {"scopes": [{"storeName": "kubernetes", "defaultAccess": "deny"}]}
    (repo_policy,) = repo_docs("access-control", "agents.yaml")
    own = configurations[f"{FULLNAME}-calculator"]["spec"]["accessControl"]["policies"]
    assert [{k: v for k, v in p.items() if k != "namespace"} for p in own] == [
        {k: v for k, v in p.items() if k != "namespace"}
        for p in repo_policy["spec"]["accessControl"]["policies"]
    ]

    (resiliency,) = of_kind(with_agent_apps, "Resiliency").values()
    assert {"calculator", "wordsmith", "agents"} <= set(resiliency["scopes"])
    for values in ((), AGENT_APPS):
        done = helm("lint", "--strict", str(CHART), *[arg for value in values for arg in ("--set", value)])
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (("agentApps[0].name=allocator", "agentApps[0].module=m"), "app id of one of the chart's own parts"),
        (
            ("agentApps[0].name=a", "agentApps[0].module=m", "agentApps[1].name=a", "agentApps[1].module=m"),
            "given to two agent apps",
        ),
        (("agentApps[0].name=a",), "exactly one of agentsFile, module or command"),
        (
            ("agentApps[0].name=a", "agentApps[0].module=m", "agentApps[0].agentsFile=/a.py"),
            "exactly one of agentsFile, module or command",
        ),
        (
            (
                "agentApps[0].name=a",
                "agentApps[0].command[0]=x",
                "agentApps[0].a2aAgents[0].name=p",
                "agentApps[0].a2aAgents[0].cardUrl=http://p:1",
            ),
            "a2aAgents are served by the SDK's agent app: not with module or command",
        ),
        (
            (
                "agentApps[0].name=a",
                "agentApps[0].a2aAgents[0].name=p",
                "agentApps[0].a2aAgents[0].cardUrl=p:1",
            ),
            "cardUrl",
        ),
        (("agentApps[0].name=Bad_Name", "agentApps[0].module=m"), "agentApps"),
        (("agentApps[0].name=a", "agentApps[0].module=m", "agentApps[0].replicas=2"), "replicas"),
    ],
)
def test_a_wrong_agent_app_entry_is_refused_naming_it(values: tuple[str, ...], expected: str) -> None:
    assert expected in refusal(*values)
