"""The console's pure parts: the context digest a decision is bound to, signing in and
sessions, the decision form, the inbox's filters, pages that show hostile text as text, and the
escalation pages on a fake escalation service."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import pytest
from fastapi import Request
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import TracerProvider
from starlette.types import Message

from agora.console.app import create_app
from agora.console.auth import (
    Person,
    Role,
    SessionSigner,
    SignInRefused,
    SignInThrottle,
    hash_secret,
    load_users,
    proxied_person,
    verify_secret,
)
from agora.console.decision_form import FormRefused, actions_for, deadline_extension, decision_request
from agora.console.escalation_pages import EscalationPages
from agora.console.escalation_views import EscalationState, belongs_to, escalation_values, refusal
from agora.console.inbox import InboxFilter, SharedReading, SharedReadings, age_text
from agora.console.pages import PageError, Pages, templates
from agora.console.sessions import Sessions
from agora.console.settings import ConsoleSettings
from agora.console.task_disputes import dispute_of_form
from agora.console.traces import JaegerAnswer, timeline
from agora.console.users import entry_yaml, local_sign_in
from agora.core.contracts import ResumeRequest
from agora.core.errors import AgoraError, IllegalTransition
from agora.core.escalation.checkpoints import CheckpointContext
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import CheckpointResponse, EscalationAction, EscalationResponse
from agora.core.escalation.digest import (
    ContextChanged,
    changed_fields,
    context_digest,
    decode_field_digests,
    encode_field_digests,
    field_digests,
    require_context,
)
from agora.core.escalation.record import (
    AgentNotWaiting,
    EscalationRecord,
    WaitingParty,
    WaitingPartyKind,
    extend_deadline,
    park,
    resolve,
)
from agora.runtime.clients import EscalationClient

NOW = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
HOSTILE = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'


def record(
    escalation_id: str = "esc-1",
    *,
    prompt: str = "Migrate the orders table",
    confidence: float = 0.3,
    kind: WaitingPartyKind = WaitingPartyKind.SESSION,
    created: datetime = NOW,
    deadline: datetime | None = None,
) -> EscalationRecord:
    context = EscalationContext(
        job_id="job-1",
        step=2,
        validation_results=[],
        confidence=confidence,
        retry_count=0,
        error_history=["step 2: unsure"],
        prompt_used=prompt,
        output_summary="I think so",
    )
    default = EscalationResponse(action=EscalationAction.ABORT) if deadline is not None else None
    return park(
        escalation_id,
        WaitingParty(kind=kind, id="party-1"),
        context,
        now=created,
        deadline=deadline,
        default_decision=default,
    )


# -- the context digest -------------------------------------------------------------------------


def test_the_digest_is_stable_and_changes_with_what_is_shown() -> None:
    first = record()
    assert context_digest(first) == context_digest(record())
    assert len(context_digest(first)) == 64
    later = record(deadline=NOW + timedelta(hours=1))
    assert context_digest(later) != context_digest(first)
    assert changed_fields(field_digests(first), field_digests(later)) == ["deadline", "default decision"]
    reworded = record(prompt="Migrate the orders table carefully")
    assert changed_fields(field_digests(first), field_digests(reworded)) == ["prompt"]


def test_a_decision_changes_the_status_field() -> None:
    waiting = record()
    decided = resolve(waiting, EscalationResponse(action=EscalationAction.RETRY), "alice", "", NOW)
    assert changed_fields(field_digests(waiting), field_digests(decided)) == ["status"]


def test_field_digests_travel_through_a_form_and_junk_is_dropped() -> None:
    digests = field_digests(record())
    assert decode_field_digests(encode_field_digests(digests)) == digests
    assert decode_field_digests("status=zz;<b>=0123456789abcdef;prompt=0123456789abcdef") == {
        "prompt": "0123456789abcdef"
    }


def test_a_decision_bound_to_another_view_is_refused() -> None:
    shown = record()
    require_context(shown, None)
    require_context(shown, context_digest(shown))
    with pytest.raises(ContextChanged) as refused:
        require_context(shown, context_digest(record(prompt="other")))
    assert refused.value.code == "CONTEXT_CHANGED" and refused.value.http_status == 409


def test_a_checkpoint_has_its_own_shown_fields() -> None:
    context = CheckpointContext(job_id="job-1", step=1, prompt="Delete the bucket")
    checkpoint = park("cp-1", WaitingParty(kind="task", id="t-1"), context, now=NOW)
    assert {"prompt", "trigger", "status"} <= set(field_digests(checkpoint))


# -- people, secrets and sessions ---------------------------------------------------------------


def test_a_secret_is_stored_as_a_salted_scrypt_hash() -> None:
    stored = hash_secret("correct horse battery")
    assert stored.startswith("scrypt$") and "correct" not in stored
    assert stored != hash_secret("correct horse battery")  # salted
    assert verify_secret("correct horse battery", stored)
    assert not verify_secret("wrong", stored)
    assert not verify_secret("x", "scrypt$junk") and not verify_secret("x", "plain")
    assert not verify_secret("a" * 5000, stored)


def test_the_users_file_signs_people_in_with_their_roles(tmp_path: Path) -> None:
    users = tmp_path / "users.yaml"
    users.write_text(
        "users:\n"
        + entry_yaml("alice", Role.DECIDER, "alice-secret-1")
        + entry_yaml("vic", Role.VIEWER, "vic-2")
    )
    book = load_users(users)
    assert book.sign_in("alice", "alice-secret-1") == Person(name="alice", role=Role.DECIDER)
    assert not book.sign_in("vic", "vic-2").may_decide
    for name, secret in (("alice", "vic-2"), ("nobody", "alice-secret-1"), ("", "")):
        with pytest.raises(SignInRefused):
            book.sign_in(name, secret)


def test_a_broken_users_file_is_named_without_its_content(tmp_path: Path) -> None:
    users = tmp_path / "users.yaml"
    users.write_text("users:\n  - name: alice\n    role: boss\n    secret_hash: hunter2\n")
    with pytest.raises(ValueError) as refused:
        load_users(users)
    assert str(users) in str(refused.value) and "hunter2" not in str(refused.value)


def test_the_token_signs_in_its_person_only() -> None:
    operator = Person(name="operator", role=Role.DECIDER)
    book = load_users(None, "a-long-random-token", operator)
    assert book.sign_in("anyone", "a-long-random-token") == operator
    with pytest.raises(SignInRefused):
        book.sign_in("operator", "a-long-random-tokeN")
    assert not load_users(None, "", operator).anyone


def test_the_proxy_header_is_trusted_only_when_configured() -> None:
    headers = {"x-forwarded-user": "alice"}
    assert proxied_person(headers, None, ["alice"]) is None
    assert proxied_person(headers, "X-Forwarded-User", ["alice"]) == Person(name="alice", role=Role.DECIDER)
    assert proxied_person(headers, "X-Forwarded-User", []) == Person(name="alice", role=Role.VIEWER)
    assert proxied_person({"x-forwarded-user": "a b"}, "X-Forwarded-User", []) is None


def test_sessions_are_signed_expire_and_carry_their_csrf_token() -> None:
    signer = SessionSigner(b"k" * 32, lifetime_seconds=60)
    cookie, session = signer.issue(Person(name="alice", role=Role.DECIDER), now=1000)
    opened = signer.open(cookie, now=1030)
    assert opened is not None and opened.person.name == "alice" and opened.nonce == session.nonce
    assert signer.open(cookie, now=1061) is None
    body, mac = cookie.split(".")
    forged_body = body[:-2] + ("AA" if body[-2:] != "AA" else "BB")
    assert signer.open(f"{forged_body}.{mac}", now=1030) is None
    assert SessionSigner(b"other-key-123456", 60).open(cookie, now=1030) is None
    for junk in ("", "x", "a.b.c", "!!.??"):
        assert signer.open(junk, now=1030) is None
    token = signer.csrf_token(session.nonce)
    assert signer.csrf_valid(session.nonce, token) and not signer.csrf_valid(session.nonce, token[:-1] + "x")
    assert signer.csrf_token("another session") != token


def test_guessing_is_slowed_per_name_and_per_address() -> None:
    throttle = SignInThrottle(attempts=3, window_seconds=60)
    keys = ["name:alice", "from:10.0.0.1"]
    for second in range(3):
        assert throttle.allows(keys, now=second)
        throttle.refused(keys, now=second)
    assert not throttle.allows(keys, now=10)
    assert not throttle.allows(["name:bob", "from:10.0.0.1"], now=10)  # the same address
    assert throttle.allows(["name:bob", "from:10.0.0.2"], now=10)
    assert throttle.allows(keys, now=61)  # the oldest refusal left the window


def test_local_sign_in_files_are_private(tmp_path: Path) -> None:
    users, secret = local_sign_in(tmp_path / "console")
    assert users.stat().st_mode & 0o777 == 0o600 and secret.stat().st_mode & 0o777 == 0o600
    book = load_users(users)
    assert book.sign_in("operator", secret.read_text().strip()).may_decide
    assert secret.read_text().strip() not in users.read_text()


# -- the decision form --------------------------------------------------------------------------


def form(**fields: str) -> dict[str, str]:
    return {"context_digest": "a" * 64, **fields}


def test_modify_prompt_sends_the_edited_prompt_with_the_digest() -> None:
    shown = record()
    request = decision_request(
        form(action="modify_prompt", modified_prompt="New\r\nprompt", why=" ok ", confidence_boost="0.2"),
        shown,
        "alice",
    )
    assert request.decision.action == "modify_prompt" and request.decision.modified_prompt == "New\nprompt"
    assert isinstance(request.decision, EscalationResponse) and request.decision.confidence_boost == 0.2
    assert (request.who, request.why, request.context_digest) == ("alice", "ok", "a" * 64)


def test_the_prefilled_prompt_goes_only_with_modify_prompt_or_an_edited_retry() -> None:
    shown = record()
    unchanged = form(modified_prompt=shown.context.prompt_used)  # type: ignore[union-attr]
    assert decision_request({**unchanged, "action": "retry"}, shown, "a").decision.modified_prompt is None
    assert decision_request({**unchanged, "action": "skip"}, shown, "a").decision.modified_prompt is None
    edited = decision_request(form(action="retry", modified_prompt="Try again"), shown, "a")
    assert edited.decision.modified_prompt == "Try again"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"action": "explode"}, "action"),
        ({"action": ""}, "action"),
        ({"action": "retry", "guidance": "g" * 2049}, "guidance"),
        ({"action": "retry", "modified_prompt": "p" * 16_385}, "modified_prompt"),
        ({"action": "retry", "confidence_boost": "2"}, "confidence_boost"),
        ({"action": "retry", "confidence_boost": "nan"}, "confidence_boost"),
        ({"action": "modify_prompt", "modified_prompt": "  "}, "modified_prompt"),
    ],
)
def test_bad_input_is_refused_by_field(fields: dict[str, str], problem: str) -> None:
    with pytest.raises(FormRefused) as refused:
        decision_request(form(**fields), record(), "alice")
    assert problem in refused.value.problems


def test_reassign_is_offered_for_a_task_s_paused_run_and_sends_the_bidder_named() -> None:
    assert "reassign" in actions_for(record(kind=WaitingPartyKind.SESSION))
    assert "reassign" in actions_for(record(kind=WaitingPartyKind.TASK))
    assert "reassign" not in actions_for(record(kind=WaitingPartyKind.PLAN_STEP))
    failed_check = record("check-t1.1", kind=WaitingPartyKind.TASK)
    assert actions_for(failed_check) == ["skip", "abort", "reassign"], "accept, fail or hand it over"
    with pytest.raises(FormRefused, match="choose one of skip, abort, reassign"):
        decision_request(form(action="retry"), failed_check, "alice")
    named = decision_request(form(action="reassign", reassign_to=" b2 "), record(), "alice")
    assert isinstance(named.decision, EscalationResponse) and named.decision.reassign_to == "b2"
    nearest = decision_request(form(action="reassign", reassign_to=""), record(), "alice")
    assert isinstance(nearest.decision, EscalationResponse) and nearest.decision.reassign_to is None
    ignored = decision_request(form(action="retry", reassign_to="b2"), record(), "alice")
    assert isinstance(ignored.decision, EscalationResponse) and ignored.decision.reassign_to is None
    with pytest.raises(FormRefused) as refused:
        decision_request(form(action="reassign"), record(kind=WaitingPartyKind.PLAN_STEP), "alice")
    assert "action" in refused.value.problems
    with pytest.raises(FormRefused) as refused:
        decision_request(form(action="reassign", reassign_to="has space"), record(), "alice")
    assert "reassign_to" in refused.value.problems


def test_a_form_without_the_page_digest_is_refused() -> None:
    with pytest.raises(FormRefused) as refused:
        decision_request({"action": "retry", "context_digest": "nope"}, record(), "alice")
    assert "context_digest" in refused.value.problems


# -- the inbox ----------------------------------------------------------------------------------


def test_the_inbox_filter_is_read_from_the_query_string_and_narrows_the_listing() -> None:
    old = record("old", created=NOW - timedelta(hours=2), confidence=0.1, kind=WaitingPartyKind.TASK)
    new = record("new", created=NOW - timedelta(minutes=1), confidence=0.7)
    by_kind = InboxFilter.of_query({"kind": "task"})
    assert [r.escalation_id for r in (old, new) if by_kind.admits_record(r, NOW)] == ["old"]
    by_age = InboxFilter.of_query({"age": "60"})
    assert [r.escalation_id for r in (old, new) if by_age.admits_record(r, NOW)] == ["old"]
    by_confidence = InboxFilter.of_query({"confidence": "0.5"})
    assert [r.escalation_id for r in (old, new) if by_confidence.admits_record(r, NOW)] == ["old"]
    assert (
        InboxFilter.of_query({"kind": "<script>", "age": "-3", "confidence": "9", "page": "x"})
        == InboxFilter()
    )
    assert by_kind.query() == {"kind": "task"}
    second = InboxFilter.of_query({"kind": "task", "page": "1"})
    assert second.page == 1 and second.query() == {"kind": "task", "page": "1"}
    assert second.query(0) == {"kind": "task"} and second.listing == by_kind.listing


async def test_each_inbox_page_has_its_own_shared_reading() -> None:
    reads: list[InboxFilter] = []

    async def read(shown: InboxFilter) -> int:
        reads.append(shown)
        return len(reads)

    readings: SharedReadings[InboxFilter, int] = SharedReadings(read, 10.0, lambda: 0.0, kept=2)
    first, second = InboxFilter(), InboxFilter(page=1)
    assert [await readings.get(first), await readings.get(first), await readings.get(second)] == [1, 1, 2]
    await readings.get(InboxFilter(page=2))  # the least recently used (the first page) is let go
    assert await readings.get(first) == 4


def test_ages_read_in_the_largest_unit_that_fits() -> None:
    assert [
        age_text(NOW - timedelta(seconds=s), NOW) for s in (5, 125, 3 * 3600 + 300, 2 * 86400 + 3600)
    ] == [
        "5 s",
        "2 min",
        "3 h 5 min",
        "2 d 1 h",
    ]


# -- pages show hostile text as text ------------------------------------------------------------


def test_an_escalation_page_escapes_everything_it_shows() -> None:
    hostile = record("<script>esc</script>", prompt=HOSTILE)
    html = (
        templates()
        .get_template("escalation.html")
        .render(
            refresh_ms=1000,
            person=Person(name=HOSTILE, role=Role.DECIDER),
            csrf="c",
            record=hostile,
            context=hostile.context,
            confidence=0.3,
            prompt=HOSTILE,
            actions=["retry"],
            digest="d",
            fields="f",
            deadline_iso=None,
            extensions={},
            problems={"why": HOSTILE},
            labels={},
            notice=HOSTILE,
            changed=[HOSTILE],
            form={"why": HOSTILE},
            href="/escalations/x",
        )
    )
    assert "<script>alert" not in html and "<img src=x" not in html and "<script>esc" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;" in html


def test_inbox_rows_escape_ids_and_parties() -> None:
    hostile = record("esc<b>", kind=WaitingPartyKind.TASK)
    html = (
        templates()
        .get_template("inbox_rows.html")
        .render(
            rows=[{"record": hostile, "age": "1 s", "confidence": 0.3, "href": "/escalations/esc%3Cb%3E"}],
            total=1,
            first=1,
            query="",
            older="kind=task&page=1",
        )
    )
    assert "esc<b>" not in html and "esc&lt;b&gt;" in html
    assert "1 to 1 of the newest; 1 waiting in all." in html and 'href="/inbox?kind=task&amp;page=1"' in html


# -- moving a deadline --------------------------------------------------------------------------


def test_a_waiting_escalations_deadline_moves_later_with_an_audit_entry() -> None:
    waiting = record(deadline=NOW + timedelta(hours=1))
    later = NOW + timedelta(hours=3)
    moved = extend_deadline(waiting, later, who="alice", why="data team", now=NOW)
    assert moved.deadline == later and moved.default_decision == waiting.default_decision
    assert (moved.audit[-1].who, moved.audit[-1].why) == ("alice", "data team")
    assert moved.audit[-1].what == f"deadline extended to {later.isoformat()}"
    assert changed_fields(field_digests(waiting), field_digests(moved)) == ["deadline"]


def test_a_deadline_only_moves_later_and_only_while_waiting() -> None:
    waiting = record(deadline=NOW + timedelta(hours=1))
    for too_early in (NOW + timedelta(minutes=30), NOW + timedelta(hours=1)):
        with pytest.raises(IllegalTransition):
            extend_deadline(waiting, too_early, who="alice", why="", now=NOW)
    with pytest.raises(IllegalTransition):
        extend_deadline(record(), NOW + timedelta(hours=1), who="alice", why="", now=NOW)
    decided = resolve(waiting, EscalationResponse(action=EscalationAction.RETRY), "bob", "", NOW)
    with pytest.raises(AgentNotWaiting):
        extend_deadline(decided, NOW + timedelta(hours=2), who="alice", why="", now=NOW)


def test_the_extension_form_counts_from_the_deadline_or_from_now() -> None:
    waiting = record(deadline=NOW + timedelta(hours=1))
    extension = deadline_extension(form(extend_minutes="60", why=" later "), waiting, "alice", NOW)
    assert extension.deadline == NOW + timedelta(hours=2) and extension.why == "later"
    overdue = deadline_extension(form(extend_minutes="15"), waiting, "alice", NOW + timedelta(hours=5))
    assert overdue.deadline == NOW + timedelta(hours=5, minutes=15)
    with pytest.raises(FormRefused) as refused:
        deadline_extension(form(extend_minutes="999999"), waiting, "alice", NOW)
    assert "extend_minutes" in refused.value.problems
    with pytest.raises(FormRefused):
        deadline_extension(form(extend_minutes="60"), record(), "alice", NOW)


# -- a task's trace as a timeline ---------------------------------------------------------------


def jaeger_trace() -> JaegerAnswer:
    def span(span_id: str, name: str, start: int, duration: int, process: str, parent: str | None = None,
             error: bool = False) -> dict[str, object]:  # fmt: skip
        return {
            "spanID": span_id, "operationName": name, "startTime": start, "duration": duration,
            "processID": process, "tags": [{"key": "error", "value": True}] if error else [],
            "references": [{"refType": "CHILD_OF", "spanID": parent}] if parent else [],
        }  # fmt: skip

    return JaegerAnswer.model_validate(
        {
            "data": [
                {
                    "traceID": "abc",
                    "spans": [
                        span("b", "process agora.tasks", 1_000_100, 400, "p1", parent="a"),
                        span("a", "publish agora.tasks", 1_000_000, 1_000, "p2"),
                        span("c", "<script>x</script>", 1_000_500, 100, "p1", parent="b", error=True),
                    ],
                    "processes": {
                        "p1": {
                            "serviceName": "allocator",
                            "tags": [{"key": "service.namespace", "value": "agora"}],
                        },
                        "p2": {"serviceName": "console", "tags": []},
                    },
                }
            ]
        }
    )


def test_a_trace_becomes_rows_in_start_order_with_depth_and_share() -> None:
    answer = jaeger_trace()
    assert answer.data is not None
    drawn = timeline(answer.data[0])
    assert [r.operation for r in drawn.rows] == [
        "publish agora.tasks",
        "process agora.tasks",
        "<script>x</script>",
    ]
    assert [r.depth for r in drawn.rows] == [0, 1, 2]
    assert [r.sidecar for r in drawn.rows] == [True, False, False]
    assert (drawn.total_ms, drawn.errors, drawn.services) == (1.0, 1, ["allocator", "console"])
    assert [(r.offset_pct, r.width_pct) for r in drawn.rows] == [(0.0, 100.0), (10.0, 40.0), (50.0, 10.0)]
    html = (
        templates()
        .get_template("trace.html")
        .render(refresh_ms=1000, person=None, task_id="t", timeline=drawn, href="/tasks/t")
    )
    assert "<script>x" not in html and "&lt;script&gt;x" in html


def test_a_trace_with_a_parent_cycle_still_draws() -> None:
    answer = jaeger_trace()
    assert answer.data is not None
    looped = answer.data[0].model_copy()
    looped.spans[1].references.append(looped.spans[0].references[0].model_copy(update={"spanID": "c"}))
    assert len(timeline(looped).rows) == 3


async def test_every_open_inbox_shares_one_reading_at_a_time() -> None:
    now = [0.0]
    calls = []
    release = asyncio.Event()

    async def read() -> int:
        calls.append(now[0])
        await release.wait()
        return len(calls)

    shared = SharedReading(read, fresh_seconds=1.0, clock=lambda: now[0])
    waiting = [asyncio.ensure_future(shared.get()) for _ in range(5)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*waiting) == [1] * 5 and calls == [0.0]  # one reading for five pages
    now[0] = 0.5
    assert await shared.get() == 1 and len(calls) == 1  # still fresh
    now[0] = 1.5
    assert await shared.get() == 1  # stale: answered at once, read again behind it
    await asyncio.sleep(0)
    assert calls == [0.0, 1.5] and await shared.get() == 2
    shared.forget()
    assert await shared.get() == 3


async def test_a_failed_reading_is_not_kept() -> None:
    outcomes: list[int | Exception] = [RuntimeError("down"), 7]

    async def read() -> int:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    now = [0.0]
    shared = SharedReading(read, fresh_seconds=10.0, clock=lambda: now[0])
    with pytest.raises(RuntimeError):
        await shared.get()
    assert await shared.get() == 7
    outcomes.extend([RuntimeError("down again"), RuntimeError("still down"), 8])
    now[0] = 20.0
    assert await shared.get() == 7  # stale: answered, read again behind it, which fails
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError):  # nothing kept: the next caller waits for a reading
        await shared.get()
    assert await shared.get() == 8


# -- the sign-in edge, without Dapr -------------------------------------------------------------


def console_client(tmp_path: Path) -> TestClient:
    """The console app without Dapr (nothing here reaches its sidecar); create it only with the
    test process's tracer provider installed (fixture `tracer_provider`), so it exports nowhere."""
    users = tmp_path / "users.yaml"
    users.write_text("users:\n" + entry_yaml("alice", Role.DECIDER, "alice-secret-1"))
    settings = ConsoleSettings(console_users_file=users, console_session_key="k" * 32)
    return TestClient(create_app(settings), follow_redirects=False)


def test_signing_in_sets_a_locked_down_cookie_and_never_echoes_the_secret(
    tmp_path: Path, tracer_provider: TracerProvider
) -> None:
    client = console_client(tmp_path)
    assert client.get("/inbox").headers["location"] == "/signin?next=%2Finbox"
    assert client.get("/escalations/e-1").headers["location"] == "/signin?next=%2Fescalations%2Fe-1"
    page = client.get("/signin")
    assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store" and page.headers["x-frame-options"] == "DENY"

    refused = client.post("/signin", data={"name": "alice<b>", "secret": "wrong-secret-typed"})
    assert refused.status_code == 401 and "do not sign anyone in" in refused.text
    assert "wrong-secret-typed" not in refused.text and "alice<b>" not in refused.text
    assert "set-cookie" not in refused.headers

    for elsewhere in ("//evil.example/x", "https://evil.example", "/\\evil.example", "javascript:alert(1)"):
        page = client.post("/signin", data={"name": "alice", "secret": "nope", "next": elsewhere})
        assert 'value="/inbox"' in page.text
    signed = client.post(
        "/signin", data={"name": "alice", "secret": "alice-secret-1", "next": "/escalations/e-1"}
    )
    assert signed.status_code == 303 and signed.headers["location"] == "/escalations/e-1"
    cookie = signed.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "alice-secret-1" not in cookie

    assert client.get("/static/console.js").headers["content-type"].startswith("text/javascript")
    for missing in ("/static/../app.py", "/static/other.js", "/docs", "/openapi.json"):
        assert client.get(missing).status_code == 404


def test_forms_without_their_csrf_token_or_as_json_are_refused(
    tmp_path: Path, tracer_provider: TracerProvider
) -> None:
    client = console_client(tmp_path)
    client.post("/signin", data={"name": "alice", "secret": "alice-secret-1"})
    forged = client.post("/escalations/e-1/decision", data={"action": "retry", "csrf": "forged"})
    assert forged.status_code == 403 and "out of date" in forged.text
    as_json = client.post("/escalations/e-1/decision", json={"action": "retry"})
    assert as_json.status_code == 415
    huge = client.post(
        "/signin",
        content=b"x" * (1024 * 1024 + 1),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert huge.status_code == 413
    elsewhere = client.post(
        "/signin",
        data={"name": "alice", "secret": "alice-secret-1"},
        headers={"origin": "https://evil.example"},
    )
    assert elsewhere.status_code == 403 and "another site" in elsewhere.text
    signed_out = TestClient(client.app, follow_redirects=False)
    assert signed_out.post("/escalations/e-1/decision", data={"action": "retry"}).status_code == 401


def test_a_name_guessed_too_often_is_refused_for_a_while(
    tmp_path: Path, tracer_provider: TracerProvider
) -> None:
    client = console_client(tmp_path)
    for _ in range(5):
        assert client.post("/signin", data={"name": "alice", "secret": "guess"}).status_code == 401
    held = client.post("/signin", data={"name": "alice", "secret": "alice-secret-1"})
    assert held.status_code == 429 and "too many refused sign-ins" in held.text
    assert "set-cookie" not in held.headers


def test_a_checkpoint_is_answered_with_a_checkpoint_action() -> None:
    context = CheckpointContext(job_id="job-1", step=1, prompt="Delete the bucket")
    checkpoint = park("cp-1", WaitingParty(kind="task", id="t-1"), context, now=NOW)
    request = decision_request(
        form(action="proceed", modified_prompt="Delete the bucket"), checkpoint, "alice"
    )
    assert isinstance(request.decision, CheckpointResponse) and request.decision.action == "proceed"
    assert request.decision.modified_prompt is None
    with pytest.raises(FormRefused) as refused:
        decision_request(form(action="retry"), checkpoint, "alice")  # an escalation's action
    assert "proceed" in refused.value.problems["action"]


# -- the escalation pages, without the app ------------------------------------------------------


class FakeEscalations(EscalationClient):
    """The escalation service as the pages see it: `current` is every read's answer; a
    decision is refused with `refusal`."""

    def __init__(self, current: EscalationRecord, refusal: AgoraError) -> None:
        self.current = current
        self.refusal = refusal
        self.reads = 0
        self.decisions: list[ResumeRequest] = []

    async def get(self, escalation_id: str) -> EscalationRecord:
        self.reads += 1
        return self.current

    async def resume(self, escalation_id: str, request: ResumeRequest) -> EscalationRecord:
        self.decisions.append(request)
        raise self.refusal


def escalation_pages(escalations: EscalationClient) -> tuple[EscalationPages, Sessions]:
    """The pages for people an authenticating proxy names in `x-user` (`alice` decides)."""
    settings = ConsoleSettings(console_proxy_user_header="x-user", console_proxy_deciders="alice")
    sessions = Sessions(settings, SessionSigner(b"k" * 32, 3600))
    return EscalationPages(escalations, sessions, Pages(1.0), refresh_seconds=1.0), sessions


def posted(path: str, person: str, fields: dict[str, str]) -> Request:
    body = urlencode(fields).encode()
    headers = {"content-type": "application/x-www-form-urlencoded", "host": "console", "x-user": person}

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {"type": "http", "method": "POST", "path": path, "query_string": b"",
             "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}  # fmt: skip
    return Request(scope, receive)


async def test_a_decision_refused_as_stale_shows_the_escalation_as_it_is_and_what_changed() -> None:
    shown = record(prompt="Migrate the orders table")
    current = record(prompt="Drop the orders table")
    escalations = FakeEscalations(current, ContextChanged("the escalation changed"))
    pages, sessions = escalation_pages(escalations)
    fields = {
        "csrf": sessions.csrf_token("proxy:alice"),
        "action": "retry",
        "context_digest": context_digest(shown),
        "shown_fields": encode_field_digests(field_digests(shown)),
    }

    page = await pages.decide("esc-1", posted("/escalations/esc-1/decision", "alice", fields))

    assert [d.context_digest for d in escalations.decisions] == [context_digest(shown)]
    body = bytes(page.body).decode()
    assert page.status_code == 409 and "changed since you opened it" in body
    changed = changed_fields(field_digests(shown), field_digests(current))
    assert changed and f'<span id="changed-fields">{", ".join(changed)}</span>' in body
    assert "Drop the orders table" in body


async def test_a_viewer_may_not_decide_and_the_service_is_not_asked() -> None:
    escalations = FakeEscalations(record(), ContextChanged("unused"))
    pages, sessions = escalation_pages(escalations)
    fields = {"csrf": sessions.csrf_token("proxy:bob"), "action": "retry"}

    with pytest.raises(PageError) as refused:
        await pages.decide("esc-1", posted("/escalations/esc-1/decision", "bob", fields))

    assert (
        refused.value.status == 403
        and "bob may view escalations but not decide them" in refused.value.message
    )
    assert escalations.reads == 0 and escalations.decisions == []


def test_an_open_page_polls_the_decision_once_made_and_a_refusal_names_who_made_it() -> None:
    waiting = record()
    decided = resolve(waiting, EscalationResponse(action=EscalationAction.RETRY), "carol", "", NOW)

    assert EscalationState.of(waiting).action is None
    polled = EscalationState.of(decided)
    assert (polled.decided_by, polled.action) == ("carol", "retry")
    assert polled.context_digest == context_digest(decided) != context_digest(waiting)
    assert refusal(decided) == (
        "Not applied: this escalation was already decided (retry) by carol at 2026-01-02 12:00:00 UTC."
    )
    assert refusal(waiting).startswith("Not applied: this escalation changed since you opened it.")


def test_an_escalation_links_to_the_page_of_what_waits_for_it() -> None:
    assert belongs_to(record("e/1", kind=WaitingPartyKind.TASK)) == "/tasks/party-1"
    assert belongs_to(record(kind=WaitingPartyKind.SESSION)) is None
    assert escalation_values(record("e/1"))["href"] == "/escalations/e%2F1"


def test_a_task_page_lists_its_runs_progress_notes_escaped() -> None:
    from datetime import timedelta

    from agora.console.pages import templates
    from agora.core.market import AllocationStatus
    from agora.core.task_lifecycle import TaskRecord, allocate, move, note_progress
    from tests.unit.test_awards import NOW, awarded, spec

    record = allocate(move(TaskRecord(spec=spec()), AllocationStatus.BIDDING), awarded(("a", 0.9)), NOW)
    record = note_progress(record, "a", "drafting <b>", NOW + timedelta(seconds=2))
    html = (
        templates().get_template("task.html").render(task=record, traces=False, refresh_ms=1000, person=None)
    )
    assert '<ol id="progress">' in html
    assert "a: drafting &lt;b&gt;</li>" in html
    bare = (
        templates()
        .get_template("task.html")
        .render(task=TaskRecord(spec=spec()), traces=False, refresh_ms=1000, person=None)
    )
    assert 'id="progress"' not in bare, "no section for a task with no notes"


def test_a_dispute_form_is_the_verdict_and_why_in_the_person_s_name_or_what_to_send() -> None:
    made, problems = dispute_of_form({"verdict": "failed", "why": " it names no paper\r\n"}, "alice")
    assert problems == {} and made is not None
    assert (made.disputed_by, made.reason, str(made.verdict)) == ("alice", "it names no paper", "failed")
    refused, problems = dispute_of_form({"verdict": "wrong", "why": "  "}, "alice")
    assert refused is None and problems == {
        "verdict": "choose passed or failed",
        "why": "say why the outcome was otherwise",
    }
    _, problems = dispute_of_form({"verdict": "passed", "why": "x" * 3000}, "alice")
    assert problems == {"why": "at most 2,048 characters (got 3,000)"}
