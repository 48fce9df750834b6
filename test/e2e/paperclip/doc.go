// Package paperclip is pcsync's end-to-end proof against the real Paperclip
// server (`make e2e-paperclip`): the server with its embedded Postgres on
// loopback, the adapter of integrations/paperclip installed into it, and the
// real `pcsync daemon` (local and Kubernetes executors) running the agents it
// wakes. Every test is in a file tagged `integration`; the tools come from
// hack/paperclip/install.sh and the control plane from internal/testcluster.
// A missing tool fails the tests, saying what to install; nothing is skipped.
package paperclip
