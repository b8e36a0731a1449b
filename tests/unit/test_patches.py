"""Workflow patches live in one place: their names are what runs in flight recorded, and no
workflow asks for a patch by a name of its own."""

from __future__ import annotations

from pathlib import Path

from agora.runtime.patches import PATCHES

SERVICES = Path(__file__).resolve().parents[2] / "services" / "agora"


def test_the_patch_names_are_those_runs_in_flight_recorded() -> None:
    assert {p.name: p.workflow for p in PATCHES} == {
        "plan.saves-ride-along": "plan_run",
        "plan.first-attempts-with-wave": "plan_run",
        "plan.not-planned-stops": "plan_run",
        "debate.rounds-in-one-step": "debate_run",
        "agent_run.deadline": "agent_run",
        "plan.decision-on-record": "plan_run",
        "debate.decision-on-record": "debate_run",
        "graph_run.decision-on-record": "graph_run",
    }


def test_only_the_patches_module_asks_the_engine_whether_a_run_is_patched() -> None:
    asking = sorted(
        str(path.relative_to(SERVICES))
        for path in SERVICES.rglob("*.py")
        if "is_patched(" in path.read_text() and path.name != "patches.py"
    )
    assert asking == []
