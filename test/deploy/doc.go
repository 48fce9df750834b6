// Package deploy checks what deploy/ ships, from outside it, so that deploy/
// holds only manifests and READMEs and serves as a remote kustomize base
// (github.com/pcsync/pcsync//deploy/base?ref=<release>). Its tests build
// deploy/base, deploy/paperclip and deploy/argocd with kustomize and check
// them: RBAC against what pcsync doctor checks, the cluster token in the
// pcsync container only, every image built here or pinned, the docs' tags
// quoted, deploy/ free of anything else; Helm's chart, charts/pcsync, against
// deploy/base; with the integration tag, against a real API server
// (server-side dry runs, RBAC that suffices for a daemon's work). Its
// subpackage monitoring checks deploy/monitoring.
package deploy
