"""The services import where only the project's own dependencies are installed (the container
image), not only in the development environment, which has the dapr-agents extra and with it
OpenTelemetry's instrumentation packages."""

from __future__ import annotations

import subprocess
import sys

HIDE_INSTRUMENTATION = """
import importlib.abc
import sys


class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry.instrumentation" or name.startswith("opentelemetry.instrumentation."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Hide())
import agora.cli
import agora.runtime
import agora.taskboard.app
print("imported")
"""


def test_the_services_import_without_opentelemetry_instrumentation_installed() -> None:
    done = subprocess.run(
        [sys.executable, "-c", HIDE_INSTRUMENTATION], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "imported"
