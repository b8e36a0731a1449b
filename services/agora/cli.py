"""`agora` command line: run the local system, and talk to a running one.

Commands that talk to a running system go through a Dapr sidecar's HTTP API (service
invocation and publish). The sidecar is, in this order: `--dapr-http-port`; the system the
`agora run` of this directory started (`.run/current/cluster.json`); the system the last
`agora run` on this machine started (`$AGORA_CACHE/current/cluster.json`, default
`~/.cache/agora`); DAPR_HTTP_ENDPOINT (e.g. `http://agora-console.agora.svc:3500`);
DAPR_HTTP_PORT (on 127.0.0.1, as in a pod beside its sidecar). With DAPR_API_TOKEN set, every
request carries it (`dapr-api-token`), as a sidecar that requires an API token expects.

Expected failures (a file that does not parse or validate, a refusal from the system, no
system running) are printed as `error: ...` lines, exit code 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import httpx
import yaml
from pydantic import BaseModel, ValidationError

from agora.core.contracts import EscalationList
from agora.core.debate import (
    FINAL_DEBATE_STATES,
    AggregationStrategy,
    DebateAccepted,
    DebateConfig,
    DebateList,
    DebaterConfig,
    DebateRecord,
    DebateState,
    DebateSubmission,
)
from agora.core.errors import ErrorBody, FieldError, error_from
from agora.core.escalation.record import EscalationRecord, EscalationStatus
from agora.core.market import AllocationStatus, TaskSpec
from agora.core.messages import DEFAULT_LEASE_SECONDS, MAX_LEASE_SECONDS, MIN_LEASE_SECONDS, Topic
from agora.core.models import CapabilityProfile
from agora.core.plans import FINAL_STATES, PlanAccepted, PlanList, PlanRecord, PlanRequest, PlanState
from agora.debate.view import debate_lines
from agora.demo import invoker, run_demo, session_continuation
from agora.escalation.view import escalation_lines, escalation_row
from agora.harness.cluster import LocalCluster
from agora.harness.processes import ProcessFailed
from agora.harness.system import JAEGER_DEFAULT_PORTS, SERVICES_BY_PROFILE, app_id_hosting
from agora.harness.toolchain import MissingTool, cache_root
from agora.planner.view import plan_lines

RUN_ROOT = Path(".run")
REQUEST_TIMEOUT_S = 30.0
PROBE_TIMEOUT_S = 2.0
MAX_ERROR_LINES = 20
MAX_VALUE_CHARS = 80
MAX_TEXT_CHARS = 200

Model = TypeVar("Model", bound=BaseModel)


class CliError(Exception):
    """An expected failure. `main` prints it (`error: ` before each line that is not indented)
    and exits 1."""


# -- finding the running system --------------------------------------------------------------


@dataclass(frozen=True)
class _Sidecar:
    """The sidecar the CLI talks through, and the app ids running behind it (empty: unknown;
    each service is then addressed by its own name)."""

    url: str
    """The sidecar's HTTP API, e.g. `http://127.0.0.1:3500`."""
    app_ids: frozenset[str] = frozenset()

    @property
    def where(self) -> str:
        return self.url.split("://", 1)[-1]


def _loopback(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def _token_header() -> dict[str, str]:
    token = os.environ.get("DAPR_API_TOKEN")
    return {"dapr-api-token": token} if token else {}


def _run_links() -> tuple[Path, Path]:
    """Where `agora run` points at its run folder: in this directory, and user-wide."""
    return RUN_ROOT / "current", cache_root() / "current"


def _sidecar_answers(url: str) -> bool:
    try:
        httpx.get(f"{url}/v1.0/healthz", timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError:
        return False
    return True


def _sidecar_of_run(link: Path) -> _Sidecar | str | None:
    """The sidecar of the run `link` points at; or why that run cannot be used; or None when
    there is no such link."""
    if not link.is_symlink() and not link.exists():
        return None
    run_dir = link.resolve()
    if not run_dir.is_dir():
        return f"the last run at {run_dir} is gone"
    try:
        manifest = json.loads((run_dir / "cluster.json").read_text())
        services = [(str(s["app_id"]), int(s["dapr_http_port"])) for s in manifest["services"]]
    except (OSError, ValueError, KeyError, TypeError):
        return f"the last run at {run_dir} has no readable cluster.json"
    if not services:
        return f"the last run at {run_dir} has no services up yet"
    # People's tools speak as the console where there is one (the access-control policies
    # name it); otherwise through any sidecar.
    url = _loopback(next((p for app_id, p in services if app_id == "console"), services[0][1]))
    if not _sidecar_answers(url):
        return f"the last run at {run_dir} is not answering"
    return _Sidecar(url, frozenset(app_id for app_id, _ in services))


def _named_sidecar(url: str) -> _Sidecar:
    """A sidecar given by address: its own app id (from its metadata) tells whether it fronts
    the embedded app that hosts every service."""
    try:
        answer = httpx.get(f"{url}/v1.0/metadata", timeout=PROBE_TIMEOUT_S, headers=_token_header())
        own_id = str(answer.json()["id"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return _Sidecar(url)
    return _Sidecar(url, frozenset({own_id}))


def _find_sidecar(dapr_http_port: int | None) -> _Sidecar:
    if dapr_http_port is not None:
        return _named_sidecar(_loopback(dapr_http_port))
    unusable: str | None = None
    for link in _run_links():
        found = _sidecar_of_run(link)
        if isinstance(found, _Sidecar):
            return found
        unusable = unusable or found
    endpoint = os.environ.get("DAPR_HTTP_ENDPOINT", "").rstrip("/")
    if endpoint:
        if not re.fullmatch(r"https?://[^\s/]+", endpoint):
            raise CliError(f"DAPR_HTTP_ENDPOINT={_shown(endpoint)} is not an http(s)://host[:port] address")
        return _named_sidecar(endpoint)
    if os.environ.get("DAPR_HTTP_PORT"):
        try:
            return _named_sidecar(_loopback(int(os.environ["DAPR_HTTP_PORT"])))
        except ValueError:
            raise CliError(f"DAPR_HTTP_PORT={os.environ['DAPR_HTTP_PORT']!r} is not a port number") from None
    why = f" ({unusable})" if unusable else ""
    raise CliError(f"no running Agora found{why}: start one with `make run`, or pass --dapr-http-port")


def _sidecar(args: argparse.Namespace) -> _Sidecar:
    found = getattr(args, "sidecar", None)
    if not isinstance(found, _Sidecar):
        found = args.sidecar = _find_sidecar(args.dapr_http_port)
    return found


def _point_link(link: Path, target: Path) -> None:
    """Make `link` a symlink to `target`, replacing whatever link was there in one step."""
    link.parent.mkdir(parents=True, exist_ok=True)
    fresh = link.with_name(f".{link.name}.{os.getpid()}")
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(target)
    os.replace(fresh, link)


def _unlink_if_pointing_at(link: Path, run_dir: Path) -> None:
    """Remove `link` unless a later run has pointed it at its own folder since."""
    try:
        if link.is_symlink() and link.resolve() == run_dir.resolve():
            link.unlink()
    except OSError:
        pass


# -- readable errors ---------------------------------------------------------------------------


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _shown(value: Any) -> str:
    """A value as the user wrote it, shortened (repr keeps it on one line and shows blanks)."""
    return _shorten(repr(value), MAX_VALUE_CHARS)


def _capped(lines: list[str], indent: str = "") -> list[str]:
    if len(lines) <= MAX_ERROR_LINES:
        return lines
    return [*lines[:MAX_ERROR_LINES], f"{indent}... and {len(lines) - MAX_ERROR_LINES} more"]


def _dotted(loc: Iterable[Any]) -> str:
    return ".".join(str(part) for part in loc)


def _validation_lines(where: str, exc: ValidationError) -> list[str]:
    """One `where: field.path: what was expected (given value)` line per validation error."""
    lines = []
    for error in exc.errors(include_url=False):
        field = _dotted(error["loc"])
        given = error.get("input")
        shown = error["type"] != "missing" and not isinstance(given, Mapping)
        value = f" (given {_shown(given)})" if shown else ""
        lines.append(f"{where}: {field + ': ' if field else ''}{_one_line(error['msg'])}{value}")
    return lines


def _read_document(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read it ({(exc.strerror or str(exc)).lower()})") from None
    except UnicodeDecodeError:
        raise CliError(f"{path}: not a text file (not UTF-8)") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliError(
                f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CliError(f"{path}: not valid YAML or JSON: {_yaml_problem(exc)}") from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        return f"{exc.problem or exc.context or 'cannot parse'}{where}"
    return _shorten(_one_line(exc), MAX_TEXT_CHARS)


def _load_models(file: str, model: type[Model], id_field: str) -> list[Model]:
    """Every item of a YAML/JSON file (one mapping, or a list of them) as `model`; all items
    are checked before any is returned, and every problem is reported."""
    path = Path(file)
    loaded = _read_document(path)
    kind = model.__name__
    if loaded is None:
        raise CliError(f"{path}: the file is empty; expected a {kind} or a list of them")
    items = loaded if isinstance(loaded, list) else [loaded]
    if not items:
        raise CliError(f"{path}: the list is empty; expected at least one {kind}")
    valid: list[Model] = []
    problems: list[str] = []
    for number, item in enumerate(items, 1):
        try:
            valid.append(model.model_validate(item))
        except ValidationError as exc:
            named = item.get(id_field) if isinstance(item, Mapping) else None
            label = f" ({id_field} {_shown(named)})" if named is not None else ""
            problems.extend(_validation_lines(f"{path}: item {number}{label}", exc))
    if problems:
        raise CliError("\n".join(_capped(problems, indent="  ")))
    return valid


def _remote_error_lines(errors: list[FieldError]) -> list[str]:
    """The field errors of an Agora 422 answer, one indented `field: message` line each."""
    lines = []
    for error in errors:
        field = _dotted(error.loc[1:] if error.loc[:1] == ["body"] else error.loc)
        lines.append(f"  {field + ': ' if field else ''}{_one_line(error.msg or error.type or 'invalid')}")
    return _capped(lines, indent="  ")


def _describe_refusal(response: httpx.Response, target: str) -> str:
    """A readable account of an error answer from `target` (an Agora service, or the Dapr
    sidecar in front of it): never the raw body."""
    status = f"{response.status_code} {response.reason_phrase}".strip()
    text = response.text.strip()
    if not text:
        return f"{target} answered {status} with an empty body"
    try:
        body = json.loads(text)
    except ValueError:
        return f"{target} answered {status}: {_shorten(_one_line(text), MAX_TEXT_CHARS)}"
    if not isinstance(body, dict):
        return f"{target} answered {status} (the error body gives no code or message)"
    try:  # Agora's ErrorBody: {"error": CODE, "message": ..., "details": {...}}
        answered: ErrorBody | None = ErrorBody.model_validate(body)
    except ValidationError:
        answered = None
    if answered is not None:
        head = f"{target} refused the request ({response.status_code} {answered.error})"
        refusal = error_from(answered.error, answered.message, answered.details)
        fields = _remote_error_lines(refusal.field_errors)
        if fields:  # the message only sums up the same field errors on one line
            return "\n".join([f"{head}:", *fields])
        message = _one_line(answered.message)
        return f"{head}: {message}" if message else head
    if isinstance(body.get("errorCode"), str):  # the Dapr sidecar: {"errorCode": ..., "message": ...}
        message = _one_line(body.get("message"))
        head = (
            f"the Dapr sidecar refused the request to {target} ({response.status_code} {body['errorCode']})"
        )
        return f"{head}: {message}" if message else head
    detail = body.get("detail")  # a plain FastAPI answer
    if isinstance(detail, str):
        return f"{target} refused the request ({status}): {_one_line(detail)}"
    return f"{target} answered {status} (the error body gives no code or message)"


def _print_error(message: str) -> None:
    for line in message.splitlines():
        print(line if line.startswith(" ") else f"error: {line}", file=sys.stderr)


# -- talking to the running system ------------------------------------------------------------


def _send(
    sidecar: _Sidecar,
    method: str,
    url: str,
    target: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    where = sidecar.where
    try:
        response = httpx.request(
            method, url, json=body, timeout=REQUEST_TIMEOUT_S, headers={**_token_header(), **(headers or {})}
        )
    except httpx.ConnectError as exc:
        reason = re.sub(r"^\[Errno -?\d+\]\s*", "", str(exc)).lower() or "cannot connect"
        raise CliError(
            f"no Dapr sidecar answers at {where} ({reason}): start Agora with `make run`, "
            "or pass --dapr-http-port"
        ) from None
    except httpx.TimeoutException:
        raise CliError(
            f"{target} did not answer within {REQUEST_TIMEOUT_S:.0f} s (through the sidecar at {where})"
        ) from None
    except httpx.HTTPError as exc:
        failure = _shorten(_one_line(exc) or type(exc).__name__, MAX_TEXT_CHARS)
        raise CliError(f"talking to {target} through the sidecar at {where} failed: {failure}") from None
    if response.status_code >= 400:
        raise CliError(_describe_refusal(response, target))
    return response


def _invoke(
    args: argparse.Namespace,
    method: str,
    path: str,
    body: Any = None,
    service: str = "registry",
    headers: dict[str, str] | None = None,
) -> Any:
    sidecar = _sidecar(args)
    app_id = app_id_hosting(service, sidecar.app_ids)
    url = f"{sidecar.url}/v1.0/invoke/{app_id}/method/{path}"
    response = _send(sidecar, method, url, service, body, headers)
    try:
        return response.json()
    except ValueError:
        raise CliError(
            f"{service} answered {response.status_code} with a body that is not JSON; "
            f"is {sidecar.where} an Agora sidecar?"
        ) from None


def _print_agents(agents: list[dict[str, Any]]) -> None:
    if not agents:
        print("(no agents)")
    for agent in agents:
        print(
            f"{agent['agent_id']:<24} {agent['model_tier']:<9} ${agent['cost_per_step_usd']:<8.4f} "
            f"{', '.join(agent['skill_tags'])}"
        )


# -- commands ----------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    RUN_ROOT.mkdir(exist_ok=True)
    run_dir = RUN_ROOT / time.strftime("%Y%m%d-%H%M%S")
    here, user_wide = _run_links()
    try:
        with LocalCluster(
            args.profile,
            run_dir=run_dir.resolve(),
            jaeger=not args.no_jaeger,
            jaeger_ports=JAEGER_DEFAULT_PORTS,
        ) as cluster:
            _point_link(here, Path(run_dir.name))
            _point_link(user_wide, run_dir.resolve())
            return _serve_locally(cluster, args, run_dir)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # one Ctrl-C is enough; clean up undisturbed
        print("\nstopped.")
        return 0
    except MissingTool as exc:
        raise CliError(str(exc)) from None
    except ProcessFailed as exc:
        first, *log_tail = str(exc).splitlines()
        raise CliError("\n".join([first, *(f"  {line}" for line in log_tail)])) from None
    finally:
        for link in (here, user_wide):
            _unlink_if_pointing_at(link, run_dir)


def _serve_locally(cluster: LocalCluster, args: argparse.Namespace, run_dir: Path) -> int:
    for spec in SERVICES_BY_PROFILE[args.profile]:
        cluster.add_service(spec)
    print(f"Agora is up (profile {args.profile}); logs in {run_dir}/logs")
    for replica in cluster.replicas:
        ep = replica.endpoints
        app = f"app :{ep.app_port}" if replica.spec.module else "(no app)"
        print(f"  {replica.name:<14} {app:<11}  daprd http :{ep.dapr_http_port}")
    if cluster.with_jaeger:
        traced = dict.fromkeys(r.spec.app_id for r in cluster.replicas if r.spec.module is not None)
        print(f"  traces: {cluster.jaeger_query_url} (Jaeger query API; services: {', '.join(traced)})")
    app_ids = {r.spec.app_id for r in cluster.replicas}

    def app_id_for(service: str) -> str:
        return app_id_hosting(service, app_ids)

    # People's tools, the demo among them, speak through the console's sidecar where there is
    # one (topic scopes and access policies name it); otherwise through the only app's.
    tools = next((r for r in cluster.replicas if r.spec.app_id == "console"), cluster.replicas[0])
    watching = not args.no_demo
    if watching:
        try:
            run_demo(tools.dapr_http, app_id_for)
        except (httpx.HTTPError, TimeoutError, KeyError, ValueError) as exc:
            watching = False
            print(
                f"the demo stopped: {_shorten(_one_line(exc), MAX_TEXT_CHARS)}; see the logs", file=sys.stderr
            )
    invoke = invoker(tools.dapr_http, app_id_for)
    print("Running. Ctrl-C stops everything.", flush=True)
    with httpx.Client(timeout=10) as http:
        while all(p.running() for p in cluster.processes()):
            time.sleep(0.5)
            if watching and (continued := session_continuation(http, invoke)):
                print(continued, flush=True)
                watching = False
    print("a process exited unexpectedly; stopping", file=sys.stderr)
    return 1


def cmd_register(args: argparse.Namespace) -> int:
    profiles = _load_models(args.file, CapabilityProfile, "agent_id")  # every item checked first
    path = f"v1/agents?lease_seconds={args.lease_seconds}"
    for profile in profiles:
        saved = _invoke(args, "POST", path, profile.model_dump(mode="json"))
        print(f"registered {saved['agent_id']} until {saved['lease_expires_at']} (register again to renew)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    _print_agents(_invoke(args, "GET", "v1/agents")["agents"])
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    query = {"required_skills": args.required, "preferred_skills": args.preferred or []}
    if args.limit:
        query["limit"] = args.limit
    _print_agents(_invoke(args, "POST", "v1/agents/filter", query)["agents"])
    return 0


def cmd_deregister(args: argparse.Namespace) -> int:
    answer = _invoke(args, "DELETE", f"v1/agents/{args.agent_id}")
    print(
        f"deregistered {args.agent_id}"
        if answer.get("deregistered")
        else f"{args.agent_id} was not registered"
    )
    return 0


def cmd_task_publish(args: argparse.Namespace) -> int:
    # Every item is checked first: a typo is reported here, not dead-lettered later.
    specs = _load_models(args.file, TaskSpec, "task_id")
    sidecar = _sidecar(args)
    url = f"{sidecar.url}/v1.0/publish/agora-pubsub/{Topic.TASKS}"
    for spec in specs:
        _send(sidecar, "POST", url, f"topic {Topic.TASKS}", spec.model_dump(mode="json"))
        print(f"published {spec.task_id}")
    return 0


def cmd_task_show(args: argparse.Namespace) -> int:
    record = _invoke(args, "GET", f"v1/tasks/{args.task_id}", service="taskboard")
    if args.json:
        print(json.dumps(record, indent=2))
        return 0
    allocation, outcome = record.get("allocation") or {}, record.get("outcome")
    print(f"{record['spec']['task_id']}: {record['status']}  ({record['spec']['description']})")
    print("  history: " + " → ".join(h["status"] for h in record["history"]))
    for score in allocation.get("all_scores", []):
        won = "★" if score["agent_id"] == allocation.get("winning_agent_id") else " "
        print(
            f"  {won} {score['agent_id']:<14} final={score['final_score']:+.3f} "
            f"calibrated={score['calibrated_success_prob']:.2f} reputation={score['reputation_score']:.2f} "
            f"cost={score['cost_score']:.2f} ucb={score['ucb_bonus']:.2f}"
        )
    if allocation.get("reject_reason"):
        print(f"  rejected: {allocation['reject_reason']}")
    if outcome:
        print(
            f"  outcome: {'success' if outcome['actual_success'] else 'failure'} by {outcome['agent_id']}, "
            f"{outcome['actual_steps']} steps, ${outcome['actual_cost_usd']:.4f}"
        )
    return 0


def cmd_task_list(args: argparse.Namespace) -> int:
    for task_id in _invoke(args, "GET", f"v1/tasks?status={args.status}", service="taskboard")["task_ids"]:
        print(task_id)
    return 0


def cmd_plan_submit(args: argparse.Namespace) -> int:
    requests = _load_models(args.file, PlanRequest, "plan_id")
    for request in requests:
        body = request.model_dump(mode="json", exclude={"plan_id"})
        accepted = PlanAccepted.model_validate(
            _invoke(args, "PUT", f"v1/plans/{request.plan_id}", body, service="planner")
        )
        state = "submitted" if accepted.created else f"already exists ({accepted.state})"
        print(f"{request.plan_id}: {state}")
    return 0


def cmd_plan_show(args: argparse.Namespace) -> int:
    shown: list[str] = []
    while True:
        record = PlanRecord.model_validate(
            _invoke(args, "GET", f"v1/plans/{args.plan_id}", service="planner")
        )
        if args.json:
            print(record.model_dump_json(indent=2))
            return 0
        lines = plan_lines(record)
        if lines != shown:
            print("\n".join(lines), flush=True)
            shown = lines
        if not args.watch or record.state in FINAL_STATES:
            return 0
        time.sleep(1.0)


def _page_query(path: str, limit: int, offset: int, **narrowed: str | None) -> str:
    """A listing's path with its query: the filters given (a filter left out lists everything)."""
    given = {name: value for name, value in narrowed.items() if value is not None}
    return f"{path}?{urlencode({**given, 'limit': limit, 'offset': offset})}"


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def listing_summary(
    noun: str, narrowed_to: str | None, shown: int, total: int, offset: int, limit: int
) -> str:
    """The line under a listing: that it is empty, or how many there are in all and which of
    them the page holds (a page may show fewer rows than it covers: a listed item whose record
    is gone, or whose state changed meanwhile, is left out)."""
    where = f" in {narrowed_to}" if narrowed_to else ""
    if total == 0:
        return f"no {noun}s{where}"
    if shown == 0 and offset >= total:
        return f"(no {noun}s{where} from offset {offset}; {total} in all)"
    last = min(offset + limit, total)
    if offset == 0 and last == total:
        return f"({_counted(total, noun)}{where})"
    more = f"; --offset {last} for more" if last < total else ""
    return f"({offset + 1}-{last} of {total} {noun}s{where}{more})"


def _created(moment: datetime) -> str:
    """When a record was created, for a listing's column (UTC, to the minute)."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%d %H:%M")


def plan_list_lines(listing: PlanList, offset: int, limit: int) -> list[str]:
    lines = []
    for record in listing.plans:
        version = f"v{record.plan.version}" if record.plan else "--"
        lines.append(
            f"{record.plan_id:<32} {record.state:<17} {version:<4} {_created(record.created_at)}  "
            f"{_shorten(record.request.task, 50)}"
        )
    state = str(listing.state) if listing.state is not None else None
    return [*lines, listing_summary("plan", state, len(listing.plans), listing.total, offset, limit)]


def cmd_plan_list(args: argparse.Namespace) -> int:
    query = _page_query("v1/plans", args.limit, args.offset, state=args.state)
    listing = PlanList.model_validate(_invoke(args, "GET", query, service="planner"))
    print("\n".join(plan_list_lines(listing, args.offset, args.limit)))
    return 0


DEFAULT_DEBATERS = [
    DebaterConfig(debater_id="d0", role_hint="You answer carefully."),
    DebaterConfig(debater_id="d1", role_hint="You are a skeptical devil's advocate."),
    DebaterConfig(debater_id="d2", role_hint="You look for what the others missed."),
]


def cmd_debate_ask(args: argparse.Namespace) -> int:
    debaters = _load_models(args.debaters, DebaterConfig, "debater_id") if args.debaters else DEFAULT_DEBATERS
    try:
        submission = DebateSubmission(
            question=args.question,
            config=DebateConfig(
                debaters=debaters,
                max_rounds=args.max_rounds,
                aggregation=AggregationStrategy(args.aggregation),
                adaptive_routing=not args.no_routing,
            ),
        )
    except ValidationError as exc:
        raise CliError("\n".join(_capped(_validation_lines("the debate", exc), indent="  "))) from None
    debate_id = args.id or f"debate-{uuid.uuid4().hex[:8]}"
    body = submission.model_dump(mode="json")
    accepted = DebateAccepted.model_validate(
        _invoke(args, "PUT", f"v1/debates/{debate_id}", body, service="debate")
    )
    print(f"{debate_id}: {'started' if accepted.created else f'already exists ({accepted.state})'}")
    if args.wait:
        args.debate_id, args.watch, args.json = debate_id, True, False
        return cmd_debate_show(args)
    return 0


def cmd_debate_show(args: argparse.Namespace) -> int:
    shown: list[str] = []
    while True:
        record = DebateRecord.model_validate(
            _invoke(args, "GET", f"v1/debates/{args.debate_id}", service="debate")
        )
        if args.json:
            print(record.model_dump_json(indent=2))
            return 0
        lines = debate_lines(record)
        if lines != shown:
            print("\n".join(lines), flush=True)
            shown = lines
        if (
            not args.watch
            or record.state in FINAL_DEBATE_STATES
            or record.state is DebateState.WAITING_FOR_HUMAN
        ):
            return 0
        time.sleep(0.5)


def debate_list_lines(listing: DebateList, offset: int, limit: int) -> list[str]:
    lines = []
    for record in listing.debates:
        answer = _shorten(record.final_answer or "", 30)
        lines.append(
            f"{record.debate_id:<32} {record.state:<17} {_created(record.created_at)}  {answer:<30} "
            f"{_shorten(record.question, 40)}"
        )
    state = str(listing.state) if listing.state is not None else None
    return [*lines, listing_summary("debate", state, len(listing.debates), listing.total, offset, limit)]


def cmd_debate_list(args: argparse.Namespace) -> int:
    query = _page_query("v1/debates", args.limit, args.offset, state=args.state)
    listing = DebateList.model_validate(_invoke(args, "GET", query, service="debate"))
    print("\n".join(debate_list_lines(listing, args.offset, args.limit)))
    return 0


def escalation_list_lines(listing: EscalationList, offset: int, limit: int) -> list[str]:
    rows = [escalation_row(record) for record in listing.escalations]
    status = str(listing.status) if listing.status is not None else None
    return [*rows, listing_summary("escalation", status, len(rows), listing.total, offset, limit)]


def cmd_escalations_list(args: argparse.Namespace) -> int:
    query = _page_query("v1/escalations", args.limit, args.offset, status=args.status)
    listing = EscalationList.model_validate(_invoke(args, "GET", query, service="escalation"))
    if args.json:
        print(listing.model_dump_json(indent=2))
        return 0
    print("\n".join(escalation_list_lines(listing, args.offset, args.limit)))
    return 0


def cmd_escalations_show(args: argparse.Namespace) -> int:
    record = EscalationRecord.model_validate(
        _invoke(args, "GET", f"v1/escalations/{args.escalation_id}", service="escalation")
    )
    print(record.model_dump_json(indent=2) if args.json else "\n".join(escalation_lines(record)))
    return 0


def cmd_escalations_resume(args: argparse.Namespace) -> int:
    decision: dict[str, Any] = {"kind": "escalation", "action": args.action}
    if args.prompt:
        decision["modified_prompt"] = args.prompt
    if args.guidance:
        decision["guidance"] = args.guidance
    token = os.environ.get("AGORA_API_TOKEN")
    record = EscalationRecord.model_validate(
        _invoke(
            args,
            "POST",
            f"v1/escalations/{args.escalation_id}/resume",
            {"decision": decision, "who": args.who, "why": args.why},
            service="escalation",
            headers={"x-agora-token": token} if token else None,
        )
    )
    action = record.decision.action if record.decision is not None else "-"
    print(f"{record.escalation_id}: {record.status} with {action} by {record.decided_by}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agora", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--dapr-http-port", type=int, help="sidecar to talk through (default: the running `agora run`)"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="start the whole system locally (Ctrl-C stops it)")
    run.add_argument("--profile", choices=["default", "redis"], default="default")
    run.add_argument("--no-jaeger", action="store_true", help="do not start Jaeger")
    run.add_argument("--no-demo", action="store_true", help="skip the demo")
    run.set_defaults(func=cmd_run)

    registry = commands.add_parser("registry", help="capability registry").add_subparsers(
        dest="action", required=True
    )
    register = registry.add_parser(
        "register", help="register CapabilityProfiles from a YAML/JSON file (one or a list); validated first"
    )
    register.add_argument("file")
    register.add_argument(
        "--lease-seconds",
        type=int,
        default=DEFAULT_LEASE_SECONDS,
        help=f"how long the registrations last unless registered again "
        f"({MIN_LEASE_SECONDS}-{MAX_LEASE_SECONDS}; default {DEFAULT_LEASE_SECONDS})",
    )
    register.set_defaults(func=cmd_register)
    registry.add_parser("list", help="list registered agents").set_defaults(func=cmd_list)
    filter_ = registry.add_parser("filter", help="capable agents for required/preferred skills")
    filter_.add_argument("--required", nargs="+", required=True)
    filter_.add_argument("--preferred", nargs="*")
    filter_.add_argument("--limit", type=int)
    filter_.set_defaults(func=cmd_filter)
    deregister = registry.add_parser("deregister", help="remove an agent")
    deregister.add_argument("agent_id")
    deregister.set_defaults(func=cmd_deregister)

    task = commands.add_parser("task", help="tasks on the market").add_subparsers(
        dest="action", required=True
    )
    publish = task.add_parser(
        "publish", help="publish TaskSpecs from a YAML/JSON file (one or a list); validated first"
    )
    publish.add_argument("file")
    publish.set_defaults(func=cmd_task_publish)
    show = task.add_parser("show", help="a task's status, bids, scores and outcome")
    show.add_argument("task_id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_task_show)
    listing = task.add_parser("list", help="task ids in a status")
    listing.add_argument("--status", default="ALLOCATED", choices=[s.value for s in AllocationStatus])
    listing.set_defaults(func=cmd_task_list)

    escalations = commands.add_parser("escalations", help="escalations waiting for a person").add_subparsers(
        dest="action", required=True
    )
    waiting = escalations.add_parser("list", help="escalations, newest first (--status: only those in it)")
    waiting.add_argument(
        "--status", choices=[s.value for s in EscalationStatus], help="default: every status"
    )
    waiting.add_argument("--limit", type=int, default=50)
    waiting.add_argument("--offset", type=int, default=0)
    waiting.add_argument("--json", action="store_true", help="the page as JSON, for scripts")
    waiting.set_defaults(func=cmd_escalations_list)
    show_escalation = escalations.add_parser("show", help="one escalation with its context and suggestions")
    show_escalation.add_argument("escalation_id")
    show_escalation.add_argument("--json", action="store_true", help="the record as JSON, for scripts")
    show_escalation.set_defaults(func=cmd_escalations_show)
    resume = escalations.add_parser(
        "resume", help="decide a waiting escalation (AGORA_API_TOKEN if required)"
    )
    resume.add_argument("escalation_id")
    resume.add_argument("--action", required=True, choices=["retry", "skip", "abort", "modify_prompt"])
    resume.add_argument("--prompt", help="the new prompt (required with modify_prompt)")
    resume.add_argument("--guidance")
    resume.add_argument("--who", default=os.environ.get("USER", "operator"))
    resume.add_argument("--why", default="")
    resume.set_defaults(func=cmd_escalations_resume)

    plan = commands.add_parser("plan", help="long tasks planned as subgoal DAGs").add_subparsers(
        dest="action", required=True
    )
    submit = plan.add_parser(
        "submit", help="submit plan requests from a YAML/JSON file (one or a list); validated first"
    )
    submit.add_argument("file")
    submit.set_defaults(func=cmd_plan_submit)
    show_plan = plan.add_parser("show", help="a plan's waves and subgoals as a tree")
    show_plan.add_argument("plan_id")
    show_plan.add_argument("--watch", action="store_true", help="print again on each change until it ends")
    show_plan.add_argument("--json", action="store_true")
    show_plan.set_defaults(func=cmd_plan_show)
    plans = plan.add_parser("list", help="plans, newest first (--state: only those in it)")
    plans.add_argument("--state", choices=[s.value for s in PlanState], help="default: every state")
    plans.add_argument("--limit", type=int, default=50)
    plans.add_argument("--offset", type=int, default=0)
    plans.set_defaults(func=cmd_plan_list)

    debate = commands.add_parser("debate", help="multi-agent debates").add_subparsers(
        dest="action", required=True
    )
    ask = debate.add_parser("ask", help="start a debate on a question (three offline debaters by default)")
    ask.add_argument("question")
    ask.add_argument("--debaters", help="a YAML/JSON file of DebaterConfigs (at least two)")
    ask.add_argument("--id", help="the debate id (default: a new one)")
    ask.add_argument("--max-rounds", type=int, default=3)
    ask.add_argument("--aggregation", default="WEIGHTED_VOTE", choices=["MAJORITY_VOTE", "WEIGHTED_VOTE"])
    ask.add_argument(
        "--no-routing", action="store_true", help="debate even when the first model is confident"
    )
    ask.add_argument("--wait", action="store_true", help="print it round by round until it ends or waits")
    ask.set_defaults(func=cmd_debate_ask)
    show_debate = debate.add_parser("show", help="a debate round by round")
    show_debate.add_argument("debate_id")
    show_debate.add_argument("--watch", action="store_true", help="print again on each change until it ends")
    show_debate.add_argument("--json", action="store_true")
    show_debate.set_defaults(func=cmd_debate_show)
    debates = debate.add_parser("list", help="debates, newest first (--state: only those in it)")
    debates.add_argument("--state", choices=[s.value for s in DebateState], help="default: every state")
    debates.add_argument("--limit", type=int, default=50)
    debates.add_argument("--offset", type=int, default=0)
    debates.set_defaults(func=cmd_debate_list)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CliError as exc:
        _print_error(str(exc))
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
