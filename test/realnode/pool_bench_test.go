//go:build integration

package realnode

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox"
)

// BenchmarkPool, side by side in one run on the real node: acquire → ready
// with a warm pool's member against the same acquire cold; a burst of 20
// acquires with a pool of 5 against none (p50 and p99); and the pool's
// cost: the CPU and memory its idle members hold, and the API requests of
// one claim.
func BenchmarkPool(b *testing.B) {
	p := pushImages(b)
	e := newPoolEnv(b, p, "  quota: {pods: 60, limitsEphemeralStorage: 1Ti}\n  sandbox:\n    warmPool:\n      - {adapterType: claude_local, count: 5, agent: pinned}\n")
	var requests atomic.Int64
	warmM := e.manager(b, func(o *sandbox.Options) { o.Logger = discardLogger() })
	coldM := e.manager(b, func(o *sandbox.Options) {
		o.StateDir, o.Pool.Disabled, o.Logger = b.TempDir(), true, discardLogger()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	one := func(m *sandbox.Manager) time.Duration {
		began := time.Now()
		info, err := e.acquire(ctx, m, "")
		took := time.Since(began)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Release(ctx, sandbox.ReleaseParams{ID: info.ID, Cancel: true}); err != nil {
			b.Fatal(err)
		}
		return took
	}
	var warm, cold []time.Duration
	for range samples {
		e.waitPool(b, warmM, "5 Ready members", func(ready, _ int) bool { return ready == 5 })
		warm = append(warm, one(warmM))
		cold = append(cold, one(coldM))
	}
	report(b, "acquire-ready-warm-vs-cold", "acquire → ready, a warm member vs a cold start", warm, cold)

	burst := func(m *sandbox.Manager) []time.Duration {
		ds := make([]time.Duration, 20)
		ids := make([]string, 20)
		var wg sync.WaitGroup
		for i := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				began := time.Now()
				info, err := e.acquire(ctx, m, "")
				ds[i], ids[i] = time.Since(began), info.ID
				if err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := m.Release(ctx, sandbox.ReleaseParams{ID: id, Cancel: true}); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		return ds
	}
	// Each burst starts quiet: the last one's pods gone, the pool whole.
	// Three contenders, their order rotated each round: the pool as
	// shipped (its refills wait while the burst's cold starts are in
	// flight), the pool refilling at once (ColdHold of 1 ns), and no pool.
	// A pool's daemon is started for its burst (it adopts the members) and
	// closed after it: two would both keep the one pool.
	warmM.Close()
	poolM := func(hold time.Duration) *sandbox.Manager {
		return e.manager(b, func(o *sandbox.Options) { o.Logger, o.Pool.ColdHold = discardLogger(), hold })
	}
	bursts := map[string][]time.Duration{}
	contenders := []string{"pool", "pool-no-hold", "none"}
	for round := range 2 {
		for k := range contenders {
			who := contenders[(k+round)%len(contenders)]
			m := coldM
			switch who {
			case "pool":
				m = poolM(0)
			case "pool-no-hold":
				m = poolM(time.Nanosecond)
			}
			e.waitQuiet(b, m, m != coldM)
			bursts[who] = append(bursts[who], burst(m)...)
			if m != coldM {
				m.Close()
			}
		}
	}
	warmM = poolM(0)
	b.Run("burst-20-pool-5-vs-none", func(b *testing.B) {
		for _, who := range contenders {
			b.ReportMetric(p50(bursts[who]), who+"-p50-ms")
			b.ReportMetric(p99(bursts[who]), who+"-p99-ms")
		}
		b.Logf("20 acquires at once, 2 rounds each: pool of 5 p50 %.0f ms p99 %.0f ms; the same pool refilling at once p50 %.0f ms p99 %.0f ms; no pool p50 %.0f ms p99 %.0f ms (load %s)",
			p50(bursts["pool"]), p99(bursts["pool"]), p50(bursts["pool-no-hold"]), p99(bursts["pool-no-hold"]),
			p50(bursts["none"]), p99(bursts["none"]), loadavg())
	})

	// The pool's cost: its idle members' CPU over 10 s and memory, from
	// their cgroups on the node.
	e.waitPool(b, warmM, "5 Ready members", func(ready, _ int) bool { return ready == 5 })
	time.Sleep(2 * time.Second)
	var uids []string
	for _, pod := range e.members(b) {
		uids = append(uids, string(pod.UID))
	}
	cpu0, mem0 := podCgroups(b, uids)
	time.Sleep(10 * time.Second)
	cpu1, mem1 := podCgroups(b, uids)
	b.Run("pool-5-idle-cost", func(b *testing.B) {
		millicores := float64(cpu1-cpu0) / 1e6 / 10 // ns over 10 s → millicores
		b.ReportMetric(millicores, "idle-millicores")
		b.ReportMetric(float64(mem0+mem1)/2/(1<<20), "idle-MiB")
		b.Logf("5 idle members: %.2f millicores, %.1f MiB (cgroup usage; load %s)", millicores, float64(mem0+mem1)/2/(1<<20), loadavg())
	})

	// API requests of one claim: those of a daemon whose transport counts
	// them, from the acquire until the pool is whole again (the claim's
	// patch, the stream's exec, the refill's create; the member watch is
	// one long request before).
	cfg := e.c.RESTConfig()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	})
	warmM.Close()
	o := sandbox.DefaultOptions(e.stateDir)
	o.Pool.Lease.Namespace = "default" // the pools' Lease: a namespace every cluster has
	o.Agents, o.Logger = agentIDs{pinnedAgentID: "pinned"}, discardLogger()
	counted, err := sandbox.New(ctx, cfg, e.model.Load, o)
	if err != nil {
		b.Fatal(err)
	}
	defer counted.Close()
	e.waitPool(b, counted, "5 Ready members", func(ready, _ int) bool { return ready == 5 })
	time.Sleep(time.Second)
	before := requests.Load()
	info, err := e.acquire(ctx, counted, "")
	if err != nil {
		b.Fatal(err)
	}
	atAcquire := requests.Load() - before
	if _, err := counted.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "true"}, nil); err != nil {
		b.Fatal(err)
	}
	e.waitPool(b, counted, "the refill", func(ready, members int) bool { return ready == 5 && members == 5 })
	total := requests.Load() - before
	b.Run("api-requests-per-claim", func(b *testing.B) {
		b.ReportMetric(float64(atAcquire), "requests-to-ready")
		b.ReportMetric(float64(total), "requests-with-refill")
		b.Logf("one claim: %d API requests until the acquire returns, %d with the first execute and the refill", atAcquire, total)
	})
	_, _ = counted.Release(ctx, sandbox.ReleaseParams{ID: info.ID, Cancel: true})
}

func p99(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[(len(s)*99-1)/100].Microseconds()) / 1000
}

// podCgroups sums the CPU time (ns) and memory usage (bytes) of the pods
// of these UIDs, from their cgroups (v1: cpuacct and memory) on the node.
func podCgroups(b *testing.B, uids []string) (cpu, mem int64) {
	b.Helper()
	for _, uid := range uids {
		for _, c := range []struct {
			root, file string
			sum        *int64
		}{{cgroupV1Dir("cpuacct"), "cpuacct.usage", &cpu}, {cgroupV1Dir("memory"), "memory.usage_in_bytes", &mem}} {
			dir := findPodCgroup(c.root, "pod"+uid)
			if dir == "" {
				dir = findPodCgroup(c.root, "pod"+strings.ReplaceAll(uid, "-", "_"))
			}
			if dir == "" {
				b.Fatalf("no cgroup of pod %s under %s", uid, c.root)
			}
			raw, err := os.ReadFile(filepath.Join(dir, c.file))
			if err != nil {
				b.Fatal(err)
			}
			n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			*c.sum += n
		}
	}
	return cpu, mem
}

// findPodCgroup finds the directory named name under root, at most five
// levels down.
func findPodCgroup(root, name string) string {
	var found string
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil || found != "":
			return filepath.SkipDir
		case !d.IsDir():
			return nil
		}
		if strings.Count(strings.TrimPrefix(path, root), "/") > 5 {
			return filepath.SkipDir
		}
		if d.Name() == name {
			found = path
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// cgroupV1Dir is the cgroup v1 hierarchy of controller: mounted on its own
// (/sys/fs/cgroup/cpuacct) or joined with others (/sys/fs/cgroup/cpu,cpuacct).
func cgroupV1Dir(controller string) string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + controller + "*")
	for _, d := range dirs {
		for _, c := range strings.Split(filepath.Base(d), ",") {
			if c == controller {
				return d
			}
		}
	}
	return filepath.Join("/sys/fs/cgroup", controller)
}
