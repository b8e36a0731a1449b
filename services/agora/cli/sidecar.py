"""Finding the running system: the Dapr sidecar the CLI talks through (an explicit port, the
run `agora run` recorded here or user-wide, DAPR_HTTP_ENDPOINT, DAPR_HTTP_PORT, in that order),
the app ids behind it, and the links through which `agora run` records where its run is."""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import httpx

from agora.cli.problems import CliError
from agora.cli.text import shown
from agora.harness.toolchain import cache_root

__all__ = [
    "PROBE_TIMEOUT_S",
    "RUN_ROOT",
    "Sidecar",
    "find_sidecar",
    "loopback",
    "named_sidecar",
    "point_link",
    "run_links",
    "sidecar_answers",
    "sidecar_for",
    "sidecar_of_run",
    "token_header",
    "unlink_if_pointing_at",
]

RUN_ROOT = Path(".run")
PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Sidecar:
    """The sidecar the CLI talks through, and the app ids running behind it (empty: unknown;
    each service is then addressed by its own name)."""

    url: str
    """The sidecar's HTTP API, e.g. `http://127.0.0.1:3500`."""
    app_ids: frozenset[str] = frozenset()

    @property
    def where(self) -> str:
        return self.url.split("://", 1)[-1]


def loopback(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def token_header() -> dict[str, str]:
    token = os.environ.get("DAPR_API_TOKEN")
    return {"dapr-api-token": token} if token else {}


def run_links() -> tuple[Path, Path]:
    """Where `agora run` points at its run folder: in this directory, and user-wide."""
    return RUN_ROOT / "current", cache_root() / "current"


def sidecar_answers(url: str) -> bool:
    try:
        httpx.get(f"{url}/v1.0/healthz", timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError:
        return False
    return True


def sidecar_of_run(link: Path) -> Sidecar | str | None:
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
    # name it), except beside the embedded app, whose in-memory pub/sub only its own sidecar
    # reaches; otherwise through any sidecar.
    speaking_as = "agora" if any(app_id == "agora" for app_id, _ in services) else "console"
    url = loopback(next((p for app_id, p in services if app_id == speaking_as), services[0][1]))
    if not sidecar_answers(url):
        return f"the last run at {run_dir} is not answering"
    return Sidecar(url, frozenset(app_id for app_id, _ in services))


def named_sidecar(url: str) -> Sidecar:
    """A sidecar given by address: its own app id (from its metadata) tells whether it fronts
    the embedded app that hosts every service."""
    try:
        answer = httpx.get(f"{url}/v1.0/metadata", timeout=PROBE_TIMEOUT_S, headers=token_header())
        own_id = str(answer.json()["id"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return Sidecar(url)
    return Sidecar(url, frozenset({own_id}))


def find_sidecar(dapr_http_port: int | None) -> Sidecar:
    if dapr_http_port is not None:
        return named_sidecar(loopback(dapr_http_port))
    unusable: str | None = None
    for link in run_links():
        found = sidecar_of_run(link)
        if isinstance(found, Sidecar):
            return found
        unusable = unusable or found
    endpoint = os.environ.get("DAPR_HTTP_ENDPOINT", "").rstrip("/")
    if endpoint:
        if not re.fullmatch(r"https?://[^\s/]+", endpoint):
            raise CliError(f"DAPR_HTTP_ENDPOINT={shown(endpoint)} is not an http(s)://host[:port] address")
        return named_sidecar(endpoint)
    if os.environ.get("DAPR_HTTP_PORT"):
        try:
            return named_sidecar(loopback(int(os.environ["DAPR_HTTP_PORT"])))
        except ValueError:
            raise CliError(f"DAPR_HTTP_PORT={os.environ['DAPR_HTTP_PORT']!r} is not a port number") from None
    why = f" ({unusable})" if unusable else ""
    raise CliError(f"no running Agora found{why}: start one with `make run`, or pass --dapr-http-port")


def sidecar_for(args: argparse.Namespace) -> Sidecar:
    """The sidecar of this command (found once, then kept on `args`)."""
    found = getattr(args, "sidecar", None)
    if not isinstance(found, Sidecar):
        found = args.sidecar = find_sidecar(args.dapr_http_port)
    return found


def point_link(link: Path, target: Path) -> None:
    """Make `link` a symlink to `target`, replacing whatever link was there in one step."""
    link.parent.mkdir(parents=True, exist_ok=True)
    fresh = link.with_name(f".{link.name}.{os.getpid()}")
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(target)
    os.replace(fresh, link)


def unlink_if_pointing_at(link: Path, run_dir: Path) -> None:
    """Remove `link` unless a later run has pointed it at its own folder since."""
    try:
        if link.is_symlink() and link.resolve() == run_dir.resolve():
            link.unlink()
    except OSError:
        pass
