"""One trace from a publisher through pub/sub and the registry's handler to its state write,
as Jaeger (the real collector of the local stack) shows it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, TypeVar

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic import BaseModel

from agora.core import topics
from agora.core.market import TaskSpec
from agora.core.messages import RegisterAgent
from agora.core.models import CapabilityProfile
from agora.core.topics import Channel
from agora.harness import LocalCluster, ServiceReplica
from agora.runtime.pubsub import Publisher
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprSidecar
from agora.runtime.tracing import inject_headers, tracer
from tests.integration.helpers import eventually, replicas_of

Span = dict[str, Any]


@pytest.fixture(scope="module")
def test_tracer(apps_cluster: LocalCluster, tracer_provider: TracerProvider) -> Iterator[TracerProvider]:
    """The test process exports its spans to the cluster's Jaeger, like any service does."""
    exporter = OTLPSpanExporter(endpoint=apps_cluster.otlp_grpc_endpoint, insecure=True)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider
    tracer_provider.force_flush()


def _trace(cluster: LocalCluster, trace_id: str) -> list[Span]:
    response = httpx.get(f"{cluster.jaeger_query_url}/api/traces/{trace_id}", timeout=10)
    if response.status_code != 200 or not response.json().get("data"):
        return []
    data = response.json()["data"][0]
    for span in data["spans"]:
        process = data["processes"][span["processID"]]
        span["service"] = process["serviceName"]
        span["process_tags"] = {t["key"]: t["value"] for t in process.get("tags", [])}
        span["tag"] = {t["key"]: t["value"] for t in span.get("tags", [])}
    return list(data["spans"])


def _is_app_span(span: Span) -> bool:
    """Spans from Agora's Python processes (daprd's own spans lack Agora's resource)."""
    namespace: str | None = span["process_tags"].get("service.namespace")
    return namespace == "agora"


def _parent(span: Span, by_id: dict[str, Span]) -> Span | None:
    for ref in span.get("references", []):
        if ref["refType"] == "CHILD_OF" and ref["spanID"] in by_id:
            return by_id[ref["spanID"]]
    return None


def _ancestors(span: Span, by_id: dict[str, Span]) -> Iterator[Span]:
    parent = _parent(span, by_id)
    while parent is not None:
        yield parent
        parent = _parent(parent, by_id)


P = TypeVar("P", bound=BaseModel)


async def publish_traced(replica: ServiceReplica, topic: Channel[P], payload: P, span: str) -> str:
    """Publish through `replica`'s sidecar inside a client span, as a traced client would;
    returns the trace id."""
    settings = ServiceSettings(app_id="agora-tests", dapr_http_port=replica.endpoints.dapr_http_port)
    sidecar = DaprSidecar(settings)
    try:
        with tracer("tests").start_as_current_span(span) as root:
            await Publisher(sidecar, settings).publish(topic, payload)
            return format(root.get_span_context().trace_id, "032x")
    finally:
        await sidecar.aclose()


async def test_publish_to_state_save_is_one_linked_trace(
    apps_cluster: LocalCluster, test_tracer: TracerProvider
) -> None:
    registry = replicas_of(apps_cluster, "registry")[0]
    command = RegisterAgent(
        profile=CapabilityProfile(agent_id="traced-agent", agent_name="Traced", skill_tags=["tracing"])
    )
    trace_id = await publish_traced(registry, topics.REGISTRY_COMMANDS, command, "client request")
    test_tracer.force_flush()

    eventually(lambda: _linked_chain(_trace(apps_cluster, trace_id)), timeout=30)


def _linked_chain(spans: list[Span]) -> bool:
    """Assert publish → daprd → process → save → daprd state, with the right parent links."""
    by_id = {s["spanID"]: s for s in spans}
    assert spans, "trace not in Jaeger yet"
    publishes = [s for s in spans if s["operationName"] == "publish agora.registry"]
    saves = [s for s in spans if s["operationName"] == "save market:capability"]
    assert len(publishes) == 1 and len(saves) == 1, "one publish, one save"
    publish, save = publishes[0], saves[0]
    # At-least-once delivery may add a duplicate delivery under load; the one that saved counts.
    processes = [a for a in _ancestors(save, by_id) if a["operationName"] == "process agora.registry"]
    assert len(processes) == 1, "the save happened inside one delivery"
    process = processes[0]

    assert publish["service"] == "agora-tests"
    assert publish["tag"]["span.kind"] == "producer"
    assert process["service"] == "registry" and process["tag"]["span.kind"] == "consumer"
    assert save["tag"]["span.kind"] == "client"
    assert save["tag"]["db.collection.name"] == "market:capability"

    # save ← … ← process ← (daprd pub/sub hops) ← publish: one causal chain.
    save_ancestors = [s["spanID"] for s in _ancestors(save, by_id)]
    assert process["spanID"] in save_ancestors
    process_ancestors = list(_ancestors(process, by_id))
    assert publish["spanID"] in [s["spanID"] for s in process_ancestors]
    hops = process_ancestors[: [s["spanID"] for s in process_ancestors].index(publish["spanID"])]
    assert any(not _is_app_span(s) for s in hops), "the pub/sub hop passes through daprd's spans"

    # daprd's own state span is a child of the app's save span.
    daprd_children = [s for s in spans if _parent(s, by_id) is save and not _is_app_span(s)]
    assert daprd_children, "the sidecar's state span continues the app's trace"
    return True


def test_jaeger_lists_app_and_sidecar_spans_for_a_service(apps_cluster: LocalCluster) -> None:
    registry = replicas_of(apps_cluster, "registry")[0]
    httpx.post(
        registry.invoke_url("v1/agents/filter"), json={"required_skills": ["anything"]}, timeout=10
    ).raise_for_status()

    def spans_by_origin() -> tuple[list[str], list[str]] | None:
        response = httpx.get(
            f"{apps_cluster.jaeger_query_url}/api/traces",
            params={"service": "registry", "limit": 200},
            timeout=10,
        )
        app: list[str] = []
        daprd: list[str] = []
        for data in response.json().get("data") or []:
            for span in data["spans"]:
                process = data["processes"][span["processID"]]
                tags = {t["key"]: t["value"] for t in process.get("tags", [])}
                (app if tags.get("service.namespace") == "agora" else daprd).append(span["operationName"])
        invoked = any("v1/agents/filter" in name for name in daprd)
        return (app, daprd) if "registry.filter_capable" in app and invoked else None

    app_spans, _ = eventually(spans_by_origin, timeout=30)
    assert "POST /v1/agents/filter" in app_spans


async def test_a_task_is_one_trace_from_publication_to_outcome(
    apps_cluster: LocalCluster, test_tracer: TracerProvider
) -> None:
    allocator = replicas_of(apps_cluster, "allocator")[0]
    spec = TaskSpec(
        task_id=f"traced-{uuid.uuid4().hex[:8]}",
        description="Summarise the week's papers",
        required_skills=["web_search"],
        preferred_skills=["summarize"],
        min_success_threshold=0.0,
    )
    trace_id = await publish_traced(allocator, topics.TASKS, spec, "submit task")
    test_tracer.force_flush()

    def whole_path() -> bool:
        spans = _trace(apps_cluster, trace_id)
        by_name: dict[str, list[Span]] = {}
        for span in spans:
            by_name.setdefault(span["operationName"], []).append(span)
        for name in (
            "market.allocate",
            "market.award",
            "agent.execute",
            "process agora.task.outcome.recorded",
        ):
            assert name in by_name, f"{name} not in the trace yet"

        def only(name: str) -> Span:
            assert len(by_name[name]) == 1, f"one {name} span"
            return by_name[name][0]

        allocate = only("market.allocate")
        assert allocate["service"] == "allocator"
        assert allocate["tag"]["task_id"] == spec.task_id
        solicitations = by_name["market.bid_solicitation"]
        asked = {s["tag"]["agent_id"] for s in solicitations}
        assert asked and asked <= {"researcher", "scout"}
        assert allocate["tag"]["num_candidates"] == allocate["tag"]["num_bids"] == len(solicitations)
        by_id = {s["spanID"]: s for s in spans}
        assert all(allocate in _ancestors(s, by_id) for s in solicitations)
        award = only("market.award")
        assert award["tag"]["winner_agent_id"] in {"researcher", "scout"}
        assert {"final_score", "calibrated_success_prob"} <= set(award["tag"])
        execute = only("agent.execute")
        assert (
            execute["service"] == "worker" and execute["tag"]["agent_id"] == award["tag"]["winner_agent_id"]
        )
        # The board announced the outcome to the allocator; the planner, which posted no such
        # task, was not handed it (its sidecar's routing rule takes only its own tasks' ends).
        heard = {span["service"] for span in by_name["process agora.task.outcome.recorded"]}
        assert heard == {"allocator"}, heard
        return True

    eventually(whole_path, timeout=90)


def test_pause_decision_and_continuation_are_one_trace(
    apps_cluster: LocalCluster, test_tracer: TracerProvider
) -> None:
    uncertainty = replicas_of(apps_cluster, "uncertainty")[0]
    escalation = replicas_of(apps_cluster, "escalation")[0]
    session = f"traced-{uuid.uuid4().hex[:8]}"
    with tracer("tests").start_as_current_span("agent step") as root:
        trace_id = format(root.get_span_context().trace_id, "032x")
        paused = httpx.post(
            uncertainty.invoke_url(f"v1/sessions/{session}/llm-responses"),
            json={
                "step_id": "1",
                "text": "No idea if this is right. Confidence: 5%",
                "prompt": "Drop the table?",
            },
            headers=inject_headers({}),
            timeout=30,
        ).json()
    assert paused["action"] == "pause_for_human"
    # The person decides later, in a request of their own (no trace context).
    httpx.post(
        escalation.invoke_url(f"v1/escalations/{paused['escalation_id']}/resume"),
        json={"decision": {"kind": "escalation", "action": "skip"}, "who": "alice"},
        timeout=30,
    ).raise_for_status()
    test_tracer.force_flush()

    def whole_path() -> bool:
        spans = _trace(apps_cluster, trace_id)
        names = [s["operationName"] for s in spans]
        by_id = {s["spanID"]: s for s in spans}
        assert "escalation.resolve" in names, "the decision joined the parked trace"
        [resolve] = [s for s in spans if s["operationName"] == "escalation.resolve"]
        assert resolve["tag"]["agora.decision"] == "skip" and resolve["service"] == "escalation"
        assert resolve["tag"]["agora.decided_by"] == "alice" and resolve["tag"]["agora.waited_ms"] >= 0
        continued = [s for s in spans if s["operationName"] == "process agora.escalation.resolved"]
        assert any(resolve in _ancestors(s, by_id) and s["service"] == "uncertainty" for s in continued)
        step = [s for s in spans if s["service"] == "uncertainty" and "llm-responses" in s["operationName"]]
        assert step and step[0]["tag"]["span.kind"] == "server"
        return True

    eventually(whole_path, timeout=60)


async def test_task_paused_by_uncertainty_resumes_after_a_decision_in_one_trace(
    apps_cluster: LocalCluster, test_tracer: TracerProvider
) -> None:
    """task → per-step uncertainty check → escalation parked → person decides → the worker
    continues the task → outcome, all one trace."""
    worker = replicas_of(apps_cluster, "worker")[0]
    escalation = replicas_of(apps_cluster, "escalation")[0]
    allocator = replicas_of(apps_cluster, "allocator")[0]
    worker.stop()
    worker.spec.env["AGORA_UNCERTAINTY_CHECKS"] = "true"
    try:
        worker.start()
        batch = uuid.uuid4().hex[:6]
        traces: dict[str, str] = {}
        for i in range(8):
            spec = TaskSpec(
                task_id=f"checked-{batch}-{i}",
                description=f"Reconcile ledger {i} against the bank statement",
                required_skills=["web_search"],
                min_success_threshold=0.0,
            )
            traces[spec.task_id] = await publish_traced(allocator, topics.TASKS, spec, "submit task")

        def parked() -> dict[str, Any] | None:
            listed = httpx.get(
                escalation.invoke_url("v1/escalations?status=WAITING_FOR_HUMAN&limit=500"), timeout=30
            ).json()["escalations"]
            return next((e for e in listed if e["waiting_party"]["id"] in traces), None)

        waiting = eventually(parked, timeout=60)
        task_id = waiting["waiting_party"]["id"]
        board = replicas_of(apps_cluster, "taskboard")[0]
        assert httpx.get(board.invoke_url(f"v1/tasks/{task_id}"), timeout=30).json()["status"] == "ALLOCATED"

        httpx.post(
            escalation.invoke_url(f"v1/escalations/{waiting['escalation_id']}/resume"),
            json={"decision": {"kind": "escalation", "action": "skip"}, "who": "alice"},
            timeout=30,
        ).raise_for_status()

        def finished() -> dict[str, Any] | None:
            record = httpx.get(board.invoke_url(f"v1/tasks/{task_id}"), timeout=30).json()
            return record if record["status"] in {"FAILED", "PARTIAL"} else None

        record = eventually(finished, timeout=60)
        assert record["outcome"]["partial"] is True and record["outcome"]["summary"] == "skip by alice"
        test_tracer.force_flush()

        def one_trace() -> bool:
            names = [s["operationName"] for s in _trace(apps_cluster, traces[task_id])]
            for name in (
                "market.allocate",
                "agent.execute",
                "escalation.resolve",
                "process agora.task.outcome.recorded",
            ):
                assert name in names, f"{name} not in the task's trace yet"
            return True

        eventually(one_trace, timeout=60)
    finally:
        worker.stop()
        worker.spec.env.pop("AGORA_UNCERTAINTY_CHECKS", None)
        worker.start()
