package inject

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkGitClone: git clone of a 50 MB repository (50 files of 1 MiB
// of random bytes) from the GitHub stand-in on loopback, through the
// route (the run's token, git's config as agentenv gives it) against
// straight to the stand-in over TLS with the token: what the route itself
// costs, without a cluster's network between: the clones' time, and the
// CPU of the clients, the stand-in and the route together. The real
// node's figure is test/realnode's BenchmarkGitClone.
func BenchmarkGitClone(b *testing.B) {
	up := newGitHubStandIn(b)
	dir := b.TempDir()
	work := filepath.Join(dir, "work")
	runGit(b, dir, "init", "-q", "-b", "main", work)
	raw := make([]byte, 1<<20)
	for i := range 50 {
		_, _ = rand.Read(raw)
		if err := os.WriteFile(filepath.Join(work, fmt.Sprintf("%02d.bin", i)), raw, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	runGit(b, work, "add", "-A")
	runGit(b, work, "-c", "user.name=a", "-c", "user.email=a@x.invalid", "commit", "-qm", "data")
	runGit(b, work, "push", "-q", up.bare, "main")
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.srv.Certificate().Raw}), 0o644); err != nil {
		b.Fatal(err)
	}
	route, token, _, _ := gitHubRoute(b, up)
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + ghToken))
	modes := map[string][]string{
		"route": gitEnv(dir, route, up.srv.URL, token),
		"straight": append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
			"GIT_SSL_CAINFO="+ca, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+basic),
	}
	// The two alternate, the one that goes first too, so that a drift of
	// the machine's load hits both.
	times, cpu := map[string][]float64{}, map[string]time.Duration{}
	for i := range b.N {
		order := []string{"route", "straight"}
		if i%2 == 1 {
			order = []string{"straight", "route"}
		}
		for _, mode := range order {
			into := filepath.Join(dir, fmt.Sprintf("%s-%d", mode, i))
			cmd := exec.Command("git", "clone", "-q", up.srv.URL+"/acme/repo.git", into)
			cmd.Env = modes[mode]
			start, cpu0 := time.Now(), cpuTime()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("git clone %s: %v\n%s", mode, err, out)
			}
			times[mode] = append(times[mode], float64(time.Since(start).Milliseconds()))
			cpu[mode] += cpuTime() - cpu0
			_ = os.RemoveAll(into)
		}
	}
	r, s := median(times["route"]), median(times["straight"])
	b.ReportMetric(r, "route-p50-ms")
	b.ReportMetric(s, "straight-p50-ms")
	b.ReportMetric(r/s, "ratio")
	// CPU, which the machine's load does not change as it does time: the
	// route's own work is the difference.
	b.ReportMetric(float64(cpu["route"].Milliseconds())/float64(b.N), "route-cpu-ms")
	b.ReportMetric(float64(cpu["straight"].Milliseconds())/float64(b.N), "straight-cpu-ms")
	b.ReportMetric(float64(cpu["route"])/float64(cpu["straight"]), "cpu-ratio")
}

// cpuTime is the CPU time of this process (the route, the stand-in's TLS
// and HTTP) and of its children waited for (git clone, git
// http-backend).
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
