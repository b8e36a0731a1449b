# syntax=docker/dockerfile:1
#
# One image for every Agora service. The command names the service's module:
#
#   docker run --rm agora:0.1.0 agora.registry        # python -m agora.registry
#   docker run --rm agora:0.1.0 agora.cli --help      # the `agora` command line
#
# Modules: agora.registry, agora.taskboard, agora.reputation, agora.allocator, agora.worker,
# agora.escalation, agora.uncertainty, agora.planner, agora.debate (each has a __main__.py).
# Each app reads its settings from the environment (agora/runtime/settings.py: APP_ID,
# APP_PORT, DAPR_HTTP_PORT, DAPR_GRPC_PORT, AGORA_APP_HOST; agora/llm/settings.py:
# AGORA_MODEL_*), and listens on 127.0.0.1 by default, where the Dapr sidecar in the same pod
# reaches it. The Helm chart (deploy/helm/agora) sets all of it.
#
# The final stage holds the interpreter, the virtualenv and the example input files only: no
# compiler, no pip cache, no source tree. It runs as uid 10001 and writes nothing outside /tmp
# (bytecode is compiled at build time; HOME is /tmp), so it runs with a read-only root
# filesystem and an emptyDir on /tmp.
#
# `make image` builds it with docker, podman or buildah.

ARG PYTHON_VERSION=3.11.14

# -- builder: install the project and its pinned dependencies into a virtualenv --------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/agora/venv
ENV PATH=/opt/agora/venv/bin:$PATH

WORKDIR /src
# pyproject.toml pins every runtime dependency; README.md is the package's long description.
COPY pyproject.toml README.md ./
COPY services ./services
# A regular (not editable) install: the package lands in the venv's site-packages with its
# bytecode compiled, and nothing refers back to /src.
RUN pip install . \
    && python -m compileall -q /opt/agora/venv/lib \
    && python -c "import agora.cli, agora.registry.app, agora.worker.app, agora.planner.app, agora.debate.app"

# -- runtime --------------------------------------------------------------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm

ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="agora" \
      org.opencontainers.image.description="Dapr-native control plane for multi-agent LLM systems (every service; the command picks one)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"

RUN groupadd --system --gid 10001 agora \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
       --shell /usr/sbin/nologin agora

COPY --from=builder /opt/agora/venv /opt/agora/venv
# Input files for the command line (`agora task publish /opt/agora/examples/tasks.yaml`).
COPY examples /opt/agora/examples

ENV PATH=/opt/agora/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    AGORA_CACHE=/tmp/agora

WORKDIR /opt/agora
USER 10001:10001

ENTRYPOINT ["python", "-m"]
CMD ["agora.cli", "--help"]
