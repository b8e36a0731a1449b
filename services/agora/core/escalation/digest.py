"""Binding a decision to what its decision-maker saw: an escalation's shown fields (who waits,
the context, deadline and default, its status) each get a digest, and the escalation a digest
of them all (`context_digest`). A decision that carries the digest of the page it was made on
is applied only while the escalation still shows the same (`require_context`); otherwise it is
refused with the names of the fields that changed (`ContextChanged`), so nobody decides on a
situation they did not see.

Digests are SHA-256 over canonical JSON (sorted keys, no spaces), so the same record gives the
same digest in every process and language.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

from pydantic import JsonValue

from agora.core.errors import AgoraError
from agora.core.escalation.checkpoints import CheckpointContext
from agora.core.escalation.record import EscalationRecord

__all__ = [
    "DIGEST_PATTERN",
    "FIELD_DIGEST_CHARS",
    "ContextChanged",
    "changed_fields",
    "context_digest",
    "decode_field_digests",
    "encode_field_digests",
    "field_digests",
    "require_context",
    "shown_fields",
]

DIGEST_PATTERN = r"^[0-9a-f]{64}$"
"""A context digest: 64 lowercase hex digits (SHA-256)."""
FIELD_DIGEST_CHARS = 16
"""Hex digits kept of each field's digest (enough to tell a change, short enough for a form)."""
_FIELD_NAME = re.compile(r"^[a-z_ ]{1,40}$")
_FIELD_DIGEST = re.compile(f"^[0-9a-f]{{{FIELD_DIGEST_CHARS}}}$")
_MAX_ENCODED_FIELDS = 32


class ContextChanged(AgoraError):
    """A decision made on an earlier view of the escalation: what it shows changed since (its
    deadline, default, context or status). `details.changed` names the fields when the caller
    sent them; the decision is not applied."""

    code = "CONTEXT_CHANGED"
    http_status = 409


def _canonical(value: JsonValue) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def shown_fields(record: EscalationRecord) -> dict[str, str]:
    """What a decision-maker is shown, field by field, each as canonical JSON, by a readable
    name (the name is what a refusal reports as changed)."""
    context = record.context
    common: dict[str, JsonValue] = {
        "status": str(record.status),
        "waiting party": record.waiting_party.model_dump(mode="json"),
        "deadline": record.deadline.isoformat() if record.deadline is not None else None,
        "default decision": (
            record.default_decision.model_dump(mode="json") if record.default_decision is not None else None
        ),
        "step": [context.job_id, context.step],
        "retries": context.retry_count,
    }
    if isinstance(context, CheckpointContext):
        specific: dict[str, JsonValue] = {
            "prompt": context.prompt,
            "error history": list(context.previous_errors),
            "trigger": context.trigger.model_dump(mode="json") if context.trigger is not None else None,
        }
    else:
        specific = {
            "prompt": context.prompt_used,
            "output summary": context.output_summary,
            "confidence": context.confidence,
            "error history": list(context.error_history),
            "validation results": [r.model_dump(mode="json") for r in context.validation_results],
            "suggestions": [s.model_dump(mode="json") for s in context.historical_suggestions],
        }
    return {name: _canonical(value) for name, value in {**common, **specific}.items()}


def field_digests(record: EscalationRecord) -> dict[str, str]:
    """Each shown field's digest (its first `FIELD_DIGEST_CHARS` hex digits), by name."""
    return {
        name: hashlib.sha256(text.encode()).hexdigest()[:FIELD_DIGEST_CHARS]
        for name, text in shown_fields(record).items()
    }


def context_digest(record: EscalationRecord) -> str:
    """The digest of everything shown: equal exactly when every shown field is."""
    return hashlib.sha256(_canonical(dict(sorted(shown_fields(record).items()))).encode()).hexdigest()


def changed_fields(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """The names whose digests differ (or that one side lacks), in `after`'s order, then the
    ones only `before` has."""
    changed = [name for name, digest in after.items() if before.get(name) != digest]
    return changed + [name for name in before if name not in after]


def encode_field_digests(digests: Mapping[str, str]) -> str:
    """Field digests as one line for a form: `name=digest;name=digest`."""
    return ";".join(f"{name}={digest}" for name, digest in digests.items())


def decode_field_digests(text: str) -> dict[str, str]:
    """The field digests of `encode_field_digests`; anything malformed is left out (a form
    field comes from the browser: at worst a change is reported without its field names)."""
    digests: dict[str, str] = {}
    for part in text.split(";")[:_MAX_ENCODED_FIELDS]:
        name, _, digest = part.partition("=")
        if _FIELD_NAME.match(name) and _FIELD_DIGEST.fullmatch(digest):
            digests[name] = digest
    return digests


def require_context(record: EscalationRecord, expected: str | None) -> None:
    """Raise ContextChanged when a decision bound to `expected` was made on a different view
    of `record` (None: the decision is not bound, as from a script)."""
    if expected is not None and expected != context_digest(record):
        raise ContextChanged(
            f"escalation {record.escalation_id} changed since the decision was prepared "
            f"(it is now {record.status}); look at it again before deciding",
            status=str(record.status),
        )
