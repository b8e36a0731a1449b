"""A decider disputes a finished task's outcome from its page (`POST /tasks/{id}/dispute`): the
board's dispute, in the signed-in person's name. A form out of its session is refused, as a
decision's is; a verdict that is neither word or a missing reason is shown back on the page
with what to send; the board's refusal (past the window, disputed already) is shown as it
says it."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from agora.console.auth import Person
from agora.console.boards import checked_id, link, service_answer
from agora.console.pages import PageError, Pages
from agora.console.sessions import Sessions
from agora.core.acceptance import DisputeVerdict
from agora.core.errors import AgoraError
from agora.core.limits import MAX_NOTE_CHARS
from agora.core.messages import TaskDispute
from agora.core.task_lifecycle import TaskRecord
from agora.runtime.clients import TaskBoardClient
from agora.runtime.sidecar import DaprError, SidecarUnavailable

__all__ = ["TaskDisputes", "dispute_of_form"]


def dispute_of_form(form: Mapping[str, str], who: str) -> tuple[TaskDispute | None, dict[str, str]]:
    """The dispute a page's form makes, or what is wrong with it, by field."""
    problems: dict[str, str] = {}
    verdict = form.get("verdict", "").strip()
    verdicts = [str(v) for v in DisputeVerdict]
    if verdict not in verdicts:
        problems["verdict"] = f"choose {' or '.join(verdicts)}"
    why = form.get("why", "").replace("\r\n", "\n").strip()
    if not why:
        problems["why"] = "say why the outcome was otherwise"
    elif len(why) > MAX_NOTE_CHARS:
        problems["why"] = f"at most {MAX_NOTE_CHARS:,} characters (got {len(why):,})"
    if problems:
        return None, problems
    return TaskDispute(disputed_by=who, reason=why, verdict=DisputeVerdict(verdict)), {}


class TaskDisputes:
    def __init__(self, board: TaskBoardClient, sessions: Sessions, pages: Pages, traces: bool) -> None:
        self._board = board
        self._sessions = sessions
        self._pages = pages
        self._traces = traces

    def install(self, app: FastAPI) -> None:
        app.add_api_route("/tasks/{task_id}/dispute", self.dispute, methods=["POST"], include_in_schema=False)

    async def dispute(self, task_id: str, request: Request) -> Response:
        person, nonce, form = await self._sessions.decider_form(
            request, "dispute again", "tasks but not dispute them"
        )
        record = await service_answer(self._board.get(checked_id(task_id, "task")), "task")
        dispute, problems = dispute_of_form(form, person.name)
        if dispute is None:
            return self._page(record, person, nonce, 422, problems=problems, form=form)
        try:
            await self._board.dispute(record.task_id, dispute)
        except AgoraError as exc:
            return self._page(record, person, nonce, exc.http_status, notice=exc.message, form=form)
        except (DaprError, SidecarUnavailable):
            raise PageError(503, "the task board is not answering; try again in a moment") from None
        return RedirectResponse(link("tasks", record.task_id), status_code=303)

    def _page(
        self,
        record: TaskRecord,
        person: Person,
        nonce: str,
        status: int,
        *,
        problems: Mapping[str, str] | None = None,
        notice: str | None = None,
        form: Mapping[str, str] | None = None,
    ) -> HTMLResponse:
        return self._pages.render(
            "task.html", status, person=person, csrf=self._sessions.csrf_token(nonce), task=record,
            traces=self._traces, problems=problems or {}, notice=notice, form=form or {},
        )  # fmt: skip
