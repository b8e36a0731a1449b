"""`agora task ...`: publishing tasks to the market (from a file, each validated first), a
task's status, bids, scores and outcome, its events as they happen, cancelling one, and the
tasks in a status."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import httpx

from agora.cli.files import load_models
from agora.cli.problems import CliError, describe_refusal
from agora.cli.sidecar import sidecar_for, token_header
from agora.cli.text import MAX_TEXT_CHARS, one_line, shorten
from agora.cli.transport import invoke, send
from agora.core.acceptance import DisputeVerdict, Verdict
from agora.core.contracts import TaskList
from agora.core.market import AllocationStatus, TaskSpec
from agora.core.messages import TaskCancel, TaskDispute, Topic
from agora.core.task_events import TaskEvent, TaskEventKind
from agora.core.task_lifecycle import TaskRecord
from agora.harness.system import app_id_hosting
from agora.runtime.event_streams import SseReader

__all__ = [
    "cmd_task_cancel",
    "cmd_task_list",
    "cmd_task_publish",
    "cmd_task_show",
    "cmd_task_watch",
    "event_line",
    "server_sent_events",
    "task_lines",
]


def cmd_task_publish(args: argparse.Namespace) -> int:
    # Every item is checked first: a typo is reported here, not dead-lettered later.
    specs = load_models(args.file, TaskSpec, "task_id")
    sidecar = sidecar_for(args)
    url = f"{sidecar.url}/v1.0/publish/agora-pubsub/{Topic.TASKS}"
    for spec in specs:
        send(sidecar, "POST", url, f"topic {Topic.TASKS}", spec)
        print(f"published {spec.task_id}")
    return 0


def task_lines(record: TaskRecord) -> list[str]:
    """A task for people: its status and history, every bid's scores (★ the winner), why it was
    rejected, and its outcome with what the agent said (its answer, or why it failed)."""
    spec, allocation, outcome = record.spec, record.allocation, record.outcome
    lines = [
        f"{spec.task_id}: {record.status}  ({spec.description})",
        "  history: " + " → ".join(change.status for change in record.history),
    ]
    if allocation is not None:
        for score in allocation.all_scores:
            won = "★" if score.agent_id == allocation.winning_agent_id else " "
            lines.append(
                f"  {won} {score.agent_id:<14} final={score.final_score:+.3f} "
                f"calibrated={score.calibrated_success_prob:.2f} reputation={score.reputation_score:.2f} "
                f"cost={score.cost_score:.2f} ucb={score.ucb_bonus:.2f}"
            )
        if allocation.reject_reason:
            lines.append(f"  rejected: {allocation.reject_reason}")
    if record.queued is not None:
        waited = "waiting" if record.status is AllocationStatus.QUEUED else "waited"
        since = record.queued.since.strftime("%Y-%m-%d %H:%M:%S UTC")
        lines.append(f"  queue: {waited} for a run slot since {since}: {record.queued.reason}")
    if record.failure_reason and outcome is None:
        lines.append(f"  failed: {record.failure_reason}")
    if outcome is not None:
        lines.append(
            f"  outcome: {'success' if outcome.actual_success else 'failure'} by {outcome.agent_id}, "
            f"{outcome.actual_steps} steps, ${outcome.actual_cost_usd:.4f}"
        )
        if outcome.summary:
            lines.append(f"  summary: {shorten(one_line(outcome.summary), MAX_TEXT_CHARS)}")
    if record.verdict is not None:
        lines.append(f"  verdict: {verdict_text(record.verdict)}")
    elif (
        outcome is not None
        and record.spec.acceptance is not None
        and record.status is AllocationStatus.ALLOCATED
    ):
        lines.append("  verdict: waiting for the task's checker app")
    if record.dispute is not None:
        lines.append(f"  disputed by {record.dispute.by}: {one_line(record.dispute.reason)}")
    return lines


def verdict_text(verdict: Verdict) -> str:
    """A check's verdict in a line: what it found, who checked, how, and why."""
    return f"{verdict.status} by {verdict.checked_by} ({verdict.kind}): {one_line(verdict.reason)}"


def cmd_task_show(args: argparse.Namespace) -> int:
    record = invoke(args, "GET", f"v1/tasks/{args.task_id}", TaskRecord, service="taskboard")
    print(record.model_dump_json(indent=2) if args.json else "\n".join(task_lines(record)))
    return 0


def cmd_task_cancel(args: argparse.Namespace) -> int:
    """Cancel a task that has not ended: one not decided yet is rejected, one an agent runs is
    stopped and fails; the task as it stands after."""
    cancel = TaskCancel(cancelled_by=args.who, reason=args.why)
    record = invoke(args, "POST", f"v1/tasks/{args.task_id}/cancel", TaskRecord, cancel, service="taskboard")
    print("\n".join(task_lines(record)))
    return 0


def cmd_task_dispute(args: argparse.Namespace) -> int:
    """Dispute a finished task's outcome within its window: its verdict and end become what the
    dispute says, and the agent's reputation is corrected once; the task as it stands after."""
    dispute = TaskDispute(disputed_by=args.who, reason=args.why, verdict=DisputeVerdict(args.verdict))
    record = invoke(
        args, "POST", f"v1/tasks/{args.task_id}/dispute", TaskRecord, dispute, service="taskboard"
    )
    print("\n".join(task_lines(record)))
    return 0


WATCH_RECONNECTS = 5
"""Times a watch resumes a broken stream (after the last event it printed) before it gives up."""
WATCH_READ_TIMEOUT_S = 60.0
"""A stream says something (an event, or a keep-alive every 15 s) at least this often."""


def event_line(event: TaskEvent) -> str:
    """One event for people: its number, what happened, and the detail."""
    what = str(event.status) if event.status is not None else str(event.kind)
    who = f" {event.agent_id}" if event.agent_id else ""
    if event.kind is TaskEventKind.OUTCOME:
        what = "outcome: success" if event.success else "outcome: failure"
    detail = f"  {shorten(one_line(event.detail), MAX_TEXT_CHARS)}" if event.detail else ""
    return f"{event.seq:>3}  {what}{who}{detail}"


def cmd_task_watch(args: argparse.Namespace) -> int:
    """A task's events as they happen (its stream on the task board), until it ends; a broken
    stream is resumed after the last event shown, so none is missed or shown twice."""
    sidecar = sidecar_for(args)
    app_id = app_id_hosting("taskboard", sidecar.app_ids)
    url = f"{sidecar.url}/v1.0/invoke/{app_id}/method/v1/tasks/{args.task_id}/events"
    seen, broken = 0, 0
    while True:
        # No `accept: text/event-stream` (see TaskBoardClient.events): through another app's
        # sidecar, daprd would turn the board's 404 for an unknown task into a 500.
        headers = {**token_header(), "last-event-id": str(seen)}
        try:
            with httpx.stream(
                "GET", url, headers=headers, timeout=httpx.Timeout(10.0, read=WATCH_READ_TIMEOUT_S)
            ) as answer:
                if answer.status_code >= 400:
                    answer.read()
                    raise CliError(describe_refusal(answer, "taskboard"))
                for kind, data in server_sent_events(answer.iter_lines()):
                    if kind == "end":
                        return 0
                    if kind == "dropped":
                        break  # fell behind: resume after the last event shown
                    event = TaskEvent.model_validate_json(data)
                    if event.seq > seen:
                        seen = event.seq
                        print(event_line(event), flush=True)
                        broken = 0
        except httpx.ConnectError:
            raise CliError(
                f"no Dapr sidecar answers at {sidecar.where}: start Agora with `make run`"
            ) from None
        except (httpx.HTTPError, ValueError) as exc:
            broken += 1
            if broken > WATCH_RECONNECTS:
                raise CliError(
                    f"the stream of {args.task_id} broke {broken} times in a row: {one_line(exc)}"
                ) from None
            time.sleep(min(8.0, 0.5 * 2**broken))


def server_sent_events(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """(event, data) of each event in a stream of Server-Sent Event lines (comments skipped)."""
    reader = SseReader()
    for line in lines:
        event = reader.line(line)
        if event is not None:
            yield event.event, event.data


def cmd_task_list(args: argparse.Namespace) -> int:
    listing = invoke(args, "GET", f"v1/tasks?status={args.status}", TaskList, service="taskboard")
    for task_id in listing.task_ids:
        print(task_id)
    return 0
