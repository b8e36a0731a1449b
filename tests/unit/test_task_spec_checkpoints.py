"""A task's own checkpoint triggers travel with its spec, and a spec without any is written as
an earlier version wrote it: apps of that version, which refuse fields they do not know, read it
while a release rolls."""

from __future__ import annotations

import json

from agora.core.escalation.checkpoints import CheckpointTrigger
from agora.core.market import TaskSpec


def test_a_spec_without_checkpoints_is_written_without_the_field_and_one_with_them_keeps_them() -> None:
    plain = TaskSpec(task_id="t-1", description="Migrate the orders table", required_skills=["migration"])
    assert "checkpoints" not in json.loads(plain.model_dump_json())
    assert "checkpoints" not in plain.model_dump(mode="json")

    guarded = plain.model_copy(
        update={"checkpoints": [CheckpointTrigger(name="prod", prompt_contains=["prod"])]}
    )
    written = guarded.model_dump_json()
    assert json.loads(written)["checkpoints"][0]["name"] == "prod"
    assert TaskSpec.model_validate_json(written) == guarded
