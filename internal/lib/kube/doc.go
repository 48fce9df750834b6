// Package kube holds pcsync's cluster-access plumbing shared by every command that
// talks to Kubernetes: the kubectl-compatible connection flags (--kubeconfig,
// --context, KUBECONFIG, ~/.kube/config, in-cluster config), client rate limits, and a
// RoundTripper that counts the requests a client sends.
package kube
