"""Every upgrade shim of Agora, in one place, with when it can go.

A shim is code that only reads or repairs what an earlier version wrote: state in an older
shape, a reminder it armed, a field an older reader would refuse. It keeps a rolling release
from losing work, and it is dead weight once nothing the earlier version left behind can still
be met. The code of each shim stays where it acts (`where`); this catalogue says what it keeps
and the check that shows it can be removed. `tests/unit/test_upgrades.py` fails when a listed
place no longer exists, and when code that mentions an earlier version is not listed here.

Workflow patches (a run's code choosing the steps its history recorded) are the other half of
upgrades and are listed in `agora.runtime.patches`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UpgradeShim:
    name: str
    where: tuple[str, ...]
    """`module:qualified.name` of each piece of the shim's code."""
    keeps: str
    """What an earlier version left behind that the shim still reads or repairs."""
    remove_when: str
    """The check that shows nothing it keeps can still be met."""


SHIMS: tuple[UpgradeShim, ...] = (
    UpgradeShim(
        "plan-save-with-one-span",
        ("agora.planner.workflow:SaveRecord._one_or_more",),
        "A plan run begun by an earlier version scheduled its record's saves with one finished "
        "span or none; its replay schedules the same input, which must still read.",
        "No plan run created before the release that brought it is in flight "
        "(`GET /v1/plans?state=RUNNING` and `?state=WAITING_FOR_HUMAN`).",
    ),
    UpgradeShim(
        "task-expire-reminder",
        ("agora.runtime.actor_host:EXPIRE_REMINDER", "agora.taskboard.actors:Task.expired"),
        "A task an earlier version ended carries an `expire` reminder, armed instead of the state "
        "TTL that ends tasks today; when it fires the task leaves every listing.",
        "A task's retention (`AGORA_TASK_RETENTION_SECONDS`) has passed since the release that "
        "brought the state TTL, so every such reminder has fired.",
    ),
    UpgradeShim(
        "task-award-reminder",
        ("agora.taskboard.actors:AWARD_REMINDER",),
        "An award an earlier version made carries an `award` reminder of its own, armed instead "
        "of the board's award watch; when it fires the award window closes as the watch would.",
        "The longest award window (`AGORA_AWARD_ACK_SECONDS`) has passed since the release that "
        "brought the award watch.",
    ),
    UpgradeShim(
        "escalations-in-actor-state",
        (
            "agora.escalation.actors:Escalation._adopt_earlier_state",
            "agora.escalation.store:adopt_earlier_records",
            "agora.escalation.app:STATUS_INDEX_NAMESPACE",
        ),
        "Earlier versions kept each escalation in its actor's own state and listed it in a status "
        "index of their own; at start-up and on first read such a record moves to its plain key "
        "and the listings, so an upgrade loses no escalation from the inbox.",
        "Every deployment's escalation store holds the adoption marker (`AdoptionDone` under "
        "`escalation:adoption:done`): it is written once nothing is left to adopt.",
    ),
    UpgradeShim(
        "task-spec-without-checkpoints",
        ("agora.core.market:TaskSpec.checkpoints",),
        "Apps of the version before checkpoints refuse a task spec that names the field; a spec "
        "without triggers is written without it, so they read it while a release rolls.",
        "No app of a version before `TaskSpec.checkpoints` runs (every service, worker and agent "
        "app upgraded).",
    ),
    UpgradeShim(
        "chat-message-without-tool-fields",
        ("agora.llm.client:ChatMessage.tool_calls", "agora.llm.client:ChatMessage.tool_call_id"),
        "A run's saved conversation is read by apps of the version before native tool calls while "
        "a release rolls; a message without a tool call is written without the two fields.",
        "No app of a version before native tool calls runs. (Leaving the fields out when unset also "
        "keeps saved conversations small, a reason to keep it.)",
    ),
)
