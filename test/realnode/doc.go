// Package realnode proves internal/testcluster's real node: a kubelet with
// containerd, runc and a CNI bridge joins the test control plane and runs real
// containers from images in the harness's registry on 127.0.0.1. Every test is in
// a file tagged `integration`; TestMain starts the cluster with the real node
// (root, containerd, runc and containernetworking-plugins needed: Start says what
// to install; nothing is skipped).
//
// The pods run the harness's pause image, whose /pause program also prints, copies
// stdin and exits with a chosen code (internal/testcluster/pause), and pass Pod
// Security "restricted": uid 1000, no capabilities, seccomp RuntimeDefault, a
// read-only root filesystem.
package realnode
