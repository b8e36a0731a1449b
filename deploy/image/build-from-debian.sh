#!/usr/bin/env bash
# Build the Agora container image without any registry base image.
#
# The Dockerfile at the repository's root starts FROM python:3.11-slim-bookworm, and that
# image comes from a container registry. A machine that reaches Debian's mirrors and PyPI but
# no container registry can't pull it. This script builds an image that works the same way
# from nothing but those two places:
#
#   * debootstrap puts a minimal Debian bookworm root filesystem into an empty ("scratch")
#     buildah container;
#   * apt installs Debian's python3 (3.11, the only line the project supports) and
#     python3-venv into it;
#   * pip installs the project, from the committed tree (`git archive`), into the virtualenv
#     /opt/agora/venv, the same place the Dockerfile puts it;
#   * the build leftovers are removed, the user 10001 is added, and the image gets the
#     Dockerfile's entrypoint, user, environment and working directory.
#
# Usage (as root; debootstrap needs it):
#
#   deploy/image/build-from-debian.sh                 # builds agora:<version from pyproject.toml>
#   AGORA_IMAGE=agora:test deploy/image/build-from-debian.sh
#
# Then, with no container engine daemon:
#
#   ctr=$(buildah from agora:0.1.0)
#   buildah run --isolation chroot --user 10001:10001 "$ctr" -- python -m agora.cli --help
#   buildah rm "$ctr"
#
# or hand it to a cluster or another engine:
#
#   buildah push agora:0.1.0 docker-archive:/tmp/agora.tar:agora:0.1.0   # docker load / kind load image-archive
#   buildah push agora:0.1.0 oci-archive:/tmp/agora-oci.tar
#
# Needs: apt-get install buildah debootstrap (Debian 12 has both). Takes about 3 minutes on
# 2 cores, most of it downloading; the image is about 240 MB.
#
# Settings (environment):
#   AGORA_IMAGE            name of the image (default agora:<version in pyproject.toml>)
#   AGORA_REF              git revision to build (default HEAD; uncommitted changes are NOT
#                          built, so the image is what the commit says)
#   AGORA_DEBIAN_MIRROR    Debian mirror (default http://deb.debian.org/debian); use the one
#                          in /etc/apt/sources.list* if this machine has its own
#   AGORA_DEBIAN_SECURITY_MIRROR  (default http://deb.debian.org/debian-security)
#   AGORA_BUILD_CA_BUNDLE  CA bundle pip trusts during the build (default: this machine's,
#                          /etc/ssl/certs/ca-certificates.crt). It is mounted read-only into
#                          the build container, not copied into the image: a machine whose
#                          HTTPS goes through a proxy with its own CA needs it to reach PyPI.
#   BUILDAH_ISOLATION      how `buildah run` isolates build steps (default chroot: it needs no
#                          OCI runtime, and crun refuses hosts whose cgroups are in hybrid
#                          v1/v2 mode: "cgroups in hybrid mode not supported, drop all
#                          controllers from cgroupv2"). `oci` works where crun/runc does.
#   STORAGE_DRIVER         buildah's storage driver; set it to vfs where overlay can't mount.
#
# Differences from the Dockerfile's image: Python is Debian's 3.11 (3.11.2 plus Debian's
# security fixes) rather than python.org's 3.11.x build, and it lives in /usr/bin rather than
# /usr/local/bin. Everything the services see (venv path, entrypoint, uid, HOME, PATH,
# examples) is the same.

set -euo pipefail

repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
ref=${AGORA_REF:-HEAD}
version=$(git -C "$repo" show "$ref:pyproject.toml" | sed -n 's/^version = "\(.*\)"$/\1/p')
image=${AGORA_IMAGE:-agora:$version}
suite=bookworm
mirror=${AGORA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${AGORA_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
ca_bundle=${AGORA_BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
isolation=${BUILDAH_ISOLATION:-chroot}

if [[ $(id -u) -ne 0 ]]; then
    echo "build-from-debian.sh: run it as root (debootstrap creates device nodes and chroots)" >&2
    exit 1
fi
for tool in buildah debootstrap git; do
    command -v "$tool" >/dev/null || {
        echo "build-from-debian.sh: $tool not found (apt-get install buildah debootstrap git)" >&2
        exit 1
    }
done

SECONDS=0
ctr=""
check=""
# Whatever happens, the working containers go: an interrupted debootstrap leaves a few hundred
# MB in buildah's storage otherwise. (A committed image stays; `buildah rmi` removes it.)
cleanup() {
    [[ -n $check ]] && buildah rm "$check" >/dev/null 2>&1 || true
    [[ -n $ctr ]] && buildah rm "$ctr" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Runs a command inside the working container as root, with the host's network (apt, pip).
in_ctr() {
    buildah run --isolation "$isolation" --network host "$@"
}

echo "== building $image from $ref ($(git -C "$repo" rev-parse --short "$ref")), Debian $suite from $mirror"

ctr=$(buildah from scratch)
mnt=$(buildah mount "$ctr")

# -- a minimal Debian root filesystem -------------------------------------------------------
# minbase: the essential packages and apt, nothing else (about 200 MB before cleaning).
debootstrap --variant=minbase "$suite" "$mnt" "$mirror"

# Updates and security fixes too, not only the release's packages.
cat >"$mnt/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security_mirror $suite-security main
EOF
# Like Debian's -slim images: no manuals, documentation (but the copyright files) or
# translations, now and for anything installed later.
cat >"$mnt/etc/dpkg/dpkg.cfg.d/agora-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
find "$mnt/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$mnt/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$mnt"/usr/share/man/* "$mnt"/usr/share/info/* "$mnt"/usr/share/locale/*

# -- Python ---------------------------------------------------------------------------------
in_ctr "$ctr" -- sh -c '
    set -e
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get upgrade -y
    apt-get install -y --no-install-recommends python3 python3-venv
    python3 --version'

# -- the project, into /opt/agora/venv ------------------------------------------------------
# Only what the Dockerfile's build sees (.dockerignore): the package sources, their metadata,
# the example inputs.
mkdir -p "$mnt/tmp/agora"
git -C "$repo" archive "$ref" pyproject.toml README.md services examples | tar -x -C "$mnt/tmp/agora"

ca_args=()
if [[ -f $ca_bundle ]]; then
    ca_args=(--volume "$ca_bundle:/run/agora-build-ca.crt:ro" --env PIP_CERT=/run/agora-build-ca.crt)
fi
# A regular (not editable) install; bytecode compiled now, because the image runs with a
# read-only root filesystem; the import line fails the build if a service can't load.
in_ctr "${ca_args[@]}" \
    --env PIP_NO_CACHE_DIR=1 --env PIP_DISABLE_PIP_VERSION_CHECK=1 --env PYTHONDONTWRITEBYTECODE=1 \
    "$ctr" -- sh -c '
    set -e
    python3 -m venv /opt/agora/venv
    /opt/agora/venv/bin/pip install /tmp/agora
    /opt/agora/venv/bin/python -m compileall -q /opt/agora/venv/lib
    /opt/agora/venv/bin/python -c "import agora.cli, agora.registry.app, agora.worker.app, agora.planner.app, agora.debate.app"'

mkdir -p "$mnt/opt/agora"
cp -r "$mnt/tmp/agora/examples" "$mnt/opt/agora/examples"

# -- the user, and no build leftovers -------------------------------------------------------
in_ctr "$ctr" -- sh -c '
    set -e
    groupadd --system --gid 10001 agora
    useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
        --shell /usr/sbin/nologin agora
    apt-get clean
    rm -rf /tmp/agora /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* \
        /var/log/dpkg.log /var/log/alternatives.log /var/log/bootstrap.log /root/.cache'
# debootstrap copied this machine's name server and host name; a container engine supplies
# its own.
: >"$mnt/etc/resolv.conf"
echo localhost >"$mnt/etc/hostname"
buildah umount "$ctr" >/dev/null

# -- what the image runs: the Dockerfile's final stage ---------------------------------------
buildah config \
    --entrypoint '["/opt/agora/venv/bin/python", "-m"]' \
    --cmd '["agora.cli", "--help"]' \
    --user 10001:10001 \
    --workingdir /opt/agora \
    --env PATH=/opt/agora/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env PYTHONUNBUFFERED=1 \
    --env PYTHONDONTWRITEBYTECODE=1 \
    --env HOME=/tmp \
    --env AGORA_CACHE=/tmp/agora \
    --label org.opencontainers.image.title=agora \
    --label "org.opencontainers.image.description=Dapr-native control plane for multi-agent LLM systems (every service; the command picks one)" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$(git -C "$repo" rev-parse "$ref")" \
    --label org.opencontainers.image.licenses=Apache-2.0 \
    --label org.opencontainers.image.base.name=debootstrap:$suite \
    "$ctr"

buildah commit --rm "$ctr" "$image"
ctr=""

# -- smoke test: the command line starts from the image, as uid 10001 ------------------------
check=$(buildah from "$image")
buildah run --isolation "$isolation" --user 10001:10001 "$check" -- \
    /opt/agora/venv/bin/python -m agora.cli --help >/dev/null
buildah rm "$check" >/dev/null
check=""

echo "== built $image in ${SECONDS}s"
buildah images "$image"
