"""OCI image archives written from files on disk, for a node that has no registry to pull from.

An archive is an OCI image layout in one tar (oci-layout, index.json, blobs/sha256/...) holding
one single-layer image for linux/amd64; `ctr -n k8s.io images import <archive>` loads it into
containerd's CRI namespace under the name given here (the `io.containerd.image.name` annotation of
the index). The layer is built deterministically (owner root, modification time 0, sorted), so the
same files always give the same image digest.

    python -m tests.integration.kubernetes.oci <archive> <name> <entrypoint> <source>=<path in image>...

writes one from the command line (e.g. a static binary at /app).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

LAYOUT_VERSION = "1.0.0"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
# Large binaries are stored uncompressed: the archive is read once, from the same disk.
MEDIA_LAYER_UNCOMPRESSED = "application/vnd.oci.image.layer.v1.tar"
# The folders a container runtime mounts onto or a process expects; the image has nothing else.
ROOT_FOLDERS = ("dev", "etc", "proc", "sys", "tmp")


@dataclass(frozen=True)
class ImageFile:
    """A file of the image: a copy of `source`, or `data` when there is no source."""

    source: Path | None
    target: str  # absolute path inside the image
    mode: int = 0o755
    data: bytes = b""

    def content(self) -> bytes:
        return self.source.read_bytes() if self.source is not None else self.data


@dataclass(frozen=True)
class Written:
    archive: Path
    name: str
    manifest_digest: str
    config_digest: str
    layer_diff_id: str

    def describe(self) -> dict[str, str]:
        return {
            "archive": str(self.archive),
            "name": self.name,
            "manifest": self.manifest_digest,
            "config": self.config_digest,
            "layer_diff_id": self.layer_diff_id,
        }


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _tar_entry(tar: tarfile.TarFile, name: str, kind: bytes, mode: int, data: bytes = b"") -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = 0
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data) if data else None)


def layer_tar(files: list[ImageFile]) -> bytes:
    """The uncompressed layer: ROOT_FOLDERS, every file's parent folders, then the files."""
    folders = set(ROOT_FOLDERS)
    for file in files:
        target = PurePosixPath(file.target)
        if not target.is_absolute() or ".." in target.parts:
            raise ValueError(f"{file.target}: the path in the image must be absolute, without '..'")
        folders.update(str(parent).lstrip("/") for parent in target.parents if str(parent) != "/")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder in sorted(folders):
            _tar_entry(tar, folder + "/", tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755)
        for file in sorted(files, key=lambda f: f.target):
            _tar_entry(tar, file.target.lstrip("/"), tarfile.REGTYPE, file.mode, file.content())
    return buffer.getvalue()


def write_image(
    archive: Path,
    name: str,
    files: list[ImageFile],
    entrypoint: list[str],
    cmd: list[str] | None = None,
    env: dict[str, str] | None = None,
    user: str = "",
    compress: bool = True,
) -> Written:
    """Writes `archive`: one image called `name` (e.g. "agora.local/testpod:1")."""
    layer = layer_tar(files)
    diff_id = _digest(layer)
    compressed = gzip.compress(layer, compresslevel=6, mtime=0) if compress else layer
    layer_type = MEDIA_LAYER if compress else MEDIA_LAYER_UNCOMPRESSED
    environment = {"PATH": "/usr/local/bin:/usr/bin:/bin", **(env or {})}
    config: dict[str, Any] = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": entrypoint,
            "Cmd": cmd or [],
            "Env": [f"{key}={value}" for key, value in environment.items()],
            "WorkingDir": "/",
            **({"User": user} if user else {}),
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "tests/integration/kubernetes/oci.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    manifest: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {"mediaType": MEDIA_CONFIG, "digest": _digest(config_bytes), "size": len(config_bytes)},
        "layers": [{"mediaType": layer_type, "digest": _digest(compressed), "size": len(compressed)}],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [
            {
                "mediaType": MEDIA_MANIFEST,
                "digest": _digest(manifest_bytes),
                "size": len(manifest_bytes),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": tag,
                },
            }
        ],
    }
    entries = {
        "oci-layout": json.dumps({"imageLayoutVersion": LAYOUT_VERSION}).encode(),
        "index.json": json.dumps(index, sort_keys=True).encode(),
        **{
            f"blobs/sha256/{_digest(blob).split(':', 1)[1]}": blob
            for blob in (config_bytes, manifest_bytes, compressed)
        },
    }
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder in ("blobs/", "blobs/sha256/"):
            _tar_entry(tar, folder, tarfile.DIRTYPE, 0o755)
        for entry, data in entries.items():
            _tar_entry(tar, entry, tarfile.REGTYPE, 0o644, data)
    return Written(archive, name, _digest(manifest_bytes), _digest(config_bytes), diff_id)


def main(argv: list[str]) -> int:
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    archive, name, entrypoint = Path(argv[1]), argv[2], argv[3]
    files = []
    for spec in argv[4:]:
        source, _, target = spec.partition("=")
        if not target:
            print(f"{spec}: expected <source>=<path in image>", file=sys.stderr)
            return 2
        files.append(ImageFile(Path(source), target))
    written = write_image(archive, name, files, [entrypoint])
    print(json.dumps(written.describe(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
