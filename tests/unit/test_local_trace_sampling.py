"""The local harness traces everything unless told a deployment's sampling rate; told one, the
sidecars' Configuration and the apps' sampler both keep that share (as the Helm chart does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from agora.harness import LocalCluster

JAEGER_PORTS = {"otlp_grpc": 14317, "otlp_http": 14318, "query": 16686, "query_grpc": 16685, "health": 13133}


def _rendered(tmp_path: Path, **options: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The tracing block of the sidecars' Configuration and the environment of the apps."""
    cluster = LocalCluster("redis", run_dir=tmp_path, **options)
    if cluster.with_jaeger:
        cluster.jaeger_ports = dict(JAEGER_PORTS)
    cluster._render_resources()
    config = yaml.safe_load(cluster.config_file.read_text())
    return config["spec"]["tracing"], cluster.child_env()


def test_the_local_stack_traces_everything_by_default(tmp_path: Path) -> None:
    tracing, env = _rendered(tmp_path, jaeger=True)
    assert tracing["samplingRate"] == "1"
    assert tracing["otel"]["endpointAddress"] == f"127.0.0.1:{JAEGER_PORTS['otlp_grpc']}"
    assert "OTEL_TRACES_SAMPLER" not in env and "OTEL_TRACES_SAMPLER_ARG" not in env


def test_a_sampling_rate_drives_the_sidecars_and_the_apps_alike(tmp_path: Path) -> None:
    tracing, env = _rendered(tmp_path, jaeger=True, trace_sampling_rate="0.1")
    assert tracing["samplingRate"] == "0.1"
    assert env["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio"
    assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.1"


def test_without_jaeger_nothing_is_sampled_whatever_the_rate(tmp_path: Path) -> None:
    tracing, env = _rendered(tmp_path, jaeger=False, trace_sampling_rate="0.1")
    assert tracing == {"samplingRate": "0"}
    assert env["OTEL_TRACES_EXPORTER"] == "none"
    assert "OTEL_TRACES_SAMPLER" not in env
