"""The Go agent app (examples/go-agent) speaks the published contracts: every body it sends,
built by the code that sends it (`go-agent samples`), validates with the models the services
validate with and carries exactly the fields of its JSON Schema (proto/jsonschema), no field
left to a default the Go side does not know; and its own Go tests pass.

Skipped where the Go toolchain is not installed."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
from pydantic import TypeAdapter

from agora.core.schemas import CONTRACTS, SCHEMA_DIR
from agora.harness.gobuild import GO_AGENT_SOURCE, GO_BUILD_ENV, go_agent, go_executable, source_hash
from agora.harness.toolchain import MissingTool

try:
    GO: str | None = go_executable()
except MissingTool:
    GO = None

pytestmark = pytest.mark.skipif(GO is None, reason="the Go toolchain is not installed")

SENT = {"capability_profile", "bid_offer", "award_acknowledgement", "task_outcome", "dead_letter"}
"""What the Go agent sends: its registration, its bids, its acknowledgments, its outcomes and
the letters of messages it refuses."""


@pytest.fixture(scope="module")
def samples() -> dict[str, Any]:
    binary = str(go_agent())
    done = subprocess.run([binary, "samples"], capture_output=True, text=True, timeout=60, check=True)
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_every_body_the_go_agent_sends_is_the_contract_s(samples: dict[str, Any]) -> None:
    assert {name.removesuffix(".json") for name in samples} == SENT
    for file_name, body in samples.items():
        name = file_name.removesuffix(".json")
        assert (SCHEMA_DIR / file_name).is_file(), file_name
        adapter: TypeAdapter[Any] = TypeAdapter(CONTRACTS[name].model)
        parsed = adapter.validate_json(json.dumps(body))
        dumped = adapter.dump_python(parsed, mode="json")
        assert dumped == body, f"{file_name}: its fields differ from the model's"
        schema = json.loads((SCHEMA_DIR / file_name).read_text())
        assert set(body) == set(schema["properties"]), f"{file_name}: not every field of the schema"


def test_the_build_is_cached_by_its_sources_hash() -> None:
    binary = go_agent()
    assert binary.parent.parent.name == f"go-agent-{source_hash(GO_AGENT_SOURCE)}"
    assert GO_AGENT_SOURCE not in binary.parents, "built outside the clone"
    assert go_agent() == binary


def test_the_go_agent_s_own_tests_pass() -> None:
    assert GO is not None
    done = subprocess.run(
        # -trimpath as the build (agora.harness.gobuild): the packages `make go-agent` compiled
        # are taken from Go's build cache instead of compiled again (10 s instead of 45 s).
        [GO, "test", "-trimpath", "./..."],
        cwd=GO_AGENT_SOURCE,
        env={**os.environ, **GO_BUILD_ENV},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_its_dapr_sdk_is_pinned_with_its_sums() -> None:
    assert "github.com/dapr/go-sdk v1.15.0" in (GO_AGENT_SOURCE / "go.mod").read_text()
    assert (GO_AGENT_SOURCE / "go.sum").read_text().count("github.com/dapr/go-sdk v1.15.0") == 2
