package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
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
// the returned LogSource. ServeLogs returns once kwok serves the file for these pods
// (it asks kwok directly), so register before the pods' logs are read. A per-pod rule
// wins over the namespace rule; a second call for the same namespace or pod replaces
// the rule. Namespace
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
		if err := c.waitKwokServes(ctx, namespace, "pcsync-logs-probe", src.path); err != nil {
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
	for _, pod := range podNames {
		if err := c.waitKwokServes(ctx, namespace, pod, src.path); err != nil {
			return nil, fmt.Errorf("testcluster: serve logs of pod %s/%s: %w", namespace, pod, err)
		}
	}
	return src, nil
}

// waitKwokServes asks kwok's kubelet API directly (it answers for any pod name, the
// pod need not exist) until it serves the file at path for namespace/pod, so that a
// rule ServeLogs created is in force when it returns. Without kwok's address (an
// attached cluster started by an older version) it returns at once.
func (c *Cluster) waitKwokServes(ctx context.Context, namespace, pod, path string) error {
	if c.info.KwokAddress == "" {
		return nil
	}
	want, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.restConfig.TLSClientConfig.CAData) {
		return fmt.Errorf("no CA certificate in the admin config")
	}
	hc := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		Timeout:   5 * time.Second,
	}
	defer hc.CloseIdleConnections()
	// The container name does not matter: the rules ServeLogs writes cover all.
	url := fmt.Sprintf("https://%s/containerLogs/%s/%s/probe", c.info.KwokAddress, namespace, pod)
	// kwok picks a new rule up from its watch: seconds on a loaded machine
	// (run 2 of a fresh machine's make test found 30 s too short).
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return poll(ctx, nil, 50*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, "", err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Sprintf("kwok answered %s: %s", resp.Status, strings.TrimSpace(string(body))), nil
		}
		if string(body) != criText(want) {
			return false, fmt.Sprintf("kwok serves %q, not (yet) %s", tail(string(body), 200), path), nil
		}
		return true, "", nil
	})
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

// criText is what a log reader receives for CRI log content: each line's text, with
// partial ("P") lines joined to the next.
func criText(data []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, " ", 4)
		if len(parts) < 3 {
			continue
		}
		text := ""
		if len(parts) == 4 {
			text = parts[3]
		}
		b.WriteString(text)
		if parts[2] != "P" {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
