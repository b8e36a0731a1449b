"""Go programs of this repository that the tests run (the Go agent app, examples/go-agent),
built once per version of their sources into the binary cache outside the clone, like the
runtime binaries: `$AGORA_CACHE/<name>-<hash>/bin/<name>` (default ~/.cache/agora), where the
hash covers the program's go.mod, go.sum and non-test Go files. A build writes to a folder of
its own and is renamed into place only when complete, so an interrupted build is never taken
for a finished one, and every clone with the same sources reuses it.

    python -m agora.harness.gobuild     # build the Go agent (if needed) and print its path
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from agora.harness.toolchain import REPO_ROOT, MissingTool, cache_root

GO_AGENT_SOURCE = REPO_ROOT / "examples" / "go-agent"
GO_BUILD_ENV = {"GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}
"""As the Makefile builds the runtime binaries: the installed toolchain, the pinned modules."""
BUILD_TIMEOUT_SECONDS = 900


def source_files(source: Path) -> list[Path]:
    """What the binary is built from: go.mod, go.sum and the Go files, tests left out."""
    files = [source / "go.mod", source / "go.sum"]
    files += [p for p in source.rglob("*.go") if not p.name.endswith("_test.go")]
    return sorted(p for p in files if p.is_file())


def source_hash(source: Path) -> str:
    digest = hashlib.sha256()
    for path in source_files(source):
        digest.update(path.relative_to(source).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def go_executable() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").is_file() else None)
    if found is None:
        raise MissingTool("the Go toolchain (`go`) is not installed")
    return found


def go_binary(source: Path, name: str) -> Path:
    """The built program of `source` (a Go main module), built first when its sources changed."""
    home = cache_root() / f"{name}-{source_hash(source)}"
    binary = home / "bin" / name
    if binary.is_file():
        return binary
    partial = home.with_name(f"{home.name}.partial-{uuid.uuid4().hex[:8]}")
    try:
        output = str(partial / "bin" / name)
        done = subprocess.run(
            [go_executable(), "build", "-trimpath", "-ldflags", "-s -w", "-o", output, "."],
            cwd=source,
            env={**os.environ, **GO_BUILD_ENV},
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"building {source} failed:\n{done.stdout}{done.stderr}")
        try:
            partial.rename(home)
        except OSError:
            if not binary.is_file():  # not another build finishing first
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return binary


def go_agent() -> Path:
    """The Go agent app (examples/go-agent), built if needed."""
    return go_binary(GO_AGENT_SOURCE, "go-agent")


if __name__ == "__main__":
    print(go_agent())
    sys.exit(0)
