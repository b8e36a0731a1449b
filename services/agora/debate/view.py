"""A debate as people read it, round by round (`agora debate show`, the `make run` demo)."""

from __future__ import annotations

from agora.core.debate.record import DebateRecord
from agora.core.limits import one_line


def debate_lines(record: DebateRecord, *, width: int = 100) -> list[str]:
    config = record.request.config
    head = f"{record.debate_id}: {record.state}"
    if record.routing_decision:
        head += f"  ({record.routing_decision})"
    lines = [head, f"  question: {one_line(record.question, width - 12)}"]
    for earlier in record.earlier:
        lines.append(
            f"  an earlier debate ended at convergence {earlier.final_convergence_score:.2f}; sent back"
        )
    for debate_round in record.rounds:
        lines.append(f"  round {debate_round.round_number}: convergence {debate_round.convergence_score:.2f}")
        for position in debate_round.positions:
            text = f"    {position.debater_id:<12} {position.confidence:.2f}  "
            lines.append(text + one_line(position.answer or "(no answer)", width - len(text)))
    result = record.result
    if result is not None:
        verdict = "escalated to a person" if result.escalate_to_human else "acted on"
        how = "single agent" if result.routing_decision == "single_agent" else config.aggregation.lower()
        lines.append(
            f"  {how}: {one_line(result.final_answer, 40)!r} (confidence {result.confidence:.2f}; {verdict})"
        )
    if record.escalation_id:
        lines.append(f"  waiting for a person: escalation {record.escalation_id}")
    if record.final_answer is not None:
        by = f" (given by {record.decided_by})" if record.answer_source == "person" else ""
        lines.append(f"  answer: {one_line(record.final_answer, width - 12)}{by}")
    if record.reason:
        lines.append(f"  reason: {record.reason}")
    return lines
