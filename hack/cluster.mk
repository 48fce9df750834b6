# Local Kubernetes control plane for development and integration tests
# (internal/testing/testcluster; docs/testcluster.md). Included from the root Makefile.
#
#   make k8sbin            build etcd, kube-apiserver, kube-controller-manager,
#                          kube-scheduler, kubelet and kwok once (cached outside the
#                          repo, keyed by version) and print their directory; then
#                          the real node's kube-proxy and kube-router (NetworkPolicy
#                          enforcer), cached in a directory of their own
#                          (hack/kuberouter/build.sh); its cluster add-ons
#                          (local-path-provisioner, CoreDNS), cached likewise
#                          (hack/addons/build.sh); and Cilium's
#                          CiliumNetworkPolicy CRD from its Go module, for the
#                          test API server (hack/crds/cilium.sh)
#   make realnode-deps     apt-get install what the opt-in real node needs
#                          (containerd, runc, CNI plugins, iptables, ipset;
#                          hack/realnode/install.sh)
#   make dev-cluster       start the dev cluster in the background (or reuse it) and
#                          write .dev/kubeconfig
#   make dev-cluster-down  stop it
#   make dev-cluster-status

DEV_DIR ?= .dev
DEVCLUSTER_BIN := $(DEV_DIR)/bin/devcluster

.PHONY: k8sbin realnode-deps dev-cluster dev-cluster-down dev-cluster-status devcluster-bin

k8sbin:
	@bash hack/k8sbin/build.sh
	@bash hack/kuberouter/build.sh
	@bash hack/addons/build.sh
	@bash hack/crds/cilium.sh >/dev/null

realnode-deps:
	@bash hack/realnode/install.sh

devcluster-bin:
	@mkdir -p $(DEV_DIR)/bin
	@go build -o $(DEVCLUSTER_BIN) ./hack/devcluster

dev-cluster: devcluster-bin
	@bin_dir="$$(bash hack/k8sbin/build.sh)" && \
		$(DEVCLUSTER_BIN) up --dir $(DEV_DIR) --bin-dir "$$bin_dir"

dev-cluster-down: devcluster-bin
	@$(DEVCLUSTER_BIN) down --dir $(DEV_DIR)

dev-cluster-status: devcluster-bin
	@$(DEVCLUSTER_BIN) status --dir $(DEV_DIR)
