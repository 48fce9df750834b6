# pcsync — see README.md.
#
#   make build   build bin/pcsync
#   make test    every test, unit and integration (the integration tests start
#                their own control plane from binaries that `make k8sbin` builds)
#   make demo    validate and render examples/config, print a summary
#   make lint    gofmt and go vet
#   make bench   render/load benchmarks, and kubectl kustomize of the same output

GO         ?= go
export GOFLAGS ?= -buildvcs=false
BIN        := bin/pcsync
DEMO_OUT   := _out/demo
TEST_FLAGS ?= -timeout 20m

.PHONY: all build test demo lint bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/pcsync

# hack/cluster.mk (the test-cluster tooling) provides k8sbin, dev-cluster and
# dev-cluster-down.
-include hack/cluster.mk

test: $(if $(wildcard hack/cluster.mk),k8sbin)
	$(GO) test $(TEST_FLAGS) ./...

demo: build
	@echo "== pcsync validate examples/config"
	@./$(BIN) validate examples/config
	@echo "== pcsync render examples/config -o $(DEMO_OUT)/manifests"
	@./$(BIN) render examples/config -o $(DEMO_OUT)/manifests 2>/dev/null
	@echo "== summary"
	@for f in $(DEMO_OUT)/manifests/*.yaml; do \
		[ "$$(basename $$f)" = kustomization.yaml ] && continue; \
		printf '  %-40s %3d objects\n' "$$f" "$$(grep -c '^kind:' $$f)"; \
	done
	@echo "Apply with: kubectl apply -k $(DEMO_OUT)/manifests (or pcsync apply examples/config)"

lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/k8sbin/') 2>/dev/null)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# BenchmarkKubectlKustomize times kubectl kustomize on the tree that render -o
# writes for the same fleets, side by side with BenchmarkRender. It runs once
# per size: kustomize needs minutes for 1,000 companies.
bench:
	$(GO) test -timeout 60m -run '^$$' -bench 'Load|Render' -benchmem -benchtime 3x ./pkg/config ./pkg/render
	$(GO) test -timeout 60m -run '^$$' -bench 'KubectlKustomize' -benchtime 1x ./pkg/render

clean:
	rm -rf bin $(DEMO_OUT)
