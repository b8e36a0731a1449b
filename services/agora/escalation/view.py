"""An escalation as a person reads it before deciding (`agora escalations show`, and one line
per escalation in `agora escalations list`): fields by name, numbers with two decimals, past
decisions as a numbered list, the decision and the audit trail."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pydantic import JsonValue

from agora.core.checks import ValidationResult
from agora.core.escalation.checkpoints import CheckpointContext
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import CheckpointResponse, EscalationResponse
from agora.core.escalation.digest import context_digest
from agora.core.escalation.record import AbortSummary, EscalationRecord
from agora.core.escalation.suggestions import HistoricalSuggestion

INDENT = "  "
OUTCOMES = {True: "succeeded", False: "failed", None: "outcome unknown"}


def when(moment: datetime) -> str:
    """A time as people compare them across a listing: UTC, to the second."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def number(value: float) -> str:
    return f"{value:.2f}"


def shown_value(value: JsonValue) -> str:
    """A free-form value on one line: numbers with two decimals (also inside lists and
    mappings), yes/no for booleans, "-" for nothing."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, int | str):
        return _flat(str(value))
    return json.dumps(_rounded(value), ensure_ascii=False)


def _flat(text: str) -> str:
    """A note on one line (each run of whitespace one space), whole: a person deciding reads
    all of it."""
    return " ".join(text.split())


def _rounded(value: JsonValue) -> JsonValue:
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    return value


def _text(label: str, text: str, indent: str) -> list[str]:
    """`label: text`, a text of several lines continued below it, indented."""
    first, *rest = text.splitlines() or [""]
    return [f"{indent}{label}: {first}", *(f"{indent}{INDENT}{line}" for line in rest)]


def _numbered(items: list[str], indent: str) -> list[str]:
    return [f"{indent}{position}. {item}" for position, item in enumerate(items, 1)]


def confidence_of(record: EscalationRecord) -> str:
    context = record.context
    return number(context.confidence) if isinstance(context, EscalationContext) else "-"


def escalation_row(record: EscalationRecord) -> str:
    """One line of a listing: id, status, who waits, confidence, when it was parked, and the
    deadline of one that still waits."""
    party = record.waiting_party
    deadline = f"  deadline {when(record.deadline)}" if record.deadline is not None and record.waiting else ""
    return (
        f"{record.escalation_id:<28} {record.status:<18} {party.kind} {party.id}  "
        f"confidence {confidence_of(record)}  created {when(record.created_at)}{deadline}"
    )


def response_lines(response: EscalationResponse | CheckpointResponse, indent: str) -> list[str]:
    """What a decision (or a default decision) says beyond its action."""
    lines = []
    if response.modified_prompt is not None:
        lines += _text("modified prompt", response.modified_prompt, indent)
    if response.guidance:
        lines += _text("guidance", response.guidance, indent)
    if isinstance(response, EscalationResponse) and response.confidence_boost:
        lines.append(f"{indent}confidence boost: {number(response.confidence_boost)}")
    return lines


def suggestion_text(suggestion: HistoricalSuggestion) -> str:
    past = f", escalation {suggestion.escalation_id}" if suggestion.escalation_id else ""
    return (
        f"{suggestion.action} ({OUTCOMES[suggestion.outcome_succeeded]}): similarity "
        f"{number(suggestion.similarity)}, confidence then {number(suggestion.confidence)}{past}"
    )


def context_lines(context: EscalationContext | CheckpointContext) -> list[str]:
    """The situation the decision is about, each field by name."""
    indent = INDENT
    if isinstance(context, CheckpointContext):
        lines = [
            f"context: a checkpoint before step {context.step} of {context.job_id}",
            f"{indent}retries so far: {context.retry_count}",
        ]
        if context.trigger is not None:
            message = f": {_flat(context.trigger.message)}" if context.trigger.message.strip() else ""
            lines.append(f"{indent}trigger: {context.trigger.name}{message}")
        lines += _text("prompt", context.prompt, indent)
        if context.previous_errors:
            lines.append(f"{indent}previous errors:")
            lines += _numbered([_flat(e) for e in context.previous_errors], indent + INDENT)
        return lines
    lines = [
        f"context: step {context.step} of {context.job_id}",
        f"{indent}confidence: {number(context.confidence)}",
        f"{indent}retries so far: {context.retry_count}",
    ]
    lines += _text("prompt", context.prompt_used, indent)
    lines += _text("output summary", context.output_summary, indent)
    if context.error_history:
        lines.append(f"{indent}error history (oldest first):")
        lines += _numbered([_flat(e) for e in context.error_history], indent + INDENT)
    if context.validation_results:
        lines.append(f"{indent}validation results:")
        lines += _numbered(
            [validation_line(result) for result in context.validation_results], indent + INDENT
        )
    return lines


def validation_line(result: ValidationResult) -> str:
    """One check on one line: `subgoal collect_data: failed (FAILED), attempts 2.00: no data`."""
    verdict = {True: "passed", False: "failed", None: "open"}[result.passed]
    head = " ".join(part for part in (result.kind, result.subject) if part) or "check"
    state = f"{verdict} ({result.detail})" if result.detail else verdict
    figures = ", ".join(f"{name} {number(value)}" for name, value in result.figures.items())
    reason = _flat(result.failure_reason) if result.failure_reason else ""
    return ": ".join(part for part in (head, ", ".join(p for p in (state, figures) if p), reason) if part)


def suggestion_lines(context: EscalationContext | CheckpointContext) -> list[str]:
    """How similar past escalations were decided and how that turned out (checkpoints have none)."""
    if not isinstance(context, EscalationContext):
        return []
    if not context.historical_suggestions:
        return ["suggestions: none (no similar past escalation)"]
    lines = ["suggestions (similar past escalations, the most relevant first):"]
    for position, suggestion in enumerate(context.historical_suggestions, 1):
        lines.append(f"{INDENT}{position}. {suggestion_text(suggestion)}")
        if suggestion.guidance:
            lines.append(f"{INDENT * 2}guidance: {_flat(suggestion.guidance)}")
    return lines


def abort_lines(summary: AbortSummary) -> list[str]:
    indent = INDENT
    lines = [f"aborted by {summary.aborted_by} at {when(summary.aborted_at)}"]
    lines += _text("reason", summary.reason, indent)
    lines += _text("progress", summary.progress_summary, indent)
    lines.append(f"{indent}cleanup completed: {shown_value(summary.cleanup_completed)}")
    return lines


def escalation_lines(record: EscalationRecord) -> list[str]:
    """The whole record for a person: who waits and since when, the context, similar past
    decisions, the decision if made, and the audit trail."""
    party = record.waiting_party
    lines = [
        f"{record.escalation_id}: {record.status}",
        f"{INDENT}waiting: {party.kind} {party.id}",
        f"{INDENT}created: {when(record.created_at)}",
    ]
    if record.deadline is not None and record.default_decision is not None:
        lines.append(
            f"{INDENT}deadline: {when(record.deadline)}, then by default: {record.default_decision.action}"
        )
        lines += response_lines(record.default_decision, INDENT * 2)
    lines += context_lines(record.context)
    lines += suggestion_lines(record.context)
    if record.decision is not None:
        decided = f" at {when(record.decided_at)}" if record.decided_at is not None else ""
        lines.append(f"decision: {record.decision.action} by {record.decided_by or '-'}{decided}")
        lines += response_lines(record.decision, INDENT)
    if record.abort_summary is not None:
        lines += abort_lines(record.abort_summary)
    lines.append("audit:")
    for entry in record.audit:
        why = f" ({_flat(entry.why)})" if entry.why.strip() else ""
        lines.append(f"{INDENT}{when(entry.when)}  {entry.who}: {entry.what}{why}")
    if record.waiting:
        # A decision sent with `--seen` applies only while the escalation shows what is above.
        lines.append(
            f"context digest: {context_digest(record)} (resume --seen it to decide on what is shown)"
        )
    return lines
