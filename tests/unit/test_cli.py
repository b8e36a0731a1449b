"""The `agora` command line: readable errors (no tracebacks, exit 1), the example files, and
how it finds the running system."""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest
import yaml

from agora.cli import main
from agora.cli import run as cli_run
from agora.cli import sidecar as cli_sidecar
from agora.cli.files import load_models
from agora.cli.listings import listing_summary
from agora.cli.plans import plan_list_lines
from agora.cli.problems import CliError, describe_refusal
from agora.cli.sidecar import Sidecar, loopback, point_link, unlink_if_pointing_at
from agora.cli.text import MAX_ERROR_LINES, MAX_VALUE_CHARS
from agora.core.contracts import EscalationList, ResumeRequest
from agora.core.debate.config import DebateConfig, DebaterConfig
from agora.core.escalation.checkpoints import CheckpointContext, CheckpointTrigger
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import EscalationResponse
from agora.core.escalation.digest import context_digest
from agora.core.escalation.record import (
    EscalationRecord,
    EscalationStatus,
    WaitingParty,
    WaitingPartyKind,
    park,
    resolve,
)
from agora.core.escalation.suggestions import HistoricalSuggestion
from agora.core.market import AllocationResult, AllocationStatus, Bid, BidScore, TaskOutcome, TaskSpec
from agora.core.models import CapabilityProfile, CapabilityQuery
from agora.core.plans.record import PlanList, PlanState, new_record
from agora.core.plans.request import PlanRequest
from agora.core.plans.run import given_plan
from agora.core.task_lifecycle import StatusChange, TaskRecord
from agora.escalation.view import escalation_lines, escalation_row
from agora.harness.cluster import Endpoints, LocalCluster, ServiceSpec
from agora.worker.app import SAMPLE_AGENTS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

VALID_TASK: dict[str, Any] = {"task_id": "t-1", "description": "Do it", "required_skills": ["sql"]}


def write_yaml(path: Path, content: Any) -> Path:
    path.write_text(yaml.safe_dump(content))
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- files that do not load or validate --------------------------------------------------------


def test_an_invalid_task_names_the_file_item_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_yaml(
        tmp_path / "tasks.yaml",
        [VALID_TASK, {"task_id": "x", "description": "No skills"}],
    )
    code, out, err = run_cli(capsys, "task", "publish", str(tasks))
    assert code == 1
    assert err == f"error: {tasks}: item 2 (task_id 'x'): required_skills: Field required\n"
    assert out == ""  # nothing published: every item is checked first
    assert "Traceback" not in err


def test_each_error_is_a_line_with_the_value_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = {**VALID_TASK, "min_success_threshold": 1.5, "colour": "red", "required_skills": ["sql", "  "]}
    tasks = write_yaml(tmp_path / "tasks.yaml", bad)
    code, _, err = run_cli(capsys, "task", "publish", str(tasks))
    assert code == 1
    assert err.splitlines() == [
        f"error: {tasks}: item 1 (task_id 't-1'): required_skills: "
        "Value error, skill tags must be non-empty strings (given ['sql', '  '])",
        f"error: {tasks}: item 1 (task_id 't-1'): min_success_threshold: "
        "Input should be less than or equal to 1 (given 1.5)",
        f"error: {tasks}: item 1 (task_id 't-1'): colour: Extra inputs are not permitted (given 'red')",
    ]


def test_an_item_that_is_not_a_mapping_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_yaml(tmp_path / "tasks.yaml", [VALID_TASK, "just a string"])
    code, _, err = run_cli(capsys, "task", "publish", str(tasks))
    assert code == 1
    assert err.startswith(f"error: {tasks}: item 2: Input should be a valid dictionary")
    assert "(given 'just a string')" in err


def test_long_values_are_shortened(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = write_yaml(tmp_path / "tasks.yaml", {**VALID_TASK, "budget_usd": "x" * 500})
    code, _, err = run_cli(capsys, "task", "publish", str(tasks))
    assert code == 1
    (line,) = err.splitlines()
    assert line.startswith(
        f"error: {tasks}: item 1 (task_id 't-1'): budget_usd: Input should be a valid number"
    )
    given = line.split(" (given ", 1)[1]
    assert given == "'" + "x" * (MAX_VALUE_CHARS - 4) + "...)"


def test_many_errors_are_capped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = write_yaml(tmp_path / "tasks.yaml", [{"task_id": f"t-{i}"} for i in range(15)])
    code, _, err = run_cli(capsys, "task", "publish", str(tasks))
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == MAX_ERROR_LINES + 1
    assert all(line.startswith("error: ") for line in lines[:-1])
    assert lines[-1] == f"  ... and {15 * 2 - MAX_ERROR_LINES} more"  # description, required_skills


def test_a_missing_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    code, _, err = run_cli(capsys, "task", "publish", str(missing))
    assert code == 1
    assert err == f"error: {missing}: no such file\n"


def test_a_directory_is_not_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "registry", "register", str(tmp_path))
    assert code == 1
    assert err == f"error: {tmp_path}: is a directory, not a file\n"


def test_invalid_yaml_says_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("- task_id: a\n  description: [unclosed\n")
    code, _, err = run_cli(capsys, "task", "publish", str(tasks))
    assert code == 1
    assert err.startswith(f"error: {tasks}: not valid YAML or JSON: ")
    assert "(line 3, column 1)" in err
    assert "Traceback" not in err


def test_invalid_json_says_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    agents = tmp_path / "agents.json"
    agents.write_text('[{"agent_id": "a",}]')
    code, _, err = run_cli(capsys, "registry", "register", str(agents))
    assert code == 1
    assert err == (
        f"error: {agents}: not valid JSON: Expecting property name enclosed in double quotes "
        "(line 1, column 19)\n"
    )


def test_an_empty_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "tasks.yaml"
    empty.write_text("# nothing yet\n")
    code, _, err = run_cli(capsys, "task", "publish", str(empty))
    assert code == 1
    assert err == f"error: {empty}: the file is empty; expected a TaskSpec or a list of them\n"


def test_profiles_are_validated_before_anything_is_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*_: Any, **__: Any) -> httpx.Response:
        raise AssertionError("nothing is sent when a profile is invalid")

    monkeypatch.setattr(httpx, "request", no_network)
    agents = write_yaml(
        tmp_path / "agents.yaml",
        [{"agent_id": "ok", "agent_name": "OK", "skill_tags": ["x"]}, {"agent_id": "bad", "skill_tags": []}],
    )
    code, _, err = run_cli(capsys, "--dapr-http-port", "1", "registry", "register", str(agents))
    assert code == 1
    assert err.splitlines() == [
        f"error: {agents}: item 2 (agent_id 'bad'): agent_name: Field required",
        f"error: {agents}: item 2 (agent_id 'bad'): skill_tags: "
        "List should have at least 1 item after validation, not 0 (given [])",
    ]


def test_usage_errors_stay_argparse_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["task"])
    assert exited.value.code == 2
    assert "usage:" in capsys.readouterr().err


# -- the examples ---------------------------------------------------------------------------


def test_the_example_tasks_are_valid_and_match_the_sample_agents() -> None:
    specs = load_models(str(EXAMPLES / "tasks.yaml"), TaskSpec, "task_id")
    assert 2 <= len(specs) <= 3
    assert all(spec.task_id.startswith("example-") for spec in specs)
    sample = yaml.safe_load((SAMPLE_AGENTS).read_text())
    skills = {tag for agent in sample for tag in agent["skill_tags"]}
    assert all(set(spec.required_skills) <= skills for spec in specs)


def test_the_example_agents_are_valid_and_new() -> None:
    profiles = load_models(str(EXAMPLES / "my-agents.yaml"), CapabilityProfile, "agent_id")
    assert 1 <= len(profiles) <= 2
    sample = yaml.safe_load((SAMPLE_AGENTS).read_text())
    assert not {p.agent_id for p in profiles} & {agent["agent_id"] for agent in sample}


def test_the_example_plans_are_valid_and_match_the_sample_agents() -> None:
    requests = load_models(str(EXAMPLES / "plan.yaml"), PlanRequest, "plan_id")
    sample = yaml.safe_load((SAMPLE_AGENTS).read_text())
    skills = {tag for agent in sample for tag in agent["skill_tags"]}
    assert len(requests) == 2
    drafted, given = requests
    assert given_plan(drafted) is None and set(drafted.skills) <= skills
    plan = given_plan(given)
    assert plan is not None and all(set(s.tool_hints) <= skills for s in plan.subgoals)


def test_the_example_debaters_make_a_debate() -> None:
    debaters = load_models(str(EXAMPLES / "debaters.yaml"), DebaterConfig, "debater_id")
    assert DebateConfig(debaters=debaters).router.debater_id == "careful"


def test_publishing_the_examples_sends_each_task(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[str, Any]] = []
    tokens: set[str | None] = set()

    def accept(method: str, url: str, **kwargs: Any) -> httpx.Response:
        sent.append((url, kwargs["json"]))
        tokens.add(kwargs["headers"].get("dapr-api-token"))
        return httpx.Response(204)

    monkeypatch.setattr(httpx, "request", accept)
    monkeypatch.setenv("DAPR_API_TOKEN", "console-token")
    code, out, _ = run_cli(
        capsys, "--dapr-http-port", "3500", "task", "publish", str(EXAMPLES / "tasks.yaml")
    )
    assert code == 0
    assert {url for url, _ in sent} == {"http://127.0.0.1:3500/v1.0/publish/agora-pubsub/agora.tasks"}
    assert tokens == {"console-token"}
    assert out.splitlines() == [f"published {body['task_id']}" for _, body in sent]


# -- answers from a running system ----------------------------------------------------------


def refusal(status: int, **kwargs: Any) -> str:
    return describe_refusal(httpx.Response(status, **kwargs), "registry")


def test_an_agora_error_is_its_code_and_message() -> None:
    body = {"error": "NOT_FOUND", "message": "no agent registered as 'x'", "details": {"agent_id": "x"}}
    assert (
        refusal(404, json=body) == "registry refused the request (404 NOT_FOUND): no agent registered as 'x'"
    )


def test_agora_validation_errors_are_one_indented_line_each() -> None:
    body = {
        "error": "INVALID_ARGUMENT",
        "message": "invalid request: body.required_skills: Field required; body.limit: ...",
        "details": {
            "errors": [
                {"loc": ["body", "required_skills"], "msg": "Field required", "type": "missing"},
                {"loc": ["body", "limit"], "msg": "Input should be less than or equal to 1000", "type": "x"},
                {"loc": [], "msg": "Input should be a valid dictionary", "type": "model_type"},
            ]
        },
    }
    assert refusal(422, json=body).splitlines() == [
        "registry refused the request (422 INVALID_ARGUMENT):",
        "  required_skills: Field required",
        "  limit: Input should be less than or equal to 1000",
        "  Input should be a valid dictionary",
    ]


def test_many_remote_validation_errors_are_capped() -> None:
    errors = [{"loc": ["body", f"f{i}"], "msg": "bad", "type": "x"} for i in range(25)]
    body = {"error": "INVALID_ARGUMENT", "message": "invalid", "details": {"errors": errors}}
    lines = refusal(422, json=body).splitlines()
    assert len(lines) == 1 + MAX_ERROR_LINES + 1
    assert lines[-1] == "  ... and 5 more"


def test_an_oversized_body_is_explained() -> None:
    body = {"error": "PAYLOAD_TOO_LARGE", "message": "the body exceeds 1048576 bytes", "details": {}}
    assert refusal(413, json=body) == (
        "registry refused the request (413 PAYLOAD_TOO_LARGE): the body exceeds 1048576 bytes"
    )


def test_a_dapr_sidecar_error_names_the_sidecar() -> None:
    body = {"errorCode": "ERR_DIRECT_INVOKE", "message": "failed to invoke, id: registry, err: not found"}
    assert refusal(500, json=body) == (
        "the Dapr sidecar refused the request to registry (500 ERR_DIRECT_INVOKE): "
        "failed to invoke, id: registry, err: not found"
    )
    forbidden = {"errorCode": "ERR_PUBSUB_FORBIDDEN", "message": "topic agora.tasks is not allowed"}
    assert describe_refusal(httpx.Response(403, json=forbidden), "topic agora.tasks") == (
        "the Dapr sidecar refused the request to topic agora.tasks (403 ERR_PUBSUB_FORBIDDEN): "
        "topic agora.tasks is not allowed"
    )


def test_a_plain_text_answer_is_shown_on_one_line() -> None:
    assert refusal(502, text="upstream\nwent away") == "registry answered 502 Bad Gateway: upstream went away"
    assert len(refusal(500, text="x" * 5000)) < 300


def test_an_empty_answer_says_so() -> None:
    assert refusal(503) == "registry answered 503 Service Unavailable with an empty body"


def test_an_unknown_json_body_is_not_printed_raw() -> None:
    described = refusal(500, json={"weird": {"nested": [1, 2]}})
    assert (
        described == "registry answered 500 Internal Server Error (the error body gives no code or message)"
    )


def test_a_refusal_exits_1_with_readable_lines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {
        "error": "INVALID_ARGUMENT",
        "message": "invalid request: body.required_skills: Field required; body.limit: ...",
        "details": {
            "errors": [{"loc": ["body", "required_skills"], "msg": "Field required", "type": "missing"}]
        },
    }
    monkeypatch.setattr(httpx, "request", lambda *_, **__: httpx.Response(422, json=body))
    code, _, err = run_cli(capsys, "--dapr-http-port", "3500", "registry", "filter", "--required", "x")
    assert code == 1
    assert err == (
        "error: registry refused the request (422 INVALID_ARGUMENT):\n  required_skills: Field required\n"
    )


def test_a_refused_connection_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: Any, **__: Any) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    monkeypatch.setattr(httpx, "request", refuse)
    code, _, err = run_cli(capsys, "--dapr-http-port", "3500", "registry", "list")
    assert code == 1
    assert err == (
        "error: no Dapr sidecar answers at 127.0.0.1:3500 (connection refused): "
        "start Agora with `make run`, or pass --dapr-http-port\n"
    )


def test_a_timeout_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(*_: Any, **__: Any) -> httpx.Response:
        raise httpx.ReadTimeout("timed out")

    monkeypatch.setattr(httpx, "request", hang)
    code, _, err = run_cli(capsys, "--dapr-http-port", "3500", "task", "show", "t-1")
    assert code == 1
    assert err == "error: taskboard did not answer within 30 s (through the sidecar at 127.0.0.1:3500)\n"


# -- finding the running system ---------------------------------------------------------------


def write_run(folder: Path, services: dict[str, int]) -> Path:
    folder.mkdir(parents=True)
    manifest = {
        "run_dir": str(folder),
        "services": [
            {"name": f"{app_id}-0", "app_id": app_id, "dapr_http_port": port, "app_port": 1}
            for app_id, port in services.items()
        ],
    }
    (folder / "cluster.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """A working directory and a cache directory, with no run in either yet; sidecars in
    `live` answer, others do not."""
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("AGORA_CACHE", str(cache))
    for name in ("DAPR_HTTP_PORT", "DAPR_HTTP_ENDPOINT", "DAPR_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    live: set[int] = set()
    monkeypatch.setattr(cli_sidecar, "sidecar_answers", lambda url: int(url.rsplit(":", 1)[1]) in live)
    return SimpleNamespace(work=work, cache=cache, live=live, tmp=tmp_path)


def link_here(places: SimpleNamespace, run: Path) -> None:
    point_link(places.work / ".run" / "current", run)


def link_user_wide(places: SimpleNamespace, run: Path) -> None:
    point_link(places.cache / "current", run)


def test_an_explicit_port_wins_and_the_services_are_unknown(places: SimpleNamespace) -> None:
    link_here(places, write_run(places.work / ".run" / "a", {"agora": 4001}))
    places.live.add(4001)
    assert cli_sidecar.find_sidecar(5000) == Sidecar(loopback(5000), frozenset())


def test_the_run_of_this_directory_comes_before_the_user_wide_one(
    places: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    link_here(places, write_run(places.work / ".run" / "a", {"agora": 4001}))
    link_user_wide(places, write_run(places.tmp / "elsewhere" / "b", {"agora": 4002}))
    monkeypatch.setenv("DAPR_HTTP_PORT", "4003")
    places.live.update({4001, 4002})
    assert cli_sidecar.find_sidecar(None) == Sidecar(loopback(4001), frozenset({"agora"}))


def test_the_user_wide_run_is_found_from_any_directory(
    places: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    link_user_wide(
        places, write_run(places.tmp / "clone" / ".run" / "b", {"registry": 4002, "console": 4005})
    )
    monkeypatch.setenv("DAPR_HTTP_PORT", "4003")
    places.live.update({4002, 4005})
    assert cli_sidecar.find_sidecar(None) == Sidecar(loopback(4005), frozenset({"registry", "console"}))


def test_dapr_http_port_is_the_last_resort(places: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAPR_HTTP_PORT", "4003")
    assert cli_sidecar.find_sidecar(None) == Sidecar(loopback(4003), frozenset())


def test_dapr_http_endpoint_names_a_remote_sidecar_and_the_token_goes_with_every_request(
    places: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAPR_HTTP_ENDPOINT", "http://agora-console.agora.svc:3500/")
    monkeypatch.setenv("DAPR_HTTP_PORT", "4003")
    monkeypatch.setenv("DAPR_API_TOKEN", "s3cret-token")
    asked: list[tuple[str, dict[str, str]]] = []

    def metadata(url: str, timeout: float, headers: dict[str, str]) -> httpx.Response:
        asked.append((url, headers))
        return httpx.Response(200, json={"id": "console"}, request=httpx.Request("GET", url))

    monkeypatch.setattr(httpx, "get", metadata)
    found = cli_sidecar.find_sidecar(None)
    assert found == Sidecar("http://agora-console.agora.svc:3500", frozenset({"console"}))
    assert asked == [
        ("http://agora-console.agora.svc:3500/v1.0/metadata", {"dapr-api-token": "s3cret-token"})
    ]
    assert found.where == "agora-console.agora.svc:3500"


def test_a_dapr_http_endpoint_that_is_not_an_address_is_refused(
    places: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAPR_HTTP_ENDPOINT", "agora-console:3500")
    with pytest.raises(CliError) as failed:
        cli_sidecar.find_sidecar(None)
    assert (
        str(failed.value) == "DAPR_HTTP_ENDPOINT='agora-console:3500' is not an http(s)://host[:port] address"
    )


def test_with_nothing_running_it_says_how_to_start(places: SimpleNamespace) -> None:
    with pytest.raises(CliError) as failed:
        cli_sidecar.find_sidecar(None)
    assert str(failed.value) == "no running Agora found: start one with `make run`, or pass --dapr-http-port"


def test_a_run_that_does_not_answer_is_not_trusted(places: SimpleNamespace) -> None:
    run = write_run(places.tmp / "clone" / ".run" / "b", {"agora": 4002})
    link_user_wide(places, run)
    with pytest.raises(CliError) as failed:
        cli_sidecar.find_sidecar(None)
    assert str(failed.value) == (
        f"no running Agora found (the last run at {run.resolve()} is not answering): "
        "start one with `make run`, or pass --dapr-http-port"
    )


def test_a_run_folder_that_is_gone_is_not_trusted(places: SimpleNamespace) -> None:
    link_user_wide(places, places.tmp / "removed")
    with pytest.raises(CliError) as failed:
        cli_sidecar.find_sidecar(None)
    assert f"(the last run at {(places.tmp / 'removed').resolve()} is gone)" in str(failed.value)


def test_a_stale_run_here_gives_way_to_a_live_one_elsewhere(places: SimpleNamespace) -> None:
    link_here(places, write_run(places.work / ".run" / "a", {"agora": 4001}))
    link_user_wide(places, write_run(places.tmp / "elsewhere" / "b", {"agora": 4002}))
    places.live.add(4002)
    assert cli_sidecar.find_sidecar(None).url == "http://127.0.0.1:4002"


def test_a_stale_run_gives_way_to_dapr_http_port(
    places: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    link_here(places, write_run(places.work / ".run" / "a", {"agora": 4001}))
    monkeypatch.setenv("DAPR_HTTP_PORT", "4003")
    assert cli_sidecar.find_sidecar(None) == Sidecar(loopback(4003), frozenset())


def test_the_embedded_app_is_invoked_for_every_service(
    places: SimpleNamespace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    link_user_wide(places, write_run(places.tmp / "clone" / ".run" / "b", {"agora": 4002}))
    places.live.add(4002)
    urls: list[str] = []

    def answer(method: str, url: str, **_: Any) -> httpx.Response:
        urls.append(url)
        return httpx.Response(200, json={"agents": []})

    monkeypatch.setattr(httpx, "request", answer)
    code, out, _ = run_cli(capsys, "registry", "list")
    assert (code, out) == (0, "(no agents)\n")
    assert urls == ["http://127.0.0.1:4002/v1.0/invoke/agora/method/v1/agents"]


def test_a_run_leaves_a_link_that_a_later_run_took_over(places: SimpleNamespace) -> None:
    link = places.cache / "current"
    first, second = places.tmp / "first", places.tmp / "second"
    first.mkdir()
    second.mkdir()
    point_link(link, first)
    point_link(link, second)  # a second `agora run` started meanwhile
    unlink_if_pointing_at(link, first)
    assert link.resolve() == second.resolve()
    unlink_if_pointing_at(link, second)
    assert not link.is_symlink()


# -- the `agora run` banner -----------------------------------------------------------------


def test_the_banner_names_the_services_jaeger_knows_and_the_console(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def replica(app_id: str, module: str | None, port: int) -> SimpleNamespace:
        return SimpleNamespace(
            name=f"{app_id}-0",
            spec=ServiceSpec(app_id, module),
            endpoints=Endpoints(port, port + 1, port + 2, port + 3),
            dapr_http=f"http://127.0.0.1:{port + 1}",
            app_url=f"http://127.0.0.1:{port}",
        )

    stopped = SimpleNamespace(running=lambda: False)
    replicas: list[SimpleNamespace] = []

    envs: dict[str, dict[str, str]] = {}

    def add_service(spec: ServiceSpec) -> list[SimpleNamespace]:
        envs[spec.app_id] = spec.env
        if spec.app_id == "console":
            assert spec.env["AGORA_CONSOLE_SERVICES_APP_ID"] == "agora"
        replicas.append(replica(spec.app_id, spec.module, 4000 + 10 * len(replicas)))
        return replicas[-1:]

    peers: list[list[str]] = []
    cluster = SimpleNamespace(
        replicas=replicas,
        with_jaeger=True,
        jaeger_query_url="http://127.0.0.1:16686",
        model_url=None,
        add_service=add_service,
        ports=SimpleNamespace(take=lambda: 9123),
        add_peer=lambda name, argv, port: peers.append([name, *argv[1:], str(port)]),
        processes=lambda: iter([stopped]),
    )
    args = argparse.Namespace(profile="default", no_demo=True, agents=None)
    assert cli_run.serve_locally(cast(LocalCluster, cluster), args, tmp_path / "run") == 1
    out = capsys.readouterr().out
    example = str(cli_run.EXAMPLE_A2A_AGENT[1])
    assert peers == [["a2a-text-stats", example, "--port", "9123", "9123"]]
    assert envs["agora"]["AGORA_A2A_AGENTS"] == "text-stats=http://127.0.0.1:9123"
    on_the_market = (
        "  on the market over A2A: text-stats, an agent of the a2a-sdk alone (http://127.0.0.1:9123)"
    )
    assert on_the_market + "\n" in out
    assert "  traces: http://127.0.0.1:16686 (Jaeger query API; services: agora)\n" in out
    secret_file = tmp_path / "run" / "console" / "operator-secret"
    assert f"  console: http://127.0.0.1:4010  (sign in as operator with the secret in {secret_file})" in out
    assert secret_file.read_text().strip() not in out


def test_a_run_points_both_links_at_its_folder_while_it_runs(
    places: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Path] = {}

    class FakeCluster:
        def __init__(self, profile: str, *, run_dir: Path, **_: Any) -> None:
            self.run_dir = run_dir

        def __enter__(self) -> FakeCluster:
            return self

        def __exit__(self, *_: object) -> None:
            pass

    def serve(cluster: FakeCluster, args: argparse.Namespace, run_dir: Path) -> int:
        seen["here"] = (places.work / ".run" / "current").resolve()
        seen["user-wide"] = (places.cache / "current").resolve()
        seen["run_dir"] = cluster.run_dir
        return 0

    monkeypatch.setattr(cli_run, "LocalCluster", FakeCluster)
    monkeypatch.setattr(cli_run, "serve_locally", serve)
    args = argparse.Namespace(profile="default", no_jaeger=True, no_demo=True, agents=None, model="offline")
    assert cli_run.cmd_run(args) == 0
    assert seen["run_dir"].is_absolute()
    assert seen["here"] == seen["user-wide"] == seen["run_dir"]
    assert not (places.work / ".run" / "current").is_symlink()
    assert not (places.cache / "current").is_symlink()


# -- listings and details for people ----------------------------------------------------------

PARKED_AT = datetime(2030, 1, 1, 9, 30, tzinfo=UTC)


def answering(monkeypatch: pytest.MonkeyPatch, answer: Any) -> list[str]:
    """Every request is answered with `answer` (JSON); the URLs asked for are returned."""
    asked: list[str] = []

    def reply(method: str, url: str, **_: Any) -> httpx.Response:
        asked.append(url)
        return httpx.Response(200, json=answer)

    monkeypatch.setattr(httpx, "request", reply)
    monkeypatch.setattr(cli_sidecar, "find_sidecar", lambda _port: Sidecar("http://127.0.0.1:3500"))
    return asked


@pytest.mark.parametrize(
    ("argv", "answer", "query", "said"),
    [
        (["plan", "list"], {"total": 0, "plans": []}, "v1/plans?limit=50&offset=0", "no plans"),
        (
            ["plan", "list", "--state", "RUNNING"],
            {"state": "RUNNING", "total": 0, "plans": []},
            "v1/plans?state=RUNNING&limit=50&offset=0",
            "no plans in RUNNING",
        ),
        (["debate", "list"], {"total": 0, "debates": []}, "v1/debates?limit=50&offset=0", "no debates"),
        (
            ["escalations", "list", "--status", "EXPIRED", "--limit", "5"],
            {"status": "EXPIRED", "total": 0, "escalations": []},
            "v1/escalations?status=EXPIRED&limit=5&offset=0",
            "no escalations in EXPIRED",
        ),
        (
            [
                "escalations",
                "list",
                "--status",
                "WAITING_FOR_HUMAN",
                "--kind",
                "task",
                "--below-confidence",
                "0.5",
            ],
            {"status": "WAITING_FOR_HUMAN", "total": 0, "escalations": []},
            "v1/escalations?status=WAITING_FOR_HUMAN&kind=task&below_confidence=0.5&limit=50&offset=0",
            "no escalations in WAITING_FOR_HUMAN",
        ),
    ],
    ids=["plans", "plans-in-a-state", "debates", "escalations-in-a-status", "escalations-narrowed"],
)
def test_an_empty_listing_says_so_and_no_state_given_lists_every_state(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    answer: dict[str, Any],
    query: str,
    said: str,
) -> None:
    asked = answering(monkeypatch, answer)
    code, out, err = run_cli(capsys, *argv)
    assert (code, out, err) == (0, said + "\n", "")
    assert [url.split("/method/", 1)[1] for url in asked] == [query]


@pytest.mark.parametrize(
    ("shown", "total", "offset", "limit", "line"),
    [
        (3, 3, 0, 50, "(3 plans)"),
        (1, 1, 0, 50, "(1 plan)"),
        (50, 120, 0, 50, "(1-50 of 120 plans; --offset 50 for more)"),
        (49, 120, 50, 50, "(51-100 of 120 plans; --offset 100 for more)"),  # one listed plan is gone
        (20, 120, 100, 50, "(101-120 of 120 plans)"),
        (0, 120, 200, 50, "(no plans from offset 200; 120 in all)"),
        (0, 0, 0, 50, "no plans"),
    ],
)
def test_a_listing_says_how_many_there_are_in_all(
    shown: int, total: int, offset: int, limit: int, line: str
) -> None:
    assert listing_summary("plan", None, shown, total, offset, limit) == line


def test_a_listing_of_every_state_shows_each_plans_state_and_creation() -> None:
    first = new_record(PlanRequest(plan_id="p-old", task="Count the apples"), PARKED_AT)
    later = new_record(PlanRequest(plan_id="p-new", task="Count the pears"), PARKED_AT + timedelta(hours=1))
    listing = PlanList(
        total=3, plans=[later.model_copy(update={"state": PlanState.RUNNING}), first]
    )  # newest first, as the service answers
    lines = plan_list_lines(listing, offset=0, limit=2)
    assert lines[0].split() == ["p-new", "RUNNING", "--", "2030-01-01", "10:30", "Count", "the", "pears"]
    assert lines[1].split()[:2] == ["p-old", "PLANNING"]
    assert lines[2] == "(1-2 of 3 plans; --offset 2 for more)"


def escalation_context(**fields: Any) -> EscalationContext:
    given: dict[str, Any] = {
        "job_id": "job-7",
        "step": 2,
        "validation_results": [
            {
                "kind": "round",
                "subject": "1",
                "passed": False,
                "figures": {"convergence": 0.3333333333333333},
            }
        ],
        "confidence": 0.2333333333333333,
        "retry_count": 1,
        "error_history": ["step 1: the totals differ", "step 2: still   differ"],
        "prompt_used": "Reconcile the ledger\nagainst the bank statement",
        "output_summary": "Not sure the ledger balances",
        "historical_suggestions": [
            HistoricalSuggestion(
                action="retry",
                confidence=0.41666666666666663,
                outcome_succeeded=True,
                guidance="Check the currency first",
                similarity=0.8765432,
                escalation_id="e-past",
            ),
            HistoricalSuggestion(action="skip", confidence=0.1, outcome_succeeded=None, similarity=0.5),
        ],
    }
    return EscalationContext.model_validate({**given, **fields})


def parked(context: EscalationContext | CheckpointContext) -> EscalationRecord:
    return park(
        "e-7",
        WaitingParty(kind=WaitingPartyKind.SESSION, id="session-7"),
        context,
        now=PARKED_AT,
        who="uncertainty",
        why="confidence below 0.60",
        deadline=PARKED_AT + timedelta(hours=2),
        default_decision=EscalationResponse(action="skip"),
    )


def test_an_escalation_is_shown_field_by_field_with_two_decimals() -> None:
    decided = resolve(
        parked(escalation_context()),
        EscalationResponse(action="modify_prompt", modified_prompt="Use EUR", confidence_boost=0.1),
        "alice",
        "the currency was wrong",
        PARKED_AT + timedelta(minutes=5),
    )
    lines = escalation_lines(decided)
    text = "\n".join(lines)
    assert lines[:4] == [
        "e-7: RESOLVED",
        "  waiting: session session-7",
        "  created: 2030-01-01 09:30:00 UTC",
        "  deadline: 2030-01-01 11:30:00 UTC, then by default: skip",
    ]
    for shown in [
        "context: step 2 of job-7",
        "  confidence: 0.23",
        "  retries so far: 1",
        "  prompt: Reconcile the ledger",
        "    against the bank statement",
        "  output summary: Not sure the ledger balances",
        "    1. step 1: the totals differ",
        "    2. step 2: still differ",
        "    1. round 1: failed, convergence 0.33",
        "  1. retry (succeeded): similarity 0.88, confidence then 0.42, escalation e-past",
        "    guidance: Check the currency first",
        "  2. skip (outcome unknown): similarity 0.50, confidence then 0.10",
        "decision: modify_prompt by alice at 2030-01-01 09:35:00 UTC",
        "  modified prompt: Use EUR",
        "  confidence boost: 0.10",
        "  2030-01-01 09:30:00 UTC  uncertainty: parked (confidence below 0.60)",
    ]:
        assert shown in lines, (shown, text)
    assert "0.2333" not in text and "0.4166" not in text and "{" not in text
    suggestions = lines.index("suggestions (similar past escalations, the most relevant first):")
    assert lines.index("context: step 2 of job-7") < suggestions < lines.index("audit:")


def test_a_waiting_escalation_without_suggestions_says_so() -> None:
    lines = escalation_lines(parked(escalation_context(historical_suggestions=[], validation_results=[])))
    assert lines[0] == "e-7: WAITING_FOR_HUMAN"
    assert "suggestions: none (no similar past escalation)" in lines
    assert not any(line.startswith("decision:") for line in lines)
    assert "validation results:" not in "\n".join(lines)


def test_a_checkpoint_is_shown_with_its_trigger() -> None:
    context = CheckpointContext(
        job_id="job-8",
        step=3,
        prompt="DROP TABLE orders",
        trigger=CheckpointTrigger(name="destructive", prompt_contains=["drop"], message="Dropping a table"),
        previous_errors=["permission denied"],
    )
    record = park("c-8", WaitingParty(kind=WaitingPartyKind.TASK, id="t-8"), context, now=PARKED_AT)
    lines = escalation_lines(record)
    assert "context: a checkpoint before step 3 of job-8" in lines
    assert "  trigger: destructive: Dropping a table" in lines
    assert "    1. permission denied" in lines
    assert not any(line.startswith("suggestions") for line in lines)
    assert "confidence -" in escalation_row(record)


def test_escalations_show_renders_the_record_and_json_prints_it_for_scripts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    record = parked(escalation_context())
    asked = answering(monkeypatch, record.model_dump(mode="json"))
    code, out, _ = run_cli(capsys, "escalations", "show", "e-7")
    assert code == 0 and out.splitlines() == escalation_lines(record)
    code, out, _ = run_cli(capsys, "escalations", "show", "e-7", "--json")
    assert code == 0 and EscalationRecord.model_validate_json(out) == record
    assert all(url.endswith("/method/v1/escalations/e-7") for url in asked)


def test_escalations_list_shows_every_status_newest_first_as_the_service_answers(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting = parked(escalation_context())
    done = resolve(
        waiting.model_copy(update={"escalation_id": "e-6"}),
        EscalationResponse(action="skip"),
        "bob",
        "",
        PARKED_AT + timedelta(minutes=1),
    )
    listing = EscalationList(total=2, escalations=[waiting, done])
    answering(monkeypatch, listing.model_dump(mode="json"))
    code, out, _ = run_cli(capsys, "escalations", "list")
    rows = out.splitlines()
    assert code == 0 and rows == [escalation_row(waiting), escalation_row(done), "(2 escalations)"]
    assert rows[0].split()[:5] == ["e-7", "WAITING_FOR_HUMAN", "session", "session-7", "confidence"]
    assert rows[0].endswith(
        "confidence 0.23  created 2030-01-01 09:30:00 UTC  deadline 2030-01-01 11:30:00 UTC"
    )
    assert rows[1].split()[1] == EscalationStatus.RESOLVED and "deadline" not in rows[1]  # decided: moot
    code, out, _ = run_cli(capsys, "escalations", "list", "--json")
    assert code == 0 and EscalationList.model_validate_json(out) == listing


# -- answers read as their contract models, requests sent as them -------------------------------


def exchanging(monkeypatch: pytest.MonkeyPatch, answer: Any) -> list[tuple[str, str, Any]]:
    """Every request is answered with `answer` (JSON); each request's method, path and body
    are returned."""
    sent: list[tuple[str, str, Any]] = []

    def reply(method: str, url: str, **kwargs: Any) -> httpx.Response:
        sent.append((method, url.split("/method/", 1)[1], kwargs.get("json")))
        return httpx.Response(200, json=answer)

    monkeypatch.setattr(httpx, "request", reply)
    monkeypatch.setattr(cli_sidecar, "find_sidecar", lambda _port: Sidecar("http://127.0.0.1:3500"))
    return sent


def scored(agent_id: str, final: float) -> BidScore:
    return BidScore(
        bid_id=f"b-{agent_id}", agent_id=agent_id, raw_success_prob=0.8, calibrated_success_prob=0.75,
        reputation_score=0.5, cost_score=0.25, composite=final - 0.125, ucb_bonus=0.125, final_score=final,
    )  # fmt: skip


def test_a_task_is_shown_from_its_record(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = TaskSpec.model_validate(VALID_TASK)
    bid = Bid(task_id="t-1", agent_id="a1", self_reported_success_prob=0.8, estimated_cost_usd=0.01,
              estimated_steps=2)  # fmt: skip
    allocation = AllocationResult(
        task_id="t-1", status=AllocationStatus.ALLOCATED, winning_agent_id="a1", winning_bid=bid,
        winning_score=scored("a1", 0.5), all_scores=[scored("a1", 0.5), scored("a2", -0.25)],
    )  # fmt: skip
    outcome = TaskOutcome(
        task_id="t-1", agent_id="a1", actual_success=True, actual_cost_usd=0.002, actual_steps=2
    )
    record = TaskRecord(
        spec=spec,
        status=AllocationStatus.COMPLETED,
        allocation=allocation,
        outcome=outcome,
        history=[StatusChange(status=s) for s in ("PENDING", "BIDDING", "ALLOCATED", "COMPLETED")],
    )
    sent = exchanging(monkeypatch, record.model_dump(mode="json"))
    code, out, err = run_cli(capsys, "task", "show", "t-1")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "t-1: COMPLETED  (Do it)",
        "  history: PENDING → BIDDING → ALLOCATED → COMPLETED",
        "  ★ a1             final=+0.500 calibrated=0.75 reputation=0.50 cost=0.25 ucb=0.12",
        "    a2             final=-0.250 calibrated=0.75 reputation=0.50 cost=0.25 ucb=0.12",
        "  outcome: success by a1, 2 steps, $0.0020",
    ]
    code, out, _ = run_cli(capsys, "task", "show", "t-1", "--json")
    assert code == 0 and TaskRecord.model_validate_json(out) == record
    assert [path for _, path, _ in sent] == ["v1/tasks/t-1", "v1/tasks/t-1"]


def test_an_answer_that_does_not_read_as_its_contract_model_is_a_readable_failure(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    exchanging(monkeypatch, {"agents": [{"agent_id": "a1", "skill_tags": "not a list"}]})
    code, out, err = run_cli(capsys, "registry", "list")
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0] == (
        "error: registry answered with a body that does not read as AgentList; "
        "is 127.0.0.1:3500 an Agora sidecar?"
    )
    assert "  AgentList: agents.0.agent_name: Field required" in lines
    assert "Traceback" not in err


def test_agents_are_listed_and_filtered_from_their_answers(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = {"agent_id": "a1", "agent_name": "A", "skill_tags": ["sql", "python"], "cost_per_step_usd": 0.002}
    sent = exchanging(monkeypatch, {"agents": [agent]})
    code, out, _ = run_cli(capsys, "registry", "filter", "--required", "sql", "--limit", "3")
    assert code == 0 and out.split() == ["a1", "balanced", "$0.0020", "sql,", "python"]
    [(method, path, body)] = sent
    assert (method, path) == ("POST", "v1/agents/filter")
    assert body == CapabilityQuery(required_skills=["sql"], limit=3).model_dump(mode="json")


def test_a_capability_query_that_does_not_validate_is_refused_before_it_is_sent(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = exchanging(monkeypatch, {"agents": []})
    code, out, err = run_cli(capsys, "registry", "filter", "--required", "sql", "--limit", "5000")
    assert (code, out) == (1, "")
    assert err.startswith("error: the capability query: limit: Input should be less than or equal to 1000")
    assert sent == []


def test_a_registration_says_until_when_in_utc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = {"agent_id": "a1", "agent_name": "A", "skill_tags": ["sql"]}
    agents = write_yaml(tmp_path / "agents.yaml", [profile])
    answer = {**profile, "lease_expires_at": "2030-01-01T10:30:00+01:00"}
    sent = exchanging(monkeypatch, answer)
    code, out, _ = run_cli(capsys, "registry", "register", str(agents))
    assert (code, out) == (0, "registered a1 until 2030-01-01 09:30:00 UTC (register again to renew)\n")
    [(_, path, body)] = sent
    assert path.startswith("v1/agents?lease_seconds=")
    assert body == CapabilityProfile.model_validate(profile).model_dump(mode="json")


def test_a_decision_is_sent_as_a_resume_request(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    decision = EscalationResponse(action="modify_prompt", modified_prompt="Use EUR", guidance="check first")
    decided = resolve(parked(escalation_context()), decision, "alice", "wrong currency", PARKED_AT)
    sent = exchanging(monkeypatch, decided.model_dump(mode="json"))
    argv = ["escalations", "resume", "e-7", "--action", "modify_prompt", "--prompt", "Use EUR",
            "--guidance", "check first", "--who", "alice", "--why", "wrong currency"]  # fmt: skip
    code, out, _ = run_cli(capsys, *argv)
    assert (code, out) == (0, "e-7: RESOLVED with modify_prompt by alice\n")
    [(method, path, body)] = sent
    assert (method, path) == ("POST", "v1/escalations/e-7/resume")
    assert ResumeRequest.model_validate(body) == ResumeRequest(
        decision=decision, who="alice", why="wrong currency"
    )


def test_a_decision_is_bound_to_the_context_shown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting = parked(escalation_context())
    digest = context_digest(waiting)
    assert escalation_lines(waiting)[-1].startswith(f"context digest: {digest} ")
    decided = resolve(waiting, EscalationResponse(action="skip"), "alice", "", PARKED_AT)
    sent = exchanging(monkeypatch, decided.model_dump(mode="json"))
    code, _, _ = run_cli(capsys, "escalations", "resume", "e-7", "--action", "skip", "--seen", digest)
    assert code == 0
    [(_, _, body)] = sent
    assert ResumeRequest.model_validate(body).context_digest == digest

    code, out, err = run_cli(capsys, "escalations", "resume", "e-7", "--action", "skip", "--seen", "abc")
    assert (code, out) == (1, "") and err.startswith("error: the decision: context_digest: ")
    assert len(sent) == 1  # refused before it is sent


def test_a_decision_that_does_not_validate_is_refused_before_it_is_sent(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = exchanging(monkeypatch, {})
    code, out, err = run_cli(capsys, "escalations", "resume", "e-7", "--action", "modify_prompt")
    assert (code, out, sent) == (1, "", [])
    assert err == (
        "error: the decision: modified_prompt: "
        "Value error, modified_prompt is required when action is modify_prompt (given None)\n"
    )


def test_agora_run_puts_the_example_agents_or_the_given_ones_beside_the_services(tmp_path: Path) -> None:
    embedded = cli_run.agent_app_of("default", None)
    assert [s.app_id for s in embedded] == ["agora"]
    assert embedded[0].env["AGORA_SDK_AGENTS_FILE"] == os.pathsep.join(str(f) for f in cli_run.EXAMPLE_AGENTS)

    mine = tmp_path / "my_agents.py"
    mine.write_text("agents = []\n")
    separate = cli_run.agent_app_of("redis", mine)
    assert separate[-1].app_id == "agents" and separate[-1].module == "agora.sdk"
    assert separate[-1].env == {"AGORA_AGENTS_FILE": str(mine.resolve())}

    with pytest.raises(CliError, match=r"missing\.py: no such file"):
        cli_run.agent_app_of("redis", tmp_path / "missing.py")


def test_agora_run_puts_a2a_agents_in_the_app_that_hosts_the_agents() -> None:
    named = "text-stats=http://127.0.0.1:9123"
    [embedded] = cli_run.agent_app_of("default", None, named)
    assert embedded.env["AGORA_A2A_AGENTS"] == named and "AGORA_SDK_AGENTS_FILE" in embedded.env
    separate = cli_run.agent_app_of("redis", None, named)[-1]
    assert separate.app_id == "agents" and separate.env["AGORA_A2A_AGENTS"] == named
    assert cli_run.agent_app_of("redis", None)[-1].env.keys() == {"AGORA_AGENTS_FILE"}
