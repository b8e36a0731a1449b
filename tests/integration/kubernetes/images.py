"""Dapr's images, written as OCI archives from the binaries `make dapr` and `make kube` built, under
the names Dapr's chart and sidecar injector use (`ghcr.io/dapr/<binary>:<version>`), so that a node
that imported them never needs the registry (imagePullPolicy IfNotPresent finds them).

Each image is what Dapr publishes, minus the distroless base's other files: the binary at
/<binary> (the chart's `command`, the injector's `/daprd`), run by default as the distroless
`nonroot` user 65532 (numeric, so the kubelet can check `runAsNonRoot`), with /etc/passwd and
/etc/group naming it, /tmp, the nonroot user's home, and this machine's CA bundle.

    python -m tests.integration.kubernetes.images <folder> [binary...]

writes <folder>/<binary>.tar for each (all six by default).
"""

from __future__ import annotations

import sys
from pathlib import Path

from agora.harness.toolchain import cache_root, pinned_versions
from tests.integration.kubernetes.oci import ImageFile, Written, write_image

DAPR_REGISTRY = "ghcr.io/dapr"
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


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(argv[1])
    for binary in argv[2:] or DAPR_BINARIES:
        written = write_dapr_image(binary, folder)
        print(f"{written.name}: {written.archive} ({written.manifest_digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
