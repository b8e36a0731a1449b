"""Least privilege between the apps (redis profile, mTLS): every service's API refuses an app
the architecture does not name as its caller, and lets the callers it names through."""

from __future__ import annotations

import httpx
import pytest

from agora.harness import LocalCluster
from tests.integration.helpers import replicas_of

pytestmark = pytest.mark.integration

API = [
    ("registry", "DELETE", "v1/agents/nobody"),
    ("taskboard", "GET", "v1/tasks?status=PENDING"),
    ("reputation", "GET", "v1/reputation/researcher"),
    ("worker", "GET", "v1/agents/researcher/learning"),
    ("uncertainty", "POST", "v1/sessions/someone/reset"),
    ("escalation", "GET", "v1/escalations"),
    ("planner", "GET", "v1/plans"),
    ("debate", "GET", "v1/debates"),
    ("allocator", "GET", "v1/anything"),
]


def call(cluster: LocalCluster, caller: str, app_id: str, method: str, path: str) -> httpx.Response:
    sidecar = replicas_of(cluster, caller)[0]
    return httpx.request(method, sidecar.invoke_url(path, app_id), timeout=30)


@pytest.mark.parametrize(("app_id", "method", "path"), API)
def test_an_app_no_policy_names_is_refused_and_the_console_gets_through(
    apps_cluster: LocalCluster, app_id: str, method: str, path: str
) -> None:
    refused = call(apps_cluster, "recorder", app_id, method, path)
    assert refused.status_code == 403, (app_id, refused.status_code, refused.text)
    allowed = call(apps_cluster, "console", app_id, method, path)
    assert allowed.status_code != 403, (app_id, allowed.text)
    assert allowed.status_code < 500, (app_id, allowed.text)


def test_services_may_make_only_the_calls_they_need(apps_cluster: LocalCluster) -> None:
    # The allocator lists the board's tasks to resume them; it may not read the uncertainty
    # monitor or reset sessions.
    assert call(apps_cluster, "allocator", "taskboard", "GET", "v1/tasks?status=PENDING").status_code == 200
    assert call(apps_cluster, "allocator", "uncertainty", "POST", "v1/sessions/x/reset").status_code == 403
    # A worker reports its agents' steps; it may not reset a session or read the board...
    assert call(apps_cluster, "worker", "uncertainty", "POST", "v1/sessions/x/reset").status_code == 403
    assert call(apps_cluster, "worker", "taskboard", "GET", "v1/tasks?status=PENDING").status_code == 403
    step = {"step_id": "1", "text": "Found it. Confidence: 90%"}
    reported = httpx.post(
        replicas_of(apps_cluster, "worker")[0].invoke_url(
            "v1/sessions/least-privilege/llm-responses", "uncertainty"
        ),
        json=step,
        timeout=30,
    )
    assert reported.status_code == 200, reported.text
    # ... and read where that session stands (after a refused step), but not its summary.
    read = call(apps_cluster, "worker", "uncertainty", "GET", "v1/sessions/least-privilege")
    assert read.status_code == 200, read.text
    assert (
        call(apps_cluster, "worker", "uncertainty", "GET", "v1/sessions/least-privilege/summary").status_code
        == 403
    )


def test_credentials_come_from_the_secret_store_and_no_app_can_read_them(apps_cluster: LocalCluster) -> None:
    for app_id in ("registry", "worker", "console"):
        sidecar = replicas_of(apps_cluster, app_id)[0]
        secret = httpx.get(f"{sidecar.dapr_http}/v1.0/secrets/agora-secrets/redis-password", timeout=10)
        assert secret.status_code == 403, (app_id, secret.text)
    # The components got their password from the store: the services work.
    board = replicas_of(apps_cluster, "console")[0].invoke_url("v1/tasks?status=PENDING", "taskboard")
    assert httpx.get(board, timeout=30).status_code == 200


def test_components_load_only_in_the_apps_that_use_them(apps_cluster: LocalCluster) -> None:
    console = replicas_of(apps_cluster, "console")[0]
    state = httpx.get(f"{console.dapr_http}/v1.0/state/agora-state/anything", timeout=10)
    assert state.status_code == 500 and state.json()["errorCode"] == "ERR_STATE_STORE_NOT_CONFIGURED"
    registry = replicas_of(apps_cluster, "registry")[0]
    assert httpx.get(f"{registry.dapr_http}/v1.0/state/agora-state/anything", timeout=10).status_code == 204
