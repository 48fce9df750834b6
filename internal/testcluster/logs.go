package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	logsGVR        = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}
	clusterLogsGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterlogs"}
)

// LogSource is a file in CRI log format that kwok serves as the log of every
// container of the pods it was registered for (`kubectl logs`, the pods/log API, with
// or without follow). Lines appended while a client follows reach it. Note: kwok never
// ends a follow stream, not even when the pod finishes; a reader must stop on its own
// (e.g. when the pod reaches a terminal phase).
type LogSource struct {
	path string
	mu   sync.Mutex
}

// Path returns the file's path; anything written to it must be CRI log lines
// (`<RFC3339Nano time> stdout|stderr F <text>`).
func (l *LogSource) Path() string { return l.path }

// Append adds lines to the container's stdout, stamped with the current time. A line
// containing newlines becomes several lines.
func (l *LogSource) Append(lines ...string) error {
	return l.AppendStream("stdout", lines...)
}

// AppendStream adds lines to "stdout" or "stderr".
func (l *LogSource) AppendStream(stream string, lines ...string) error {
	if stream != "stdout" && stream != "stderr" {
		return fmt.Errorf("log source %s: stream %q: want stdout or stderr", l.path, stream)
	}
	var b strings.Builder
	for _, line := range lines {
		for _, part := range strings.Split(line, "\n") {
			b.WriteString(CRILine(time.Now(), stream, part))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("log source: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		_ = f.Close()
		return fmt.Errorf("log source %s: %w", l.path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("log source %s: %w", l.path, err)
	}
	return nil
}

// CRILine formats one full (tag "F") line of the CRI container log format, newline
// included.
func CRILine(t time.Time, stream, text string) string {
	return t.UTC().Format(time.RFC3339Nano) + " " + stream + " F " + text + "\n"
}

// ServeLogs makes kwok serve a new log file as the container log of the pods named
// podNames in namespace, or, if podNames is empty, of every pod in namespace (use that
// for Job pods, whose names are generated). lines are written first; append more with
// the returned LogSource. Register before the pods' logs are read: kwok picks the
// rule up within a moment. A per-pod rule wins over the namespace rule. Namespace
// rules are removed by the cleanup of Cluster.Namespace; per-pod rules live in the
// namespace and go with it.
func (c *Cluster) ServeLogs(ctx context.Context, namespace string, podNames []string, lines []string) (*LogSource, error) {
	if namespace == "" {
		return nil, fmt.Errorf("testcluster: serve logs: namespace is empty")
	}
	dir := c.info.ServedLogsDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "pcsync-testcluster-logs")
	}
	dir = filepath.Join(dir, namespace)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("testcluster: serve logs: %w", err)
	}
	f, err := os.CreateTemp(dir, "log-*.cri")
	if err != nil {
		return nil, fmt.Errorf("testcluster: serve logs: %w", err)
	}
	_ = f.Close()
	src := &LogSource{path: f.Name()}
	if len(lines) > 0 {
		if err := src.Append(lines...); err != nil {
			return nil, fmt.Errorf("testcluster: serve logs: %w", err)
		}
	}
	spec := map[string]any{
		"logs": []any{map[string]any{"logsFile": src.path, "follow": true}},
	}
	if len(podNames) == 0 {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kwok.x-k8s.io/v1alpha1",
			"kind":       "ClusterLogs",
			"metadata":   map[string]any{"name": clusterLogsName(namespace)},
			"spec": mergeMaps(spec, map[string]any{
				"selector": map[string]any{"matchNamespaces": []any{namespace}},
			}),
		}}
		if err := c.putLogs(ctx, c.dyn.Resource(clusterLogsGVR), u); err != nil {
			return nil, fmt.Errorf("testcluster: serve logs of namespace %s: %w", namespace, err)
		}
		return src, nil
	}
	for _, pod := range podNames {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kwok.x-k8s.io/v1alpha1",
			"kind":       "Logs",
			"metadata":   map[string]any{"name": pod, "namespace": namespace},
			"spec":       spec,
		}}
		if err := c.putLogs(ctx, c.dyn.Resource(logsGVR).Namespace(namespace), u); err != nil {
			return nil, fmt.Errorf("testcluster: serve logs of pod %s/%s: %w", namespace, pod, err)
		}
	}
	return src, nil
}

// putLogs creates or replaces a (Cluster)Logs object.
func (c *Cluster) putLogs(ctx context.Context, ri interface {
	Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
	Update(context.Context, *unstructured.Unstructured, metav1.UpdateOptions, ...string) (*unstructured.Unstructured, error)
}, u *unstructured.Unstructured) error {
	_, err := ri.Create(ctx, u, metav1.CreateOptions{})
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return err
	}
	old, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	u.SetResourceVersion(old.GetResourceVersion())
	_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
	return err
}

func clusterLogsName(namespace string) string { return "pcsync-ns-" + namespace }

// deleteClusterLogs removes the namespace rule ServeLogs may have created.
func (c *Cluster) deleteClusterLogs(ctx context.Context, namespace string) error {
	err := c.dyn.Resource(clusterLogsGVR).Delete(ctx, clusterLogsName(namespace), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ClusterLogs %s: %w", clusterLogsName(namespace), err)
	}
	return nil
}

func mergeMaps(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
