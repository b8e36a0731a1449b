"""`make bench`'s closing summary puts the market burst traced as the Helm chart ships it beside
the untraced one of the same run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench import summary


def _market_results(traced: bool) -> dict[str, Any]:
    burst = {
        "tasks": 5000,
        "publish_to_decision": {"per_second": 145.5},
        "bare_publish_to_subscribe": {"per_second": 1189.7},
        "bare_bulk_publish_to_subscribe": {"per_second": 6133.5},
        "cpu_ms_per_task_whole_life_total": 13.0,
        "cpu_ms_per_task_to_decision_total": 12.5,
        "cpu_ms_per_bare_event_total": 0.8,
        "cpu_ms_per_bare_bulk_event_total": 0.3,
    }
    results: dict[str, Any] = {
        "burst": burst,
        "one_at_a_time": {"publish_to_decision_p50_ms": 18.1, "bare_publish_to_subscribe_p50_ms": 2.7},
    }
    if traced:
        results["traced_burst"] = {
            "tasks": 5000,
            "sampling_rate": "0.1",
            "publish_to_decision": {"per_second": 131.2},
            "cpu_ms_per_task_whole_life_total": 14.6,
            "cpu_ms_per_task_whole_life_jaeger": 0.4,
        }
    return results


def _rows_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, results: dict[str, Any]
) -> dict[str, tuple[str, str]]:
    (tmp_path / "market_e2e.json").write_text(json.dumps(results))
    monkeypatch.setattr(summary, "RESULTS", tmp_path)
    return {measure: (value, baseline) for measure, value, baseline in summary.rows()}


def test_the_traced_burst_stands_beside_the_untraced_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _rows_from(tmp_path, monkeypatch, _market_results(traced=True))
    rate = "market, burst of 5000 traced as the chart ships it (sampling 0.1): tasks decided per s"
    cpu = "market traced: CPU per task, whole life (ms, every process, Jaeger too)"
    assert rows[rate] == ("131.2", "untraced 145.5/s")
    assert rows[cpu] == ("14.6", "untraced 13.0; Jaeger alone 0.4")


def test_results_without_a_traced_burst_still_summarise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _rows_from(tmp_path, monkeypatch, _market_results(traced=False))
    assert rows["market, burst of 5000: tasks decided per s"][0] == "145.5"
    assert not any("traced" in measure for measure in rows)
