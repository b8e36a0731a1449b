# What the Kubernetes node test runs: the control plane (`make kube`: kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd, helm, plus Dapr's operator and sidecar
# injector) and the node (`make kube-node`): the kubelet, kube-proxy and CoreDNS, with containerd, runc,
# the CNI plugins and iptables from Debian. Included from the Makefile after it sets CACHE, DAPR_BIN,
# DAPR_TAGS and GO_ENV; versions are pinned in deploy/versions.env. Like Dapr, each is built from
# the Go module proxy once per version into the cache outside the clone, in a .partial folder
# that is renamed into place when complete.

KUBE_BIN := $(CACHE)/kubernetes-$(KUBERNETES_VERSION)/bin
ETCD_BIN := $(CACHE)/etcd-$(ETCD_VERSION)/bin
HELM_BIN := $(CACHE)/helm-$(HELM_VERSION)/bin
COREDNS_BIN := $(CACHE)/coredns-$(COREDNS_VERSION)/bin

KUBE_CMDS  := kube-apiserver kube-controller-manager kube-scheduler
# The node's commands (kubelet, kube-proxy) and kubectl (the node test runs `kubectl exec` as a
# user would).
KUBE_NODE_CMDS := kubelet kube-proxy kubectl
KUBE_MAJOR := $(word 1,$(subst ., ,$(KUBERNETES_VERSION)))
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBERNETES_VERSION)))
KUBE_PATCH := $(word 3,$(subst ., ,$(KUBERNETES_VERSION)))
# The staging modules (k8s.io/api, client-go, ...) are tagged v0.<minor>.<patch> with each release.
KUBE_STAGING_VERSION := v0.$(KUBE_MINOR).$(KUBE_PATCH)
# The build tags of Kubernetes' own release builds (hack/lib/golang.sh).
KUBE_TAGS  := selinux,notest,grpcnotrace
# The version stamp of Kubernetes' own builds (hack/lib/version.sh): kube-apiserver serves it at
# /version, where helm and kubectl read it. buildDate is the release tag's time as the module
# proxy records it ($build_date, set in the recipe); the proxy does not know the git commit.
KUBE_VERSION_VARS := gitVersion=v$(KUBERNETES_VERSION) gitMajor=$(KUBE_MAJOR) \
	gitMinor=$(KUBE_MINOR) gitTreeState=clean buildDate=$$build_date
KUBE_LDFLAGS = -s -w $(strip $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	$(foreach var,$(KUBE_VERSION_VARS),-X $(pkg).$(var))))

.PHONY: kube kube-node node-packages

kube: $(KUBE_BIN)/kube-apiserver $(ETCD_BIN)/etcd $(HELM_BIN)/helm $(DAPR_BIN)/operator $(DAPR_BIN)/injector

# Every Kubernetes command in one `go build`: the commands share most of their packages, and
# one build compiles each package once where separate builds side by side (make -j) would each
# compile it.
$(addprefix $(KUBE_BIN)/,$(KUBE_CMDS) $(KUBE_NODE_CMDS)) &:
	@grep -q "k8s.io/kubernetes v$(KUBERNETES_VERSION)$$" deploy/kubernetes/go.mod || \
		{ echo "deploy/kubernetes/go.mod does not pin kubernetes v$(KUBERNETES_VERSION)"; exit 1; }
	@stale=$$(grep -E '^\s+k8s\.io/\S+ => ' deploy/kubernetes/go.mod | \
		grep -v " $(KUBE_STAGING_VERSION)$$" || true); [ -z "$$stale" ] || \
		{ echo "deploy/kubernetes/go.mod replaces staging modules by other tags than $(KUBE_STAGING_VERSION):"; \
		echo "$$stale"; exit 1; }
	@echo "building Kubernetes $(KUBERNETES_VERSION) ($(KUBE_CMDS)) into $(KUBE_BIN)"
	rm -rf $(KUBE_BIN).partial && mkdir -p $(KUBE_BIN).partial
	cd deploy/kubernetes && build_date=$$($(GO_ENV) go list -m \
		-f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes) && \
		time $(GO_ENV) go build -tags $(KUBE_TAGS) -trimpath -ldflags "$(KUBE_LDFLAGS)" \
		-o $(KUBE_BIN).partial/ $(addprefix k8s.io/kubernetes/cmd/,$(KUBE_CMDS) $(KUBE_NODE_CMDS))
	rm -rf $(KUBE_BIN) && mv $(KUBE_BIN).partial $(KUBE_BIN)
	$(KUBE_BIN)/kube-apiserver --version && $(KUBE_BIN)/kubelet --version && $(KUBE_BIN)/kubectl version --client


# What runs the node's containers, from Debian: containerd (with its `ctr` client), runc, the
# CNI plugins (bridge, host-local, loopback in /usr/lib/cni) and iptables; and what builds the
# Agora image without a registry (buildah, debootstrap). Installed only when one is missing.
NODE_PACKAGES := containerd runc containernetworking-plugins iptables buildah debootstrap
node-packages:
	@$(call apt_install,$(NODE_PACKAGES),--no-install-recommends)
	@containerd --version && runc --version | head -1 && test -x /usr/lib/cni/bridge

# CoreDNS with the plugins of Kubernetes' DNS addon only (deploy/coredns/main.go). Most of its
# build is Kubernetes' client (k8s.io/api, apimachinery, client-go): deploy/coredns/go.mod and
# deploy/kubernetes/go.mod require the same version of every module the two builds share, and
# CoreDNS is built after Kubernetes with the same tags, so those packages come out of Go's build
# cache instead of being compiled twice.
$(COREDNS_BIN)/coredns: | $(KUBE_BIN)/kube-apiserver
	@grep -q "github.com/coredns/coredns v$(COREDNS_VERSION)$$" deploy/coredns/go.mod || \
		{ echo "deploy/coredns/go.mod does not pin coredns v$(COREDNS_VERSION)"; exit 1; }
	@echo "building CoreDNS $(COREDNS_VERSION) into $(COREDNS_BIN)"
	rm -rf $(COREDNS_BIN).partial && mkdir -p $(COREDNS_BIN).partial
	cd deploy/coredns && time $(GO_ENV) nice go build -tags $(KUBE_TAGS) -trimpath -ldflags "-s -w" \
		-o $(COREDNS_BIN).partial/coredns .
	rm -rf $(COREDNS_BIN) && mv $(COREDNS_BIN).partial $(COREDNS_BIN)
	$(COREDNS_BIN)/coredns -version

# Redis (the Makefile's `redis`) and Jaeger are written into images the node test runs; the
# Agora image of HEAD is built from Debian once per source tree (deploy/image/oci-archive.sh,
# about 3 minutes, most of it downloading) and kept as an OCI archive in the cache.
kube-node: kube $(addprefix $(KUBE_BIN)/,$(KUBE_NODE_CMDS)) $(COREDNS_BIN)/coredns node-packages redis \
	jaeger node-image

.PHONY: node-image
node-image: node-packages
	@deploy/image/oci-archive.sh >/dev/null
	@echo "Agora image for the node: $$(deploy/image/oci-archive.sh --name) in $$(deploy/image/oci-archive.sh --path)"

# The etcd command is the main package at the root of the etcd server module.
$(ETCD_BIN)/etcd:
	@grep -q "go.etcd.io/etcd/server/v3 v$(ETCD_VERSION)$$" deploy/etcd/go.mod || \
		{ echo "deploy/etcd/go.mod does not pin etcd v$(ETCD_VERSION)"; exit 1; }
	@echo "building etcd $(ETCD_VERSION) into $(ETCD_BIN)"
	rm -rf $(ETCD_BIN).partial && mkdir -p $(ETCD_BIN).partial
	cd deploy/etcd && time $(GO_ENV) go build -trimpath -ldflags "-s -w" \
		-o $(ETCD_BIN).partial/etcd go.etcd.io/etcd/server/v3
	rm -rf $(ETCD_BIN) && mv $(ETCD_BIN).partial $(ETCD_BIN)
	$(ETCD_BIN)/etcd --version

# Helm's go.mod has no replace directives, so it is installed as is. Its release build stamps
# its version and, as the default .Capabilities.KubeVersion, the Kubernetes minor of the
# client-go it is built on (helm's Makefile); that minor is read from helm's go.mod here.
$(HELM_BIN)/helm:
	@echo "building Helm $(HELM_VERSION) into $(HELM_BIN)"
	rm -rf $(HELM_BIN).partial && mkdir -p $(HELM_BIN).partial
	gomod=$$($(GO_ENV) go mod download -json helm.sh/helm/v3@v$(HELM_VERSION) | \
		sed -n 's/.*"GoMod": "\(.*\)".*/\1/p') && \
		kube_minor=$$(sed -n 's/^\s*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$$gomod") && \
		[ -n "$$kube_minor" ] && \
		time $(GO_ENV) GOBIN=$(HELM_BIN).partial go install -trimpath -ldflags "-s -w \
		-X helm.sh/helm/v3/internal/version.version=v$(HELM_VERSION) \
		-X helm.sh/helm/v3/internal/version.gitTreeState=clean \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$$kube_minor \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$$kube_minor" \
		helm.sh/helm/v3/cmd/helm@v$(HELM_VERSION)
	rm -rf $(HELM_BIN) && mv $(HELM_BIN).partial $(HELM_BIN)
	$(HELM_BIN)/helm version

# Dapr's operator and sidecar injector, from the same module and with the same flags as sentry,
# added to an existing Dapr cache (deploy/dapr/go.mod needs nothing more for them).
$(DAPR_BIN)/operator $(DAPR_BIN)/injector &: | $(DAPR_BIN)/daprd
	@echo "building Dapr $(DAPR_VERSION) operator and injector into $(DAPR_BIN)"
	rm -rf $(DAPR_BIN)/k8s.partial && mkdir -p $(DAPR_BIN)/k8s.partial
	cd deploy/dapr && time $(GO_ENV) go build -trimpath \
		-ldflags "-s -w -X github.com/dapr/dapr/pkg/buildinfo.version=$(DAPR_VERSION)" \
		-o $(DAPR_BIN)/k8s.partial/ github.com/dapr/dapr/cmd/operator github.com/dapr/dapr/cmd/injector
	mv $(DAPR_BIN)/k8s.partial/operator $(DAPR_BIN)/k8s.partial/injector $(DAPR_BIN)/ && rmdir $(DAPR_BIN)/k8s.partial
