#!/usr/bin/env bash
# The Agora image as an OCI archive, for a node that has no registry to pull from (containerd's
# `ctr -n k8s.io images import`), built once per committed source tree and kept in the tools
# cache:
#
#   deploy/image/oci-archive.sh          # builds it unless cached; prints the archive's path
#   deploy/image/oci-archive.sh --path   # prints where it is (or would be), builds nothing
#   deploy/image/oci-archive.sh --name   # prints the image's name in the archive
#
# The image is what deploy/image/build-from-debian.sh builds from HEAD (committed files only),
# named agora.local/agora:<key>, where <key> is a hash of the files that script puts into the
# image: pyproject.toml, services/ and examples/ (README.md goes in too, but only as the
# package's description, so a change to it alone does not call for a new image). buildah's storage lives in a temporary
# folder, removed afterwards, so nothing but the archive stays on the machine; an older archive
# of another tree is removed when a new one is written.
#
# Settings (environment): AGORA_CACHE (default ~/.cache/agora), and those of
# build-from-debian.sh.

set -euo pipefail

repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cache=${AGORA_CACHE:-$HOME/.cache/agora}
key=$(git -C "$repo" rev-parse HEAD:pyproject.toml HEAD:services HEAD:examples |
    sha256sum | cut -c1-16)
name=agora.local/agora:$key
folder=$cache/agora-image-$key
archive=$folder/agora.tar

case ${1:-} in
--path) echo "$archive"; exit 0 ;;
--name) echo "$name"; exit 0 ;;
"") ;;
*) echo "usage: $0 [--path|--name]" >&2; exit 2 ;;
esac

if [[ -f $archive ]]; then
    echo "$archive"
    exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/agora-image.XXXXXX")
cleanup() {
    CONTAINERS_STORAGE_CONF=$work/storage.conf buildah rm --all >/dev/null 2>&1 || true
    CONTAINERS_STORAGE_CONF=$work/storage.conf buildah rmi --all --force >/dev/null 2>&1 || true
    # Layers overlay-mounted by a build that was interrupted, then the storage itself.
    grep -o "$work/[^ ]*" /proc/self/mounts 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
    rm -rf "$work" "$folder.partial"
}
trap cleanup EXIT
cat >"$work/storage.conf" <<EOF
[storage]
driver = "${STORAGE_DRIVER:-overlay}"
graphroot = "$work/storage"
runroot = "$work/run"
EOF
export CONTAINERS_STORAGE_CONF=$work/storage.conf

AGORA_IMAGE=$name AGORA_REF=HEAD "$repo/deploy/image/build-from-debian.sh" >&2
mkdir -p "$folder.partial"
buildah push --quiet "$name" "oci-archive:$folder.partial/agora.tar:$name" >&2
find "$cache" -maxdepth 1 -name 'agora-image-*' -not -name "agora-image-$key*" -exec rm -rf {} +
mv "$folder.partial" "$folder"
echo "wrote $archive ($(du -m "$archive" | cut -f1) MB)" >&2
echo "$archive"
