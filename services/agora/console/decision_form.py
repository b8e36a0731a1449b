"""The decision form: what a person submits on an escalation's page, read into the same
`ResumeRequest` the CLI sends, or refused with one readable sentence per field.

The form's prompt editor starts with the prompt the step used, so its text is sent as a
modified prompt only with modify_prompt, or with retry when it was edited."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import ValidationError

from agora.core.contracts import DeadlineExtension, ResumeRequest
from agora.core.escalation.checkpoints import CheckpointContext
from agora.core.escalation.decisions import (
    CheckpointAction,
    CheckpointResponse,
    EscalationAction,
    EscalationResponse,
)
from agora.core.escalation.digest import DIGEST_PATTERN
from agora.core.escalation.record import EscalationRecord, WaitingPartyKind
from agora.core.limits import MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.task_lifecycle import CHECK_ESCALATION_PREFIX, PERSON_ACTIONS

__all__ = [
    "EXTENSIONS",
    "FIELD_LABELS",
    "FormRefused",
    "actions_for",
    "deadline_extension",
    "decision_request",
    "prompt_of",
]

EXTENSIONS = {"15": "15 minutes", "60": "1 hour", "240": "4 hours", "1440": "1 day"}
"""How much later a deadline may be moved at once, in minutes, as the form offers it."""

FIELD_LABELS = {
    "action": "action",
    "modified_prompt": "prompt",
    "guidance": "guidance",
    "confidence_boost": "confidence boost",
    "reassign_to": "reassign to",
    "why": "reason",
    "context_digest": "page",
    "who": "person",
    "extend_minutes": "extension",
}


@dataclass
class FormRefused(Exception):
    """The form cannot be sent as it is: one readable problem per field, by field name."""

    problems: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return "; ".join(f"{FIELD_LABELS.get(k, k)}: {v}" for k, v in self.problems.items())


def actions_for(record: EscalationRecord) -> list[str]:
    """The actions that answer this escalation, in the order the form offers them: reassign
    only for a paused run of a task (another of its bidders can take it over); a task's failed
    check takes skip, abort and reassign only."""
    if isinstance(record.context, CheckpointContext):
        return [str(a) for a in CheckpointAction]
    if record.waiting_party.kind is WaitingPartyKind.TASK and record.escalation_id.startswith(
        CHECK_ESCALATION_PREFIX
    ):
        return [str(a) for a in PERSON_ACTIONS]  # a task's failed check: accept, fail, hand over
    runs_a_task = record.waiting_party.kind in (WaitingPartyKind.TASK, WaitingPartyKind.SESSION)
    return [str(a) for a in EscalationAction if a is not EscalationAction.REASSIGN or runs_a_task]


def prompt_of(record: EscalationRecord) -> str:
    """The prompt the step used (or will use, at a checkpoint): the editor's starting text."""
    context = record.context
    return context.prompt if isinstance(context, CheckpointContext) else context.prompt_used


def _normalized(text: str) -> str:
    """Browsers send a textarea with CRLF line ends; the stored prompt has LF."""
    return text.replace("\r\n", "\n")


def decision_request(form: Mapping[str, str], record: EscalationRecord, who: str) -> ResumeRequest:
    """The decision in `form` on `record`, by `who`; raises FormRefused."""
    problems: dict[str, str] = {}
    action = form.get("action", "").strip()
    allowed = actions_for(record)
    if action not in allowed:
        shown = action[:40] + ("…" if len(action) > 40 else "")
        problems["action"] = f"choose one of {', '.join(allowed)} (got {shown!r})" if action else "choose one"
    prompt = _normalized(form.get("modified_prompt", ""))
    guidance = _normalized(form.get("guidance", "")).strip()
    why = _normalized(form.get("why", "")).strip()
    bounded = (("modified_prompt", prompt, MAX_TEXT_CHARS), ("guidance", guidance, MAX_NOTE_CHARS),
               ("why", why, MAX_NOTE_CHARS))  # fmt: skip
    for name, text, limit in bounded:
        if len(text) > limit:
            problems[name] = f"at most {limit:,} characters (got {len(text):,})"
    boost = 0.0
    boost_text = form.get("confidence_boost", "").strip()
    if boost_text:
        try:
            boost = float(boost_text)
        except ValueError:
            boost = math.nan
        if not 0.0 <= boost <= 1.0:
            problems["confidence_boost"] = "a number from 0 to 1"
    digest = form.get("context_digest", "")
    if not re.fullmatch(DIGEST_PATTERN, digest):
        problems["context_digest"] = "this form did not come from the escalation's page; reload it"
    if problems:
        raise FormRefused(problems)

    edited = prompt.strip() and prompt != prompt_of(record)
    send_prompt = action == "modify_prompt" or (action == "retry" and edited)
    modified = prompt if send_prompt else None
    try:
        if isinstance(record.context, CheckpointContext):
            response: EscalationResponse | CheckpointResponse = CheckpointResponse(
                action=CheckpointAction(action), modified_prompt=modified, guidance=guidance or None
            )
        else:
            target = form.get("reassign_to", "").strip() if action == EscalationAction.REASSIGN else ""
            response = EscalationResponse(
                action=EscalationAction(action),
                modified_prompt=modified,
                guidance=guidance or None,
                confidence_boost=boost,
                reassign_to=target or None,
            )
        return ResumeRequest(decision=response, who=who, why=why, context_digest=digest)
    except ValidationError as exc:
        raise FormRefused(
            {str(e["loc"][-1]) if e["loc"] else "action": _sentence(e["msg"]) for e in exc.errors()}
        ) from None


def _sentence(message: str) -> str:
    return message.removeprefix("Value error, ")


def deadline_extension(
    form: Mapping[str, str], record: EscalationRecord, who: str, now: datetime
) -> DeadlineExtension:
    """The later deadline in `form`: the chosen extension counted from the current deadline
    (or from now, when that has passed); raises FormRefused."""
    problems: dict[str, str] = {}
    minutes = form.get("extend_minutes", "")
    if minutes not in EXTENSIONS:
        problems["extend_minutes"] = f"choose one of {', '.join(EXTENSIONS.values())}"
    why = _normalized(form.get("why", "")).strip()
    if len(why) > MAX_NOTE_CHARS:
        problems["why"] = f"at most {MAX_NOTE_CHARS:,} characters (got {len(why):,})"
    digest = form.get("context_digest", "")
    if not re.fullmatch(DIGEST_PATTERN, digest):
        problems["context_digest"] = "this form did not come from the escalation's page; reload it"
    if record.deadline is None:
        problems["extend_minutes"] = "this escalation has no deadline: it waits until someone decides"
    if problems:
        raise FormRefused(problems)
    assert record.deadline is not None
    later = max(record.deadline, now) + timedelta(minutes=int(minutes))
    return DeadlineExtension(deadline=later, who=who, why=why, context_digest=digest)
