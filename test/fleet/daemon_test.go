//go:build integration

package fleet

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// daemon is a `pcsync daemon` process the benchmark started.
type daemon struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	addr   string
	exited chan struct{}
}

func (d *daemon) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.Write(p)
}

func (d *daemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

var listenAddr = regexp.MustCompile(`msg="serving /metrics, /healthz and /readyz" address=(\S+)`)

// buildPcsync builds ./cmd/pcsync into a temporary directory.
func buildPcsync(b testing.TB) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "pcsync")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/pcsync/pcsync/cmd/pcsync").CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/pcsync: %v\n%s", err, out)
	}
	return bin
}

// startDaemon starts `bin daemon args… --kubeconfig kubeconfig` and returns
// once it serves /metrics; stop ends it.
func startDaemon(b testing.TB, bin, kubeconfig string, args ...string) *daemon {
	b.Helper()
	d := &daemon{cmd: exec.Command(bin, append(append([]string{"daemon"}, args...), "--kubeconfig", kubeconfig)...),
		exited: make(chan struct{})}
	d.cmd.Stdout, d.cmd.Stderr = d, d
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	b.Cleanup(d.stop)
	waitFor(b, time.Minute, "the daemon's metrics address", d, func() bool {
		if m := listenAddr.FindStringSubmatch(d.log()); m != nil {
			d.addr = m[1]
			return true
		}
		return false
	})
	return d
}

// stop sends SIGTERM, and SIGKILL after 30 s.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// scrape reads the daemon's /metrics once, a line each.
func (d *daemon) scrape(b testing.TB) []string {
	b.Helper()
	resp, err := http.Get("http://" + d.addr + "/metrics")
	if err != nil {
		b.Fatalf("scrape the daemon: %v", err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// metric scrapes the daemon once and sums the samples named name.
// extraFlags are the daemon's --profiling when -fleet-heap asks for its
// heap profiles, and its --render-cache with -fleet-render-cache.
func extraFlags() []string {
	var out []string
	if *fleetHeap != "" {
		out = append(out, "--profiling")
	}
	if *fleetCache {
		out = append(out, "--render-cache")
	}
	return out
}

// heapProfile writes the daemon's heap profile (after a collection) to
// path.
func (d *daemon) heapProfile(b testing.TB, path string) {
	b.Helper()
	resp, err := http.Get("http://" + d.addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("heap profile: %v (status %d)", err, resp.StatusCode)
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		b.Fatal(err)
	}
}

func (d *daemon) metric(b testing.TB, name string) float64 { return sum(d.scrape(b), name) }

// sum adds up the samples of lines named name whose line holds every one
// of labels (each as `key="value"`).
func sum(lines []string, name string, labels ...string) float64 {
	total := 0.0
	for _, line := range lines {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") ||
			slices.ContainsFunc(labels, func(l string) bool { return !strings.Contains(line, l) }) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += v
		}
	}
	return total
}

// requests is how many requests the daemon has sent to the API server, and
// how many of them wrote (POST, PUT, PATCH, DELETE), from one scrape.
func (d *daemon) requests(b testing.TB) (all, writes float64) {
	b.Helper()
	lines := d.scrape(b)
	all = sum(lines, "pcsync_kube_api_requests_total")
	for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		writes += sum(lines, "pcsync_kube_api_requests_total", `verb="`+verb+`"`)
	}
	return all, writes
}

// usage is the process's resident memory and CPU time so far, from /proc.
func (d *daemon) usage(b testing.TB) (rss int64, cpu time.Duration) {
	b.Helper()
	pid := strconv.Itoa(d.cmd.Process.Pid)
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			rss = kb << 10
		}
	}
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return rss, time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// waitFor polls cond every 50 ms until it holds, or fails after within with
// the daemon's log.
func waitFor(b testing.TB, within time.Duration, what string, d *daemon, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("%s: not after %s; daemon log:\n%s", what, within, tail(d.log(), 6000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
