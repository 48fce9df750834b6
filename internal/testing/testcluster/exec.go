package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var clusterExecGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterexecs"}

// ExecOptions say how kwok runs a pod exec: on this host, as a local
// process, since kwok runs no containers.
type ExecOptions struct {
	// WorkDir is the working directory of every exec'd command.
	WorkDir string
	// Env is added to kwok's own environment for the command (PATH, for
	// example, to put stand-in CLIs first).
	Env map[string]string
}

// ServeExec makes kwok run execs into every pod of namespace as local
// commands on this host (a ClusterExec selecting the namespace). kwok
// reads the rule from its informer within milliseconds; a client that execs
// at once should retry a refused first exec. Unlike a kubelet, kwok never
// closes the command's stdin and reports a non-zero exit as an error
// message, not an exit code.
func (c *Cluster) ServeExec(ctx context.Context, namespace string, o ExecOptions) error {
	keys := make([]string, 0, len(o.Env))
	for k := range o.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var envs []any
	for _, k := range keys {
		envs = append(envs, map[string]any{"name": k, "value": o.Env[k]})
	}
	local := map[string]any{"workDir": o.WorkDir}
	if len(envs) > 0 {
		local["envs"] = envs
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "ClusterExec",
		"metadata":   map[string]any{"name": clusterExecName(namespace)},
		"spec": map[string]any{
			"selector": map[string]any{"matchNamespaces": []any{namespace}},
			"execs":    []any{map[string]any{"local": local}},
		},
	}}
	if err := c.putLogs(ctx, c.dyn.Resource(clusterExecGVR), u); err != nil {
		return fmt.Errorf("testcluster: serve exec in namespace %s: %w", namespace, err)
	}
	return nil
}

// StopExec removes the rule ServeExec created for namespace.
func (c *Cluster) StopExec(ctx context.Context, namespace string) error {
	err := c.dyn.Resource(clusterExecGVR).Delete(ctx, clusterExecName(namespace), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("testcluster: delete ClusterExec %s: %w", clusterExecName(namespace), err)
	}
	return nil
}

func clusterExecName(namespace string) string { return "pcsync-exec-" + namespace }

// HostProcesses returns the pids of this host's processes (but this one)
// whose command line names a path under dir.
func HostProcesses(dir string) ([]int, error) {
	dir = filepath.Clean(dir) + "/"
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("testcluster: processes under %s: %w", dir, err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir)) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// KillHostProcesses kills (SIGKILL) HostProcesses(dir) and returns how
// many it killed. ServeExec's pods share the host: a command they left
// running in the background (a sandbox lease's command server, which
// outlives the pod by design) would otherwise outlive the test that made
// dir.
func KillHostProcesses(dir string) (int, error) {
	pids, err := HostProcesses(dir)
	n := 0
	for _, pid := range pids {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n, err
}

// HostDir makes a directory under /tmp (short: Unix socket paths live in it)
// for ServeExec's WorkDir and the sandbox's host root, removed when the test
// ends. Lease command servers share this host and outlive their pods (and a
// killed daemon); each stops once its socket's directory is gone, and the
// cleanup kills any process still running under dir first, so that none
// outlives the test.
func HostDir(tb testing.TB, prefix string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("/tmp", prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if n, err := KillHostProcesses(dir); err != nil || n > 0 {
			tb.Logf("stopped %d processes left under %s: %v", n, dir, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			tb.Errorf("remove %s: %v", dir, err)
		}
	})
	return dir
}
