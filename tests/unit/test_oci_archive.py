"""The OCI archives the node test imports into containerd (tests/integration/kubernetes/oci.py):
an OCI image layout in one tar, named for `ctr images import`, the same bytes for the same files."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from tests.integration.kubernetes.oci import ImageFile, layer_tar, write_image


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else b"") for m in tar.getmembers()}  # type: ignore[union-attr]


def _blob(members: dict[str, bytes], digest: str) -> bytes:
    return members[f"blobs/sha256/{digest.split(':', 1)[1]}"]


@pytest.mark.parametrize("compress", [True, False])
def test_the_archive_is_an_oci_layout_named_for_ctr(tmp_path: Path, compress: bool) -> None:
    program = tmp_path / "program"
    program.write_bytes(b"\x7fELF not really")
    written = write_image(
        tmp_path / "image.tar",
        "agora.local/testpod:1",
        [ImageFile(program, "/bin/program"), ImageFile(None, "/etc/passwd", 0o644, b"root:x:0:0::/:\n")],
        entrypoint=["/bin/program"],
        cmd=["serve"],
        user="65532:65532",
        compress=compress,
    )
    members = _members(written.archive)
    assert json.loads(members["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads(members["index.json"])
    [entry] = index["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "agora.local/testpod:1"
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "1"
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    manifest_bytes = _blob(members, entry["digest"])
    assert "sha256:" + hashlib.sha256(manifest_bytes).hexdigest() == written.manifest_digest
    manifest = json.loads(manifest_bytes)
    config = json.loads(_blob(members, manifest["config"]["digest"]))
    assert config["config"]["Entrypoint"] == ["/bin/program"]
    assert config["config"]["Cmd"] == ["serve"]
    assert config["config"]["User"] == "65532:65532"
    [layer] = manifest["layers"]
    blob = _blob(members, layer["digest"])
    assert layer["size"] == len(blob)
    plain = gzip.decompress(blob) if compress else blob
    assert layer["mediaType"].endswith("+gzip") == compress
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(plain).hexdigest()]
    with tarfile.open(fileobj=io.BytesIO(plain)) as tar:
        files = {m.name: m for m in tar.getmembers()}
        assert files["bin/program"].mode == 0o755
        assert tar.extractfile("etc/passwd").read() == b"root:x:0:0::/:\n"  # type: ignore[union-attr]
    assert {"dev/", "proc/", "sys/", "tmp/", "bin/", "etc/"} <= {n.rstrip("/") + "/" for n in files}
    assert all(m.uid == 0 and m.mtime == 0 for m in files.values())


def test_the_same_files_give_the_same_image(tmp_path: Path) -> None:
    program = tmp_path / "program"
    program.write_bytes(b"same")
    first = write_image(tmp_path / "a.tar", "x/y:1", [ImageFile(program, "/p")], ["/p"])
    program.touch()  # a newer modification time changes nothing
    second = write_image(tmp_path / "b.tar", "x/y:1", [ImageFile(program, "/p")], ["/p"])
    assert first.manifest_digest == second.manifest_digest
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_a_path_in_the_image_must_be_absolute_without_dot_dot(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="absolute"):
        layer_tar([ImageFile(None, "relative/file")])
    with pytest.raises(ValueError, match="absolute"):
        layer_tar([ImageFile(None, "/a/../../etc/passwd")])
