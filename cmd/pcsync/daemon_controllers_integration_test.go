//go:build integration

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/daemon"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/health"
)

// TestDaemonControllersCountedAndJoined: a daemon with both roads to the
// cluster runs its shared controllers on the controller manager (/readyz
// names them, in their order), every workqueue it runs exports client-go's
// workqueue metrics under its name, and when it stops, every informer and
// controller worker it started has returned before the command does.
func TestDaemonControllersCountedAndJoined(t *testing.T) {
	c := testcluster.Get(t)
	before := controllerGoroutines()
	d := startKubeDaemon(t, c.KubeconfigPath(), c.Namespace(t, "controllers", nil))

	metrics := httpBody(t, d.metrics+"/metrics")
	var missing []string
	for _, q := range []string{"tokensync", "proxy-scale", "kubeexec_runs", "sandbox-pools"} {
		for _, m := range []string{"depth", "adds_total", "retries_total", "queue_duration_seconds_count", "work_duration_seconds_count"} {
			if series := `pcsync_workqueue_` + m + `{name="` + q + `"}`; !strings.Contains(metrics, series) {
				missing = append(missing, series)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("/metrics lacks %s", strings.Join(missing, ", "))
	}
	var rep health.Report
	if err := json.Unmarshal([]byte(httpBody(t, d.metrics+"/readyz")), &rep); err != nil {
		t.Fatal(err)
	}
	var got health.Condition
	for _, cond := range rep.Conditions {
		if cond.Type == daemon.CondControllers {
			got = cond
		}
	}
	want := "True Running pods, proxy-addresses, credential-tokens, proxy-scale, proxy-spend, image-preflight running"
	if s := string(got.Status) + " " + got.Reason + " " + got.Message; s != want {
		t.Errorf("/readyz condition %s: %q, want %q", daemon.CondControllers, s, want)
	}

	e := d.stop(t)
	if e.code != 0 {
		t.Errorf("the daemon exited %d:\n%s", e.code, e.stderr)
	}
	if diff := cmp.Diff(map[string]int{}, leaked(before, controllerGoroutines())); diff != "" {
		t.Errorf("goroutines the daemon left running after it returned, by frame (-want +got):\n%s", diff)
	}
}

// joined are the frames of goroutines the daemon must join: an informer's
// (client-go's shared informer and its reflector) and pcsync's own, but
// for the test harnesses'. The frame of client-go's controller that closes
// its queue once the informer's context ended is not joined by client-go
// itself (it ends right after).
var (
	joined    = regexp.MustCompile(`^(k8s\.io/client-go/tools/cache\.\(\*(sharedIndexInformer|Reflector|processorListener)\)\.\S+|github\.com/pcsync/pcsync/(pkg|internal/(daemon|lib))/\S+)\(`)
	notJoined = regexp.MustCompile(`^k8s\.io/client-go/tools/cache\.\(\*controller\)\.RunWithContext\.func1\(`)
)

// controllerGoroutines counts the goroutines running now by the first
// frame of theirs that joined matches.
func controllerGoroutines() map[string]int {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	out := map[string]int{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, line := range strings.Split(g, "\n") {
			if notJoined.MatchString(line) {
				break
			}
			if m := joined.FindStringSubmatch(line); m != nil {
				out[strings.TrimSuffix(m[0], "(")]++
				break
			}
		}
	}
	return out
}

// leaked are the frames more goroutines run in after than before.
func leaked(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for f, n := range after {
		if n > before[f] {
			out[f] = n - before[f]
		}
	}
	return out
}

// httpBody is the body of a GET.
func httpBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
