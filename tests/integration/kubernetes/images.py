"""Dapr's images, written as OCI archives from the binaries `make dapr` and `make kube` built, under
the names Dapr's chart and sidecar injector use (`ghcr.io/dapr/<binary>:<version>`), so that a node
that imported them never needs the registry (imagePullPolicy IfNotPresent finds them).

Each image is what Dapr publishes, minus the distroless base's other files: the binary at
/<binary> (the chart's `command`, the injector's `/daprd`), run by default as the distroless
`nonroot` user 65532 (numeric, so the kubelet can check `runAsNonRoot`), with /etc/passwd and
/etc/group naming it, /tmp, the nonroot user's home, and this machine's CA bundle.

Redis, which the chart expects beside it, is Debian's redis-server with its shared libraries.

    python -m tests.integration.kubernetes.images <folder> [binary...]

writes <folder>/<binary>.tar for each of Dapr's six binaries and `redis` (all by default).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from agora.harness.toolchain import cache_root, pinned_versions
from tests.integration.kubernetes.oci import ImageFile, Written, write_image

DAPR_REGISTRY = "ghcr.io/dapr"
REDIS_IMAGE = "agora.local/redis"
COREDNS_IMAGE = "registry.k8s.io/coredns/coredns"
JAEGER_IMAGE = "docker.io/jaegertracing/jaeger"
DAPR_BINARIES = ("daprd", "sentry", "operator", "injector", "placement", "scheduler")
NONROOT = 65532
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
PASSWD = (
    "root:x:0:0:root:/root:/sbin/nologin\n"
    f"nonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n"
)
GROUP = f"root:x:0:\nnonroot:x:{NONROOT}:\n"


def dapr_bin() -> Path:
    versions = pinned_versions()
    return cache_root() / f"dapr-{versions['DAPR_VERSION']}-{versions['DAPR_BUILD']}" / "bin"


def dapr_image_name(binary: str) -> str:
    return f"{DAPR_REGISTRY}/{binary}:{pinned_versions()['DAPR_VERSION']}"


def write_dapr_image(binary: str, folder: Path, bin_folder: Path | None = None) -> Written:
    if binary not in DAPR_BINARIES:
        raise ValueError(f"{binary}: not one of Dapr's binaries {DAPR_BINARIES}")
    source = (bin_folder or dapr_bin()) / binary
    files = [
        ImageFile(source, f"/{binary}"),
        ImageFile(None, "/etc/passwd", 0o644, PASSWD.encode()),
        ImageFile(None, "/etc/group", 0o644, GROUP.encode()),
        ImageFile(None, "/home/nonroot/.keep", 0o644),
    ]
    if CA_BUNDLE.is_file():
        files.append(ImageFile(CA_BUNDLE, str(CA_BUNDLE), 0o644))
    return write_image(
        folder / f"{binary}.tar",
        dapr_image_name(binary),
        files,
        entrypoint=[f"/{binary}"],
        env={"HOME": "/home/nonroot"},
        user=f"{NONROOT}:{NONROOT}",
        compress=False,
    )


def shared_libraries(binary: Path) -> list[Path]:
    """The shared libraries a dynamically linked program loads (ldd), the dynamic loader included,
    at the paths it looks for them."""
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=30, check=True)
    found: list[Path] = []
    for line in done.stdout.splitlines():
        match = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if match:
            found.append(Path(match.group(1)))
    return found


def user_files(user: str, uid: int, home: str) -> list[ImageFile]:
    """/etc/passwd and /etc/group naming root and `user` (uid = gid), and its home folder."""
    passwd = f"root:x:0:0:root:/root:/sbin/nologin\n{user}:x:{uid}:{uid}::{home}:/sbin/nologin\n"
    return [
        ImageFile(None, "/etc/passwd", 0o644, passwd.encode()),
        ImageFile(None, "/etc/group", 0o644, f"root:x:0:\n{user}:x:{uid}:\n".encode()),
        ImageFile(None, f"{home}/.keep", 0o644),
    ]


def redis_container(image: str, args: list[str], resources: dict[str, Any]) -> dict[str, Any]:
    """Redis's container as the node runs it: uid 999 from the image, a read-only root and
    no capabilities, its data on the volume `data`, Ready once it takes connections."""
    return {
        "name": "redis",
        "image": image,
        "imagePullPolicy": "Never",
        "args": args,
        "ports": [{"name": "redis", "containerPort": 6379}],
        "readinessProbe": {"tcpSocket": {"port": 6379}, "periodSeconds": 2},
        "resources": resources,
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "securityContext": {
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def write_redis_image(folder: Path, server: Path | None = None) -> Written:
    """Debian's redis-server (the one `make redis` installs) with its shared libraries, as
    agora.local/redis:<version>, run by default as uid 999 (the redis user of Redis's own images).
    Each file is a copy of what the symlinks point to, at the path the program asks for."""
    # redis-server is a link to redis-check-rdb in Debian: the program acts by the name it is run as.
    command = Path(server or shutil.which("redis-server") or "/usr/bin/redis-server")
    binary = Path(os.path.realpath(command))
    version = subprocess.run(
        [str(command), "--version"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    match = re.search(r"v=(\S+)", version)
    if not match:
        raise RuntimeError(f"redis-server --version: {version!r}")
    files = [ImageFile(binary, "/usr/bin/redis-server")]
    files += [ImageFile(Path(os.path.realpath(lib)), str(lib)) for lib in shared_libraries(binary)]
    files += user_files("redis", 999, "/data")
    return write_image(
        folder / "redis.tar",
        f"{REDIS_IMAGE}:{match.group(1)}",
        files,
        entrypoint=["/usr/bin/redis-server"],
        user="999:999",
        compress=False,
    )


def write_coredns_image(folder: Path, binary: Path, version: str) -> Written:
    """CoreDNS (deploy/coredns) under the name Kubernetes' DNS addon runs,
    registry.k8s.io/coredns/coredns:v<version>, as the distroless nonroot user like the published
    image. The published binary carries the file capability to bind port 53; here the pod sandbox
    allows unprivileged ports instead (containerd's enable_unprivileged_ports, node.py)."""
    files = [
        ImageFile(binary, "/coredns"),
        ImageFile(None, "/etc/passwd", 0o644, PASSWD.encode()),
        ImageFile(None, "/etc/group", 0o644, GROUP.encode()),
    ]
    if CA_BUNDLE.is_file():
        files.append(ImageFile(CA_BUNDLE, str(CA_BUNDLE), 0o644))
    return write_image(
        folder / "coredns.tar",
        f"{COREDNS_IMAGE}:v{version}",
        files,
        entrypoint=["/coredns"],
        user=f"{NONROOT}:{NONROOT}",
        compress=False,
    )


def write_jaeger_image(folder: Path, binary: Path, tag: str) -> Written:
    """Jaeger v2 (the binary `make jaeger` builds) under the name the chart's Jaeger runs,
    docker.io/jaegertracing/jaeger:<tag>, at the path of the published image, as its uid 10001.
    Started without a configuration it runs its built-in all-in-one (in-memory storage)."""
    files = [ImageFile(binary, "/cmd/jaeger/jaeger-linux"), *user_files("jaeger", 10001, "/tmp")]
    return write_image(
        folder / "jaeger.tar",
        f"{JAEGER_IMAGE}:{tag}",
        files,
        entrypoint=["/cmd/jaeger/jaeger-linux"],
        user="10001:10001",
        compress=False,
    )


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(argv[1])
    for binary in argv[2:] or [*DAPR_BINARIES, "redis"]:
        written = write_redis_image(folder) if binary == "redis" else write_dapr_image(binary, folder)
        print(f"{written.name}: {written.archive} ({written.manifest_digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
