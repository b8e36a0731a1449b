"""The node scenario's report: each check run in order, recorded with its evidence or its error,
and written to report.json after every check (a scenario killed midway leaves what it found)."""

from __future__ import annotations

import json
import secrets
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.kubernetes.control_plane import Obj


class CheckFailed(AssertionError):
    pass


def expect(condition: object, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


@dataclass
class Report:
    path: Path
    not_covered: list[str]
    deviations: list[str]
    started: float = field(default_factory=time.monotonic)
    checks: list[Obj] = field(default_factory=list)
    extra: Obj = field(default_factory=dict)
    on_failure: Callable[[str], None] | None = None
    """Called with a failed check's name before the next check runs: evidence that later checks
    would remove (the logs of pods an uninstall deletes) is kept here."""

    def write(self) -> None:
        body = {
            "passed": bool(self.checks) and all(c["status"] == "passed" for c in self.checks),
            "duration_seconds": round(time.monotonic() - self.started, 1),
            "checks": self.checks,
            "not_covered": self.not_covered,
            "deviations_from_a_real_cluster": self.deviations,
            **self.extra,
        }
        temporary = self.path.with_suffix(".json.new")
        temporary.write_text(json.dumps(body, indent=2, sort_keys=False, default=str) + "\n")
        temporary.replace(self.path)

    def run(self, name: str, check: Callable[[], Obj], *, needs: tuple[str, ...] = ()) -> bool:
        """Runs one check and records it: passed with its evidence, failed with the error (and
        the evidence gathered before it), or skipped when a check it needs did not pass."""
        failed_needs = [n for n in needs if not self.passed(n)]
        if failed_needs:
            self.checks.append({"name": name, "status": "skipped", "reason": f"needs {failed_needs}"})
            self.write()
            return False
        started = time.monotonic()
        entry: Obj = {"name": name}
        try:
            entry["evidence"] = check()
            entry["status"] = "passed"
        except CheckFailed as exc:
            entry["status"] = "failed"
            entry["error"] = str(exc)
        except Exception as exc:  # a crash is a failed check, with its traceback
            entry["status"] = "failed"
            entry["error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc(limit=8)
        entry["seconds"] = round(time.monotonic() - started, 1)
        if entry["status"] == "failed" and self.on_failure is not None:
            try:
                self.on_failure(name)
            except Exception as exc:  # the evidence is a help, never a second failure
                entry["evidence_not_kept"] = f"{type(exc).__name__}: {exc}"
        self.checks.append(entry)
        self.write()
        return bool(entry["status"] == "passed")

    def passed(self, name: str) -> bool:
        return any(c["name"] == name and c["status"] == "passed" for c in self.checks)


def chart_secrets() -> dict[str, dict[str, str]]:
    """The run's own random credentials, in the Secrets the chart names (existingSecret), by
    Secret and key."""
    return {
        "redis": {"redis-password": secrets.token_hex(24)},
        "agora-console-api-token": {"token": secrets.token_hex(32)},
        "agora-escalation-token": {"token": secrets.token_hex(32)},
    }
