"""The web console in a real browser (Debian's Chromium driven by Playwright) against real
sidecars: a person signs in, sees an escalation arrive without reloading, decides it with a
modified prompt, and the paused session continues as decided, with the decision in the audit
trail; a viewer cannot decide; a decision made in a second tab on the same escalation is
refused with a readable account of who decided first. Screenshots of the inbox and an
escalation page are written to docs/console/."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from agora.core.checks import ValidationResult
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.escalation.record import ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.escalation.suggestions import HistoricalSuggestion
from agora.core.market import TaskSpec
from agora.harness import LocalCluster, ServiceReplica
from agora.harness.system import console_with
from tests.integration.helpers import (
    CONSOLE_DECIDER,
    CONSOLE_SECRETS,
    CONSOLE_VIEWER,
    eventually,
    publish_event,
    replicas_of,
    write_console_users,
)

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"
DECIDER, VIEWER, SECRETS = CONSOLE_DECIDER, CONSOLE_VIEWER, CONSOLE_SECRETS
HOSTILE_PROMPT = 'Migrate the orders table <script>window.pwned = "yes"</script> & "quote" it'


@pytest.fixture(scope="module")
def console(default_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> ServiceReplica:
    """The console beside the embedded app, with a decider and a viewer who may sign in."""
    users = write_console_users(tmp_path_factory.mktemp("console") / "users.yaml")
    app_ids = {r.spec.app_id for r in default_cluster.replicas}
    spec = console_with(
        app_ids,
        str(users),
        AGORA_CONSOLE_REFRESH_SECONDS="0.5",
        AGORA_CONSOLE_JAEGER_URL=default_cluster.jaeger_query_url,
    )
    existing = replicas_of(default_cluster, "console")
    return existing[0] if existing else default_cluster.add_service(spec)[0]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("Chromium is missing: `make test` installs it (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def embedded(cluster: LocalCluster) -> ServiceReplica:
    return replicas_of(cluster, "agora")[0]


def pause_session(cluster: LocalCluster, prompt: str) -> tuple[str, str]:
    """A session whose second step is doubtful: the uncertainty monitor parks it."""
    app = embedded(cluster)
    session = f"console-{uuid.uuid4().hex[:8]}"
    report = app.invoke_url(f"v1/sessions/{session}/llm-responses", "agora")
    first = httpx.post(report, json={"step_id": "1", "text": "Found it. Confidence: 95%"}, timeout=30)
    assert first.status_code == 200, first.text
    doubtful = {"step_id": "2", "prompt": prompt, "text": "Not sure this is safe. Confidence: 10%"}
    paused = httpx.post(report, json=doubtful, timeout=30).json()
    assert paused["action"] == "pause_for_human", paused
    return session, str(paused["escalation_id"])


def session_state(cluster: LocalCluster, session: str) -> dict[str, Any]:
    url = embedded(cluster).invoke_url(f"v1/sessions/{session}", "agora")
    state: dict[str, Any] = httpx.get(url, timeout=30).json()
    return state


def sign_in(browser: Browser, console: ServiceReplica, name: str) -> Page:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(f"{console.app_url}/inbox")
    expect(page).to_have_url(re.compile(r"/signin\?next=%2Finbox$"))
    page.fill("input[name=name]", name)
    page.fill("input[name=secret]", SECRETS[name])
    page.click("button[type=submit]")
    expect(page.locator("#person")).to_have_text(name)
    return page


def test_a_person_sees_an_escalation_arrive_and_decides_it_with_a_modified_prompt(
    default_cluster: LocalCluster, console: ServiceReplica, browser: Browser
) -> None:
    page = sign_in(browser, console, DECIDER)
    session, escalation_id = pause_session(default_cluster, HOSTILE_PROMPT)

    row = page.locator(f'tr[data-escalation-id="{escalation_id}"]')
    expect(row).to_be_visible(timeout=20_000)  # arrived without a reload
    expect(row).to_contain_text("session")

    row.locator("a").click()
    expect(page.locator("#escalation-id")).to_have_text(escalation_id)
    expect(page.locator("#prompt-used")).to_have_text(HOSTILE_PROMPT)  # shown as text, not run
    assert page.evaluate("window.pwned") is None
    expect(page.locator("#modified-prompt")).to_have_value(HOSTILE_PROMPT)

    second_tab = page.context.new_page()
    second_tab.goto(page.url)

    changed = "Migrate the orders table; keep the old one until the copy is verified"
    page.check("input[name=action][value=modify_prompt]")
    page.fill("#modified-prompt", changed)
    page.fill("input[name=why]", "no data loss")
    page.click("#decide")
    expect(page.locator("#status")).to_have_text("RESOLVED")
    expect(page.locator("#decided-by")).to_have_text(DECIDER)
    audit = page.locator("#audit")
    expect(audit).to_contain_text("resolved: modify_prompt")
    expect(audit).to_contain_text("no data loss")

    continued = eventually(lambda: (s := session_state(default_cluster, session))["continuations"] and s)
    last = continued["continuations"][-1]
    assert (last["action"], last["decided_by"], last["next_prompt"]) == ("modify_prompt", DECIDER, changed)
    assert continued["status"] == "RUNNING"

    # The other tab learns of it while open, and a decision sent from it is refused.
    expect(second_tab.locator("#changed-banner")).to_contain_text("by alice", timeout=20_000)
    second_tab.check("input[name=action][value=retry]")
    second_tab.click("#decide")
    refusal = second_tab.locator("#refusal")
    expect(refusal).to_contain_text("already decided (modify_prompt) by alice")
    expect(refusal).to_contain_text("status")  # what changed since that tab opened
    page.goto(f"{console.app_url}/inbox")
    expect(page.locator(f'tr[data-escalation-id="{escalation_id}"]')).to_have_count(0)


def park_with_a_deadline(cluster: LocalCluster) -> str:
    """An escalation with everything a page shows: checks, errors, suggestions, a deadline
    (two hours away) and its default. It names a task the board does not hold, so a decision
    on it reaches nobody (the worker ignores it); none is made."""
    escalation_id = f"report-{uuid.uuid4().hex[:8]}.3"
    context = EscalationContext(
        job_id="plan-market-report",
        step=3,
        validation_results=[
            ValidationResult(kind="subgoal", subject="collect_data", passed=True, detail="COMPLETED"),
            ValidationResult(
                kind="subgoal",
                subject="check_facts",
                passed=False,
                detail="FAILED",
                figures={"attempts": 2},
                failure_reason="two figures disagree with their sources",
            ),
        ],
        confidence=0.38,
        retry_count=2,
        error_history=["attempt 1: a source could not be fetched", "attempt 2: figures disagree"],
        prompt_used="Check every figure of the draft against its source; list the ones that differ.",
        output_summary="Two of nine figures differ from their sources (capacity 2023, price per kWh).",
        historical_suggestions=[
            HistoricalSuggestion(
                action=EscalationAction.MODIFY_PROMPT,
                confidence=0.41,
                outcome_succeeded=True,
                guidance="name the sources to use",
                similarity=0.82,
            ),
            HistoricalSuggestion(
                action=EscalationAction.RETRY, confidence=0.35, outcome_succeeded=False, similarity=0.64
            ),
        ],
    )
    request = ParkRequest(
        waiting_party=WaitingParty(kind=WaitingPartyKind.TASK, id="market-report-check-facts"),
        context=context,
        deadline=datetime.now(UTC) + timedelta(hours=2),
        default_decision=EscalationResponse(
            action=EscalationAction.SKIP, guidance="publish without the check"
        ),
        who="planner",
        why="verification failed twice",
    )
    url = embedded(cluster).invoke_url(f"v1/escalations/{escalation_id}", "agora")
    parked = httpx.put(url, json=request.model_dump(mode="json"), timeout=30)
    assert parked.status_code == 200, parked.text
    return escalation_id


def test_a_deadline_moved_in_one_tab_refuses_a_decision_from_another(
    default_cluster: LocalCluster, console: ServiceReplica, browser: Browser
) -> None:
    page = sign_in(browser, console, DECIDER)
    escalation_id = park_with_a_deadline(default_cluster)
    row = page.locator(f'tr[data-escalation-id="{escalation_id}"]')
    expect(row).to_contain_text("market-report-check-facts", timeout=20_000)
    expect(row.locator("[data-deadline]")).to_contain_text(re.compile(r"in 1 h 59 min \d\d s"))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "inbox.png"), full_page=True)

    row.locator("a").click()
    expect(page.locator("#deadline")).to_contain_text("then by default: skip")
    expect(page.locator("#suggestions li").first).to_contain_text("modify_prompt (succeeded)")
    page.screenshot(path=str(SCREENSHOTS / "escalation.png"), full_page=True)

    other_tab = page.context.new_page()
    other_tab.goto(page.url)
    page.select_option("select[name=extend_minutes]", "60")
    page.fill("#deadline-form input[name=why]", "waiting for the data team")
    page.click("#extend")
    expect(page.locator("#audit")).to_contain_text("deadline extended to")
    expect(page.locator("#deadline [data-deadline]")).to_contain_text(re.compile(r"in 2 h 59 min"))

    expect(other_tab.locator("#changed-banner")).to_contain_text(
        "changed since you opened it", timeout=20_000
    )
    other_tab.check("input[name=action][value=retry]")
    other_tab.click("#decide")
    expect(other_tab.locator("#refusal")).to_contain_text("changed since you opened it")
    expect(other_tab.locator("#changed-fields")).to_have_text("deadline")
    expect(other_tab.locator("#status")).to_have_text("WAITING_FOR_HUMAN")


def test_a_viewer_reads_but_cannot_decide(
    default_cluster: LocalCluster, console: ServiceReplica, browser: Browser
) -> None:
    _, escalation_id = pause_session(default_cluster, "Drop the staging schema")
    page = sign_in(browser, console, VIEWER)
    page.goto(f"{console.app_url}/escalations/{escalation_id}")
    expect(page.locator("#viewer-notice")).to_contain_text("not decide")
    assert page.locator("#decision-form").count() == 0

    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    assert csrf
    forced = page.request.post(
        f"{console.app_url}/escalations/{escalation_id}/decision",
        form={"csrf": csrf, "action": "retry", "context_digest": "0" * 64},
    )
    assert forced.status == 403 and "may view escalations but not decide" in forced.text()
    shown = httpx.get(
        embedded(default_cluster).invoke_url(f"v1/escalations/{escalation_id}", "agora"), timeout=30
    ).json()
    assert shown["status"] == "WAITING_FOR_HUMAN"


def test_bad_decisions_are_refused_readably(
    default_cluster: LocalCluster, console: ServiceReplica, browser: Browser
) -> None:
    _, escalation_id = pause_session(default_cluster, "Rotate the keys")
    page = sign_in(browser, console, DECIDER)
    page.goto(f"{console.app_url}/escalations/{escalation_id}")
    page.check("input[name=action][value=retry]")
    page.fill("textarea[name=guidance]", "<b>x</b>" * 400)  # over the 2,048-character bound
    page.click("#decide")
    expect(page.locator("#problems")).to_contain_text("guidance: at most 2,048 characters")

    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    assert csrf
    digest = page.locator("input[name=context_digest]").get_attribute("value")
    assert digest
    unknown = page.request.post(
        f"{console.app_url}/escalations/{escalation_id}/decision",
        form={"csrf": csrf, "action": "<img src=x onerror=alert(1)>", "context_digest": digest},
    )
    assert unknown.status == 422
    assert "choose one of retry, skip, abort, modify_prompt" in unknown.text()
    assert "<img src=x" not in unknown.text() and "&lt;img src=x" in unknown.text()

    forged = page.request.post(
        f"{console.app_url}/escalations/{escalation_id}/decision",
        form={"csrf": "forged", "action": "retry", "context_digest": digest},
    )
    assert forged.status == 403

    stale = page.request.post(
        f"{console.app_url}/escalations/{escalation_id}/decision",
        form={"csrf": csrf, "action": "retry", "context_digest": "0" * 64},
    )
    assert stale.status == 409 and "changed since you opened it" in stale.text()


def test_the_escalation_service_refuses_a_decision_bound_to_another_view(
    default_cluster: LocalCluster,
) -> None:
    """The binding holds for every caller of the API, not only the console's pages."""
    _, escalation_id = pause_session(default_cluster, "Reindex the catalogue")
    url = embedded(default_cluster).invoke_url(f"v1/escalations/{escalation_id}/resume", "agora")
    decision = {"decision": {"kind": "escalation", "action": "retry"}, "who": "alice"}
    refused = httpx.post(url, json={**decision, "context_digest": "f" * 64}, timeout=30)
    assert refused.status_code == 409 and refused.json()["error"] == "CONTEXT_CHANGED"


def test_a_moved_deadline_applies_the_default_then_and_not_before(default_cluster: LocalCluster) -> None:
    """Moving the deadline moves the actor's reminder: the default applies at the new one."""
    escalation_id = f"moved-{uuid.uuid4().hex[:8]}.1"
    base = embedded(default_cluster).invoke_url(f"v1/escalations/{escalation_id}", "agora")
    context = EscalationContext(
        job_id="job-moved", step=1, validation_results=[], confidence=0.3, retry_count=0,
        error_history=[], prompt_used="p", output_summary="o",
    )  # fmt: skip
    parked_at = datetime.now(UTC)
    request = ParkRequest(
        waiting_party=WaitingParty(kind=WaitingPartyKind.TASK, id=f"{escalation_id}-task"),
        context=context,
        deadline=parked_at + timedelta(seconds=4),
        default_decision=EscalationResponse(action=EscalationAction.SKIP),
    )
    assert httpx.put(base, json=request.model_dump(mode="json"), timeout=30).status_code == 200
    extension = {
        "deadline": (parked_at + timedelta(seconds=12)).isoformat(),
        "who": "alice",
        "why": "more time",
    }
    moved = httpx.post(f"{base}/deadline", json=extension, timeout=30)
    assert moved.status_code == 200, moved.text
    assert moved.json()["audit"][-1]["what"].startswith("deadline extended to")

    earlier = {**extension, "deadline": (parked_at + timedelta(seconds=6)).isoformat()}
    refused = httpx.post(f"{base}/deadline", json=earlier, timeout=30)
    assert refused.status_code == 409 and refused.json()["error"] == "ILLEGAL_TRANSITION"

    while datetime.now(UTC) < parked_at + timedelta(seconds=8):  # past the first deadline
        time.sleep(0.5)
    assert httpx.get(base, timeout=30).json()["status"] == "WAITING_FOR_HUMAN"
    expired = eventually(lambda: (r := httpx.get(base, timeout=30).json())["status"] == "EXPIRED" and r, 30)
    assert expired["decision"]["action"] == "skip"


def test_the_task_board_agents_plans_and_debates_are_readable(
    default_cluster: LocalCluster, console: ServiceReplica, browser: Browser
) -> None:
    app = embedded(default_cluster)
    task_id = f"console-task-{uuid.uuid4().hex[:6]}"
    spec = TaskSpec(
        task_id=task_id,
        description="Summarise <b>this</b> week's papers",
        required_skills=["web_search"],
        min_success_threshold=0.0,  # allocated whatever the bids say: the page shows a winner
    )
    published = httpx.post(
        f"{app.dapr_http}/v1.0/publish/agora-pubsub/agora.tasks",
        json=spec.model_dump(mode="json"),
        timeout=30,
    )
    assert published.status_code == 204, published.text

    def settled() -> dict[str, Any] | None:
        answer = httpx.get(app.invoke_url(f"v1/tasks/{task_id}", "agora"), timeout=30)
        record: dict[str, Any] = answer.json()
        return record if answer.status_code == 200 and record["status"] in ("COMPLETED", "FAILED") else None

    status = eventually(settled, timeout=60)["status"]
    page = sign_in(browser, console, VIEWER)
    page.goto(f"{console.app_url}/tasks")
    column = page.locator(f'section[data-status="{status}"]')
    column.locator(f"text={task_id}").click()
    expect(page.locator("#task-id")).to_have_text(task_id)
    expect(page.locator("#scores tbody tr").first).to_contain_text("(won)")
    expect(page.locator("#outcome")).to_contain_text("steps")
    assert page.locator("b", has_text="this").count() == 0  # the description is text

    page.click("#trace-link")
    expect(page.locator("#trace-task")).to_have_text(task_id)
    timeline = page.locator("#timeline tbody tr")
    for _ in range(20):  # the spans reach Jaeger a moment after the task ends
        if timeline.count():
            break
        page.wait_for_timeout(1000)
        page.reload()
    expect(timeline.first).to_be_visible()
    expect(page.locator("#trace-summary")).to_contain_text("spans over")
    expect(page.locator("#timeline")).to_contain_text("process agora.tasks")

    page.goto(f"{console.app_url}/agents")
    expect(page.locator("#agents tbody tr").first).to_be_visible()
    assert page.locator("#agents tbody tr").count() >= 2
    for listing in ("plans", "debates"):
        assert page.goto(f"{console.app_url}/{listing}").status == 200  # type: ignore[union-attr]
    missing = page.goto(f"{console.app_url}/tasks/no-such-task")
    assert missing is not None and missing.status == 404
    expect(page.locator("#error")).to_contain_text("no such task")


def test_a_decider_disputes_a_finished_task_from_its_page_and_a_viewer_cannot(
    default_cluster: LocalCluster, console: ServiceReplica, browser: Browser
) -> None:
    """The task's page shows its verdict beside the agent's claim; a decider disputes the outcome
    there in their own name (a form without a reason is shown back with what to send), the page
    then shows the dispute and offers no second one; a viewer is offered none."""
    app = embedded(default_cluster)
    task_id = f"console-dispute-{uuid.uuid4().hex[:6]}"
    checked_by_its_publisher = {"check": {"kind": "publisher"}, "dispute_window_s": 3600}
    spec = {"task_id": task_id, "description": "Summarise the papers", "required_skills": ["web_search"],
            "min_success_threshold": 0.0, "acceptance": checked_by_its_publisher}  # fmt: skip
    publish_event(app.dapr_http, "agora.tasks", spec)

    def ended() -> dict[str, Any] | None:
        answer = httpx.get(app.invoke_url(f"v1/tasks/{task_id}", "agora"), timeout=30)
        record: dict[str, Any] = answer.json()
        return record if answer.status_code == 200 and record["status"] in ("COMPLETED", "FAILED") else None

    record = eventually(ended, timeout=60)
    assert record["outcome"] is not None, record

    viewer = sign_in(browser, console, VIEWER)
    viewer.goto(f"{console.app_url}/tasks/{task_id}")
    expect(viewer.locator("#viewer-notice")).to_contain_text("not dispute it")
    assert viewer.locator("#dispute-form").count() == 0

    page = sign_in(browser, console, DECIDER)
    page.goto(f"{console.app_url}/tasks/{task_id}")
    if record["verdict"] is not None:
        expect(page.locator("#verdict")).to_contain_text("(publisher)")
        expect(page.locator("#claim")).to_contain_text("The agent claimed success")
    page.select_option("#dispute-form select[name=verdict]", "failed")
    page.click("#dispute-form button[type=submit]")  # no reason given
    expect(page.locator("#problems")).to_contain_text("say why the outcome was otherwise")
    page.fill("#dispute-form textarea[name=why]", "it names no paper")
    page.click("#dispute-form button[type=submit]")
    expect(page).to_have_url(f"{console.app_url}/tasks/{task_id}")
    expect(page.locator("#disputed-by")).to_have_text(DECIDER)
    expect(page.locator("#task-status")).to_have_text("FAILED")
    assert page.locator("#dispute-form").count() == 0, "a task is disputed once"
    board = httpx.get(app.invoke_url(f"v1/tasks/{task_id}", "agora"), timeout=30).json()
    assert board["dispute"]["by"] == DECIDER and board["dispute"]["reason"] == "it names no paper"


def test_a_task_s_page_follows_the_task_s_event_stream(
    default_cluster: LocalCluster, console: ServiceReplica, browser: Browser
) -> None:
    app = embedded(default_cluster)
    task_id = f"console-live-{uuid.uuid4().hex[:6]}"
    spec = TaskSpec(task_id=task_id, description="Summarise the papers", required_skills=["web_search"])
    published = httpx.post(
        f"{app.dapr_http}/v1.0/publish/agora-pubsub/agora.tasks",
        json=spec.model_dump(mode="json"),
        timeout=30,
    )
    assert published.status_code == 204, published.text
    eventually(
        lambda: httpx.get(app.invoke_url(f"v1/tasks/{task_id}", "agora"), timeout=30).status_code == 200
    )

    page = sign_in(browser, console, VIEWER)
    with page.expect_response(lambda r: r.url.endswith(f"/tasks/{task_id}/events")) as streamed:
        page.goto(f"{console.app_url}/tasks/{task_id}")
    assert streamed.value.headers["content-type"].startswith("text/event-stream")
    expect(page.locator("#task-status")).to_have_text(re.compile("COMPLETED|FAILED|REJECTED"), timeout=30_000)

    # The stream the page follows is the board's, passed on: every event, then the end.
    body = page.request.get(f"{console.app_url}/tasks/{task_id}/events").text()
    assert "event: status" in body and "event: end" in body, body
    missing = page.request.get(f"{console.app_url}/tasks/no-such-task/events").text()
    assert "event: unavailable" in missing and "no such task" in missing, missing
    # Nobody signed in: nothing.
    assert httpx.get(f"{console.app_url}/tasks/{task_id}/events", timeout=30).status_code == 401


def test_a_tasks_trace_is_drawn_across_the_services_it_went_through(
    apps_cluster: LocalCluster, browser: Browser
) -> None:
    """Every service its own app (the redis profile): the trace of one task, from publication to
    outcome, is drawn from the trace store with the spans of the services it went through."""
    [console] = replicas_of(apps_cluster, "console")
    allocator = replicas_of(apps_cluster, "allocator")[0]
    task_id = f"console-trace-{uuid.uuid4().hex[:6]}"
    spec = TaskSpec(
        task_id=task_id,
        description="Summarise this week's papers",
        required_skills=["web_search"],
        min_success_threshold=0.0,
    )
    publish_event(allocator.dapr_http, "agora.tasks", spec.model_dump(mode="json"))
    board = replicas_of(apps_cluster, "taskboard")[0]

    def settled() -> bool:
        answer = httpx.get(board.invoke_url(f"v1/tasks/{task_id}"), timeout=30)
        return answer.status_code == 200 and answer.json()["status"] in ("COMPLETED", "FAILED")

    eventually(settled, timeout=60)
    page = sign_in(browser, console, VIEWER)
    page.goto(f"{console.app_url}/tasks/{task_id}/trace")
    services: set[str] = set()
    for _ in range(20):  # the spans reach Jaeger a moment after the task ends
        services = set(page.locator("#timeline tbody tr td:first-child").all_inner_texts())
        services = {s.removesuffix(" (sidecar)").strip() for s in services}
        if {"allocator", "taskboard", "worker"} <= services:
            break
        page.wait_for_timeout(1000)
        page.reload()
    assert {"allocator", "taskboard", "worker"} <= services, services
    expect(page.locator("#trace-summary")).to_contain_text("allocator")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "trace.png"), full_page=True)
