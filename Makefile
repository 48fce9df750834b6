# pcsync — see README.md.
#
#   make build   build bin/pcsync
#   make test-unit         the unit tests: seconds, no root, no cluster, no binaries
#   make test-integration  the integration tests (-tags integration): they start
#                their own control plane from binaries that `make k8sbin`
#                builds, and test/realnode a real kubelet with Debian's
#                containerd, runc and CNI plugins, which `make realnode-deps`
#                installs as root; test/deploy/monitoring promtool and a Prometheus
#                server, which `make monitoring-deps` installs as root.
#                PKG=./pkg/apply runs one package's
#   make test-e2e          the end-to-end tests against a real Paperclip server
#   make test    all of them (integration and end-to-end side by side), under
#                hack/testreaper: it fails if a process they started is still
#                running after them
#   make demo    validate and render examples/config, print a summary
#   make lint    gofmt, go vet with and without the integration tag, and
#                golangci-lint (.golangci.yml)
#   make docs    the generated references: docs/config-reference.md,
#                docs/cli-reference.md and docs/metrics-reference.md
#   make bench   render/load benchmarks, and kubectl kustomize of the same output
#   make images  the runtime images (docs/images.md) into _out/images, without
#                Docker; REGISTRY=host[:port]/org PUSH=1 pushes them
#   make release REGISTRY=host[:port]/org [VERSION=v…]  every image pushed,
#                tagged with the release, and _out/release: install.yaml and
#                the Helm chart's package

GO         ?= go
export GOFLAGS ?= -buildvcs=false
BIN        := bin/pcsync
DEMO_OUT   := _out/demo
TEST_FLAGS ?= -timeout 35m
UNIT_FLAGS ?= -timeout 10m
# Tests that need the control plane (internal/testing/testcluster) or a real Paperclip
# server live in files starting with `//go:build integration`.
TEST_TAGS  := -tags integration

.PHONY: all build test test-unit test-integration test-e2e test-suites demo lint docs bench clean

all: build

# bin/pcsync, stamped with COMMIT (pcsync version prints it beside the
# release version, which no stamp changes).
build:
	$(GO) build -ldflags "-X main.commit=$(COMMIT)" -o $(BIN) ./cmd/pcsync

# hack/cluster.mk (the test-cluster tooling) provides k8sbin, dev-cluster and
# dev-cluster-down.
-include hack/cluster.mk
# integrations/paperclip/paperclip.mk: the Paperclip adapter (paperclip-adapter).
-include integrations/paperclip/paperclip.mk
# integrations/paperclip-sandbox/paperclip-sandbox.mk: the sandbox-provider
# plugin (paperclip-plugin).
-include integrations/paperclip-sandbox/paperclip-sandbox.mk

TEST_DEPS := inotify $(if $(wildcard hack/cluster.mk),k8sbin realnode-deps) monitoring-deps helm gh paperclip-adapter-test paperclip-plugin-test

# kwok holds one inotify instance per followed container log, and pcsync's
# spool and config watchers need their own: the default of 128 per user runs
# out when the integration packages run side by side. Raised when we may.
.PHONY: inotify
inotify:
	@[ "$$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo 0)" -ge 8192 ] || \
		sysctl -qw fs.inotify.max_user_instances=8192 2>/dev/null || \
		echo "note: could not raise fs.inotify.max_user_instances (not root?)"

# Every suite, under hack/testreaper (a child subreaper): a process the tests
# started and left running (a lease's command server, a shim, a server a
# harness forgot) is named, killed, and fails make test.
test: $(TEST_DEPS)
	@bash hack/paperclip/install.sh >/dev/null
	@$(GO) run ./hack/testreaper -- $(MAKE) --no-print-directory test-suites

test-unit:
	$(GO) test $(UNIT_FLAGS) ./...

# Every package with integration tests, or only PKG (a package pattern).
test-integration: $(TEST_DEPS)
	$(GO) test $(TEST_TAGS) $(TEST_FLAGS) $(or $(PKG),./test/realnode $$($(GO) list ./... | grep -v -e '/test/e2e/' -e '/test/realnode$$'))

test-e2e: e2e-paperclip

# The Paperclip end-to-end package runs once (its own timeout), beside the
# other packages: the machine has one real node, which test/realnode (listed
# first, so started first) holds for minutes while the end-to-end tests that
# need no real node run; those that need it run last (onRealNode) and start
# it then (its TestMain makes it Lazy). Its output is printed when it ends;
# either failing fails the run.
test-suites:
	@e2e_log="$$(mktemp)"; \
	( $(GO) test $(TEST_TAGS) $(E2E_FLAGS) ./test/e2e/paperclip >"$$e2e_log" 2>&1; echo $$? >"$$e2e_log.rc" ) & \
	e2e_pid=$$!; \
	$(GO) test $(TEST_TAGS) $(TEST_FLAGS) ./test/realnode $$($(GO) list ./... | grep -v -e '/test/e2e/' -e '/test/realnode$$'); rc=$$?; \
	wait $$e2e_pid; echo "== go test ./test/e2e/paperclip"; cat "$$e2e_log"; e2e_rc="$$(cat "$$e2e_log.rc")"; \
	rm -f "$$e2e_log" "$$e2e_log.rc"; [ "$$rc" -eq 0 ] && [ "$$e2e_rc" -eq 0 ]

# test/deploy/monitoring's tests need promtool (`promtool check rules`, `promtool
# test rules`) and a Prometheus server that scrapes a real daemon: Debian's
# prometheus package, installed by hack/monitoring/install.sh (idempotent;
# as root). The tests fail, never skip, without them.
.PHONY: monitoring-deps
monitoring-deps:
	@bash hack/monitoring/install.sh

# The end-to-end proof against the real Paperclip server (test/e2e/paperclip,
# files tagged integration): hack/paperclip/install.sh installs Node 24,
# paperclipai, playwright-core and chromium (cached; fails loudly), the test
# builds pcsync and the adapter, starts Paperclip and the control plane with
# its real node (realnode-deps).
E2E_FLAGS ?= -timeout 40m -count=1

.PHONY: e2e-paperclip
e2e-paperclip: $(if $(wildcard hack/cluster.mk),k8sbin realnode-deps)
	@bash hack/paperclip/install.sh >/dev/null
	$(GO) test $(TEST_TAGS) $(E2E_FLAGS) ./test/e2e/paperclip

# The README's first command: pcsync on its embedded default, no cluster
# needed. Validates and renders examples/config, then runs one agent end to
# end through the spool with the local executor (hack/demo.sh).
demo: build
	@echo "== pcsync validate examples/config"
	@./$(BIN) validate examples/config
	@echo "== pcsync render examples/config --output-dir $(DEMO_OUT)/manifests"
	@./$(BIN) render examples/config --output-dir $(DEMO_OUT)/manifests 2>/dev/null
	@for f in $(DEMO_OUT)/manifests/*.yaml; do \
		[ "$$(basename $$f)" = kustomization.yaml ] && continue; \
		printf '  %-40s %3d objects\n' "$$f" "$$(grep -c '^kind:' $$f)"; \
	done
	@echo "== a run through the spool (pcsync daemon --executor local --once)"
	@PCSYNC_BIN=$(BIN) sh hack/demo.sh

# golangci-lint (.golangci.yml: staticcheck, errorlint, sloglint, errcheck,
# unused, …), built from the Go module proxy once into a versioned cache.
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := $(HOME)/.cache/pcsync/tools/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint

$(GOLANGCI_LINT):
	@echo "== building golangci-lint $(GOLANGCI_LINT_VERSION) (once)"
	GOFLAGS= GOBIN=$(dir $(GOLANGCI_LINT)) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

lint: $(GOLANGCI_LINT)
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/k8sbin/') 2>/dev/null)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet $(TEST_TAGS) ./...
	$(GOLANGCI_LINT) run ./...

# The references generated from the code; a unit test fails while one is
# stale: the config's from the CUE schema (hack/gendocs), the CLI's from
# pcsync's command tree (its test in cmd/pcsync writes it), the metrics'
# and alerts' from their registrations and deploy/monitoring (hack/genmetrics).
docs:
	$(GO) run ./hack/gendocs
	$(GO) test -count=1 -run '^TestCLIReference$$' ./cmd/pcsync -args -update-docs
	$(GO) run ./hack/genmetrics

# Every benchmark the issues ask for, each beside its peer:
#   render/load vs kubectl kustomize of the same output (pkg/config, pkg/render),
#   pcsync apply vs kubectl apply --server-side vs a bare SSA client (pkg/apply),
#   the local executor with 1,000 requests (pkg/runs/spool),
#   the Kubernetes executor with 200 requests (pkg/runs/kubeexec),
#   the sandbox provider: an execute vs a bare client-go exec and kubectl
#   exec, API requests per lease, 20 polled leases, acquire vs a bare pod
#   (pkg/sandbox), and whole stock claude_local runs (cold, a warm pool
#   refilled at once, one with refillDelaySec) vs a local-process provider
#   (test/e2e/paperclip; PCSYNC_BENCH_ROUNDS sets its rounds, default 8),
#   Paperclip's wakes through the adapter and pcsync vs the claude-k8s adapter
#   (test/e2e/paperclip),
#   on the real node (test/realnode): lease acquire vs a plain pod, execute vs
#   a bare exec, release vs a bare delete, spool drop → pod Running vs bare
#   Jobs (with each pod's kubelet steps, from its log at --v=4), a whole 1 s
#   run vs a bare Job, the agent's exit → its result written, and the
#   credential route (streamed requests) vs straight to the provider and a
#   bare relay, a suspended lease's resume → first execute vs a cold acquire
#   and suspend → pod gone,
#   the fleet (test/fleet): 10, 100 and 1,000 companies of 3 agents kept by one
#   daemon (cold apply, proxies asleep, RSS, CPU and API requests at rest,
#   commit → applied), a burst of 200 runs over 200 companies vs in one
#   (drop → Job created), the first run after an idle period vs warm (real
#   node), and the apply of 1,000 companies vs the bare 16-worker client.
# The control-plane benchmarks start their own cluster (make k8sbin first).
bench: $(if $(wildcard hack/cluster.mk),k8sbin realnode-deps)
	$(GO) test -timeout 60m -run '^$$' -bench . -benchmem -benchtime 3x ./pkg/config ./pkg/render
	PCSYNC_KUBELET_V=4 $(GO) test $(TEST_TAGS) -timeout 60m -run '^$$' -bench . -benchmem -benchtime 1x ./pkg/apply ./pkg/runs/spool ./pkg/runs/kubeexec ./pkg/sandbox ./test/realnode
	$(GO) test $(TEST_TAGS) -timeout 60m -run '^$$' -bench BenchmarkApply -benchtime 1x ./pkg/apply -args -apply-bench-companies 1000 -apply-bench-clients bare,pcsync
	$(GO) test $(TEST_TAGS) -timeout 90m -run '^$$' -bench 'BenchmarkFleet|BenchmarkBurst' -benchtime 1x ./test/fleet
	@bash hack/paperclip/install.sh >/dev/null
	$(GO) test $(TEST_TAGS) -timeout 60m -run '^$$' -bench . -benchtime 1x ./test/e2e/paperclip

# pcsync's runtime images (pkg/images; docs/images.md): the agent base, one
# image per CLI and pcsync's own, built without Docker (debootstrap, npm,
# go-containerregistry; as root) into the OCI layout IMAGES_OUT, tagged TAG;
# REGISTRY=host[:port]/org PUSH=1 pushes them. BUILDER=docker (or podman,
# buildah) builds the Dockerfiles under images/ instead.
IMAGES_OUT ?= _out/images
# RELEASE_VERSION is pcsync's release version, kept in pkg/images/version.go
# only: the tag render and the daemon give pcsync's images, so make images
# tags them with it unless TAG says another. COMMIT is the build's stamp.
RELEASE_VERSION := $(shell sed -n 's/^const Version = "\(.*\)"$$/\1/p' pkg/images/version.go)
TAG        ?= $(RELEASE_VERSION)
COMMIT     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
BUILDER    ?= go

# make -s version prints TAG: the tag make images gives the images, by
# default the release version every build of pcsync names them with.
.PHONY: version
version:
	@echo $(TAG)

.PHONY: images
images:
ifeq ($(BUILDER),go)
	$(GO) run ./hack/images -out $(IMAGES_OUT) -tag $(TAG) $(if $(REGISTRY),-registry $(REGISTRY)) $(if $(PUSH),-push)
else
	BUILDER=$(BUILDER) REGISTRY=$(REGISTRY) TAG=$(TAG) PUSH=$(PUSH) bash hack/images/docker.sh
endif

# helm (hack/helm/versions.env), built from its Go module into a versioned
# cache by hack/helm/build.sh, which prints its directory: test/deploy and
# test/realnode render charts/pcsync with it, make release packages it.
.PHONY: helm
helm:
	@bash hack/helm/build.sh >/dev/null

# gh, the GitHub CLI (hack/gh/versions.env), built from its Go module into a
# versioned cache by hack/gh/build.sh: the tests run it through pcsync's
# socket to a GitHub credential's route (pkg/egressproxy/ghsocket).
.PHONY: gh
gh:
	@bash hack/gh/build.sh >/dev/null

# A release, from a tree whose pkg/images/version.go says VERSION (raise it,
# CHANGELOG.md and charts/pcsync/Chart.yaml together, and tag the commit
# VERSION): every image built and pushed to REGISTRY tagged VERSION, then
# RELEASE_OUT: install.yaml (deploy/base, pcsync's image pinned to
# REGISTRY/pcsync:VERSION) and pcsync-<chart version>.tgz, the chart whose
# image.registry is REGISTRY (hack/release).
VERSION     ?= $(RELEASE_VERSION)
RELEASE_OUT ?= _out/release

.PHONY: release
release: helm
	@[ -n "$(REGISTRY)" ] || { echo "make release: set REGISTRY=host[:port]/org, where the release's images go"; exit 1; }
	@[ "$(VERSION)" = "$(RELEASE_VERSION)" ] || { echo "make release: VERSION=$(VERSION), but pkg/images/version.go says $(RELEASE_VERSION): raise it (with CHANGELOG.md and charts/pcsync/Chart.yaml) first"; exit 1; }
	@[ "$$(git describe --tags --exact-match 2>/dev/null)" = "$(VERSION)" ] || echo "note: HEAD is not tagged $(VERSION)"
	$(MAKE) --no-print-directory images TAG=$(VERSION) REGISTRY=$(REGISTRY) PUSH=1
	rm -rf $(RELEASE_OUT)
	$(GO) run ./hack/release -version $(VERSION) -registry $(REGISTRY) -out $(RELEASE_OUT)
	"$$(bash hack/helm/build.sh)/helm" package $(RELEASE_OUT)/chart/pcsync --destination $(RELEASE_OUT)
	rm -rf $(RELEASE_OUT)/chart
	@ls -l $(RELEASE_OUT)

clean:
	rm -rf bin $(DEMO_OUT)
