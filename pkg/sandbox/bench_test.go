//go:build integration

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/kube"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// BenchmarkSandbox measures pcsync's sandbox provider beside its peers, on
// the project's control plane (kwok runs each exec as a local process, so
// the figures are the API server's and the transport's, not a container
// runtime's):
//
//   - one execute of `true`: through the daemon's API on its Unix socket
//     (what the plugin sends) and the lease's one exec stream, against a
//     bare client-go exec per command (a new request each) and `kubectl
//     exec`;
//   - the Kubernetes API requests of a lease that runs 1,000 executes;
//   - 20 leases at once, each polled like the callback bridge (10 executes
//     a second for 5 s): p50/p99 execute latency, the daemon's CPU and RSS;
//   - acquire → ready against a bare pod create + watch until Running.
func BenchmarkSandbox(b *testing.B) {
	for range b.N {
		benchSandbox(b)
	}
}

func benchSandbox(b *testing.B) {
	e := newEnv(b, envOptions{})
	var counter kube.RequestCounter
	cfg := e.c.RESTConfig()
	counter.Instrument(cfg)
	o := e.m.opts
	e.m.Close()
	o.Logger = quietLogger()
	m, err := New(context.Background(), cfg, func() *config.Model { return e.model }, o)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	sock := filepath.Join(e.hostDir, "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = ServeAPI(ctx, m, sock) }()
	api := newAPIClient(sock)
	envCfg := map[string]any{"provider": "pcsync", "company": e.slug()}
	waitSocket(b, sock)

	// Acquire → ready, beside a bare pod create + watch until Running.
	var acquire, bare []time.Duration
	var leaseIDs []string
	for range 5 {
		begin := time.Now()
		var lease map[string]any
		if err := api.call("acquireLease", map[string]any{"config": envCfg, "runId": "bench", "adapterType": "claude_local"}, &lease); err != nil {
			b.Fatal(err)
		}
		acquire = append(acquire, time.Since(begin))
		leaseIDs = append(leaseIDs, lease["providerLeaseId"].(string))
		bare = append(bare, barePodRunning(b, e))
	}

	// One execute of `true`, each way; the Kubernetes API requests of a
	// whole lease (acquire, 1,000 executes, release).
	counter.Reset()
	var lease map[string]any
	if err := api.call("acquireLease", map[string]any{"config": envCfg, "runId": "bench", "adapterType": "claude_local"}, &lease); err != nil {
		b.Fatal(err)
	}
	counted := lease["providerLeaseId"].(string)
	const n = 1000
	var ours []time.Duration
	for range n {
		begin := time.Now()
		if _, err := api.execute(map[string]any{"lease": map[string]any{"providerLeaseId": counted}, "config": envCfg, "command": "true"}); err != nil {
			b.Fatal(err)
		}
		ours = append(ours, time.Since(begin))
	}
	var receipt map[string]any
	if err := api.call("releaseLease", map[string]any{"providerLeaseId": counted, "config": envCfg}, &receipt); err != nil {
		b.Fatal(err)
	}
	requests := counter.Reads() + counter.Mutations()
	id := leaseIDs[0]
	bareExec := timeBareExec(b, e, id, 100)
	kubectl := timeKubectlExec(b, e, id, 20)

	// 20 leases polled like the bridge.
	for len(leaseIDs) < 20 {
		var lease map[string]any
		if err := api.call("acquireLease", map[string]any{"config": envCfg, "runId": "bench", "adapterType": "claude_local"}, &lease); err != nil {
			b.Fatal(err)
		}
		leaseIDs = append(leaseIDs, lease["providerLeaseId"].(string))
	}
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	begin := time.Now()
	var mu sync.Mutex
	var polled []time.Duration
	var wg sync.WaitGroup
	for _, lid := range leaseIDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for range 50 {
				<-tick.C
				t0 := time.Now()
				if _, err := api.execute(map[string]any{"lease": map[string]any{"providerLeaseId": lid}, "config": envCfg,
					"command": "sh", "args": []string{"-c", "ls -1 . >/dev/null"}}); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				polled = append(polled, time.Since(t0))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(begin)
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	rss := rssMiB(b)

	for _, lid := range leaseIDs {
		var receipt map[string]any
		if err := api.call("releaseLease", map[string]any{"providerLeaseId": lid, "config": envCfg}, &receipt); err != nil {
			b.Error(err)
		}
	}

	p50, p99 := pct(ours, 50), pct(ours, 99)
	bp50, kp50 := pct(bareExec, 50), pct(kubectl, 50)
	fmt.Fprintf(os.Stderr, `
BenchmarkSandbox (kwok node; load %s)
  execute of true           p50 %6.2f ms  p99 %6.2f ms   (pcsync: socket API → one exec stream)
  bare client-go exec       p50 %6.2f ms  p99 %6.2f ms   ratio pcsync/bare p50 %.2f
  kubectl exec              p50 %6.2f ms  p99 %6.2f ms   ratio pcsync/kubectl p50 %.2f
  Kubernetes API requests of one lease (acquire, %d executes, release): %d
  20 leases × 10 executes/s for 5 s: %d executes, p50 %.2f ms p99 %.2f ms; test process CPU %.0f%% of one core, RSS %.0f MiB
  acquire → ready           p50 %6.0f ms   bare pod create + watch Running p50 %6.0f ms   ratio %.2f
`, loadAvg(), ms(p50), ms(p99), ms(bp50), ms(pct(bareExec, 99)), ms(p50)/ms(bp50), ms(kp50), ms(pct(kubectl, 99)), ms(p50)/ms(kp50),
		n, requests, len(polled), ms(pct(polled, 50)), ms(pct(polled, 99)), 100*cpu.Seconds()/wall.Seconds(), rss,
		ms(pct(acquire, 50)), ms(pct(bare, 50)), ms(pct(acquire, 50))/ms(pct(bare, 50)))
	b.ReportMetric(ms(p50), "exec-p50-ms")
	b.ReportMetric(ms(p50)/ms(bp50), "exec-vs-bare")
	b.ReportMetric(ms(p50)/ms(kp50), "exec-vs-kubectl")
	b.ReportMetric(float64(requests), "api-requests/lease")
	b.ReportMetric(ms(pct(polled, 99)), "poll-p99-ms")
	b.ReportMetric(ms(pct(acquire, 50))/ms(pct(bare, 50)), "acquire-vs-bare")
}

// barePodRunning creates a plain pod like a lease's (same image, no
// command server) and watches it until Running; the pod is deleted after.
func barePodRunning(b testing.TB, e *env) time.Duration {
	b.Helper()
	cs := e.c.Client()
	r := leasepod.Record{ID: leasepod.NewID(), Namespace: e.ns, Company: e.slug(), Image: e.model.Adapter("claude_local").Image, ExpiresAt: time.Now().Add(time.Hour)}
	r.SetPaths("")
	pod, err := leasepod.BuildPod(&r, e.model)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	begin := time.Now()
	created, err := cs.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := cs.CoreV1().Pods(e.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String(), ResourceVersion: created.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted && p.Status.Phase == corev1.PodRunning {
			break
		}
	}
	w.Stop()
	d := time.Since(begin)
	_ = cs.CoreV1().Pods(e.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	return d
}

// timeBareExec runs `true` in the lease pod n times, a new client-go exec
// (WebSocket, SPDY fallback) each.
func timeBareExec(b testing.TB, e *env, pod string, n int) []time.Duration {
	b.Helper()
	cs := kubernetes.NewForConfigOrDie(e.c.RESTConfig())
	var out []time.Duration
	for range n {
		begin := time.Now()
		req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.ns).Name(pod).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: leasepod.ContainerName, Command: []string{"true"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		ws, err := remotecommand.NewWebSocketExecutor(e.c.RESTConfig(), "GET", req.URL().String())
		if err != nil {
			b.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if err := ws.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
			b.Fatalf("bare exec: %v %s", err, stderr.String())
		}
		out = append(out, time.Since(begin))
	}
	return out
}

// timeKubectlExec runs `kubectl exec POD -- true` n times.
func timeKubectlExec(b testing.TB, e *env, pod string, n int) []time.Duration {
	b.Helper()
	var out []time.Duration
	for range n {
		begin := time.Now()
		cmd := exec.Command("kubectl", "--kubeconfig", e.c.KubeconfigPath(), "-n", e.ns, "exec", pod, "-c", leasepod.ContainerName, "--", "true")
		if o, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("kubectl exec: %v\n%s", err, o)
		}
		out = append(out, time.Since(begin))
	}
	return out
}

// apiClient speaks to the sandbox API as the plugin does.
type apiClient struct{ hc *http.Client }

func newAPIClient(sock string) *apiClient {
	return &apiClient{hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: 64,
	}}}
}

func (a *apiClient) post(hook string, params any) (*http.Response, error) {
	body, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	resp, err := a.hc.Post("http://pcsync/v1/hooks/"+hook, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s: %s: %s", hook, resp.Status, msg)
	}
	return resp, nil
}

func (a *apiClient) call(hook string, params, out any) error {
	resp, err := a.post(hook, params)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// execute returns the final line of an execute.
func (a *apiClient) execute(params any) (map[string]any, error) {
	resp, err := a.post("execute", params)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var line map[string]any
		if err := dec.Decode(&line); err != nil {
			return nil, fmt.Errorf("execute: no result line: %w", err)
		}
		if r, ok := line["result"].(map[string]any); ok {
			return r, nil
		}
		if e, ok := line["error"]; ok {
			return nil, fmt.Errorf("execute: %v", e)
		}
	}
}

// executeLines returns every line of an execute, up to its result line.
func (a *apiClient) executeLines(params any) ([]map[string]any, error) {
	resp, err := a.post("execute", params)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	var lines []map[string]any
	for {
		var line map[string]any
		if err := dec.Decode(&line); err != nil {
			return lines, fmt.Errorf("execute: no result line: %w", err)
		}
		lines = append(lines, line)
		if _, ok := line["result"]; ok {
			return lines, nil
		}
		if e, ok := line["error"]; ok {
			return lines, fmt.Errorf("execute: %v", e)
		}
	}
}

func waitSocket(b testing.TB, sock string) {
	b.Helper()
	for range 200 {
		if c, err := net.Dial("unix", sock); err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("the sandbox API does not listen on %s", sock)
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func rssMiB(b testing.TB) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(v), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
