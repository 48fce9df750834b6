//go:build integration

package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/config"
)

// Rounds of the proxy benchmark; the contenders alternate within each
// round, and the one that goes first alternates from round to round, so
// that a drift of the machine's load hits both.
const (
	proxyRequestRounds  = 5  // × proxyRequestsPerRnd requests each
	proxyRequestsPerRnd = 20 // proxyRequestRounds × this = 100
	proxyDownloadRounds = 12
	proxyDropRounds     = 10
)

// BenchmarkProxy: a company in egress mode proxy against its peer, a
// company in mode standard whose allowCidrs reach the same target
// directly; both with the NetworkPolicy enforcer on the real node, the
// clients in their agents' pods, the target an HTTPS server in the test's
// network namespace (203.0.113.10:443). Figures: 100 small HTTPS requests
// (each a new connection) p50/p99, a 50 MB download, the proxy's RSS idle
// and under 50 concurrent connections, and a Job's spool drop → pod
// Running with the proxy mode's env against without.
func BenchmarkProxy(b *testing.B) {
	e := newProxyBenchEnv(b)
	ctx := context.Background()
	idle := e.proxyRSS(ctx, b)
	for range b.N {
		cpu0, rcpu0 := e.proxyCPU(ctx, b, proxyContainer), e.proxyCPU(ctx, b, relayContainer)
		t := e.alternate(ctx, b, proxyRequestRounds, "small", strconv.Itoa(proxyRequestsPerRnd))
		cpu1, rcpu1 := e.proxyCPU(ctx, b, proxyContainer), e.proxyCPU(ctx, b, relayContainer)
		b.Run("https-100", func(b *testing.B) {
			reportP(b, "100 small HTTPS requests (new connection each) through the proxy vs direct", t["proxy"], t["direct"])
			reportFloor(b, t["proxy"], t["relay"], t["direct"])
			units := float64(len(t["proxy"]) + proxyRequestRounds) // and one warm-up a round
			reportCPU(b, "proxy", cpu0, cpu1, units, "req")
			reportCPU(b, "relay", rcpu0, rcpu1, units, "req")
		})
		t = e.alternate(ctx, b, proxyDownloadRounds, "big", "")
		cpu2, rcpu2 := e.proxyCPU(ctx, b, proxyContainer), e.proxyCPU(ctx, b, relayContainer)
		b.Run("download-50MB", func(b *testing.B) {
			reportP(b, "a 50 MB HTTPS download through the proxy vs direct", t["proxy"], t["direct"])
			reportFloor(b, t["proxy"], t["relay"], t["direct"])
			reportCPU(b, "proxy", cpu1, cpu2, float64(len(t["proxy"])), "download")
			reportCPU(b, "relay", rcpu1, rcpu2, float64(len(t["proxy"])), "download")
		})
		under := e.proxyRSSUnder(ctx, b)
		after := e.proxyRSS(ctx, b)
		b.Run("proxy-rss", func(b *testing.B) {
			b.ReportMetric(idle, "idle-MiB")
			b.ReportMetric(under, "50conn-MiB")
			b.ReportMetric(after, "idle-after-MiB")
			b.Logf("the proxy container's RSS: idle %.1f MiB, under 50 concurrent tunnels %.1f MiB, idle after the benchmark %.1f MiB", idle, under, after)
		})
		px, dx := e.dropToRunning(b)
		b.Run("drop-to-running", func(b *testing.B) {
			reportP(b, "spool drop → Job's pod Running, proxy mode's env vs standard mode (no proxy env)", px, dx)
		})
	}
}

// reportFloor reports the bare relay's p50 (the floor of any proxy on the
// proxy's hops: the same pod, Service, policies and CONNECT) beside the
// proxy's and the direct peer's: what the hop costs, and what the proxy
// adds to it.
func reportFloor(b *testing.B, px, rx, dx []time.Duration) {
	b.Helper()
	o, r, d := p50(px), p50(rx), p50(dx)
	b.ReportMetric(r, "relay-p50-ms")
	b.ReportMetric(r-d, "relay-delta-ms")
	b.ReportMetric(o-r, "proxy-over-relay-ms")
	b.Logf("the floor, a bare CONNECT relay on the same hops: p50 %.2f ms (+%.2f ms over direct, %.2f×); the proxy adds %.2f ms (%.2f×) to it; p99 %.2f ms",
		r, r-d, r/d, o-r, o/r, p99(rx))
}

// reportP reports the p50 and p99 of the proxy's and the direct peer's
// samples, and their ratios and p50 difference.
func reportP(b *testing.B, what string, px, dx []time.Duration) {
	b.Helper()
	o, p := p50(px), p50(dx)
	b.ReportMetric(o, "proxy-p50-ms")
	b.ReportMetric(p, "direct-p50-ms")
	b.ReportMetric(o-p, "p50-delta-ms")
	b.ReportMetric(o/p, "p50-ratio")
	o99, p99v := p99(px), p99(dx)
	b.ReportMetric(o99, "proxy-p99-ms")
	b.ReportMetric(p99v, "direct-p99-ms")
	b.Logf("%s: p50 %.2f ms vs %.2f ms (+%.2f ms, %.2f×), p99 %.2f ms vs %.2f ms (%d samples each; load %s)",
		what, o, p, o-p, o/p, o99, p99v, len(px), loadavg())
}

// benchModes are the client's contenders: the proxy, the bare relay
// beside it, and the direct peer.
var benchModes = []string{"proxy", "relay", "direct"}

// alternate runs the client op for each contender, rounds times, and
// returns each one's times. The order rotates from round to round, so
// that a drift of the machine's load hits all.
func (e *proxyBenchEnv) alternate(ctx context.Context, b *testing.B, rounds int, op, n string) map[string][]time.Duration {
	b.Helper()
	out := map[string][]time.Duration{}
	for r := range rounds {
		for k := range benchModes {
			mode := benchModes[(r+k)%len(benchModes)]
			pod := e.clientPX
			if mode == "direct" {
				pod = e.clientDX
			}
			ds, err := e.client(ctx, pod, mode, op, n)
			if err != nil {
				b.Fatal(err)
			}
			out[mode] = append(out[mode], ds...)
		}
	}
	return out
}

// dropToRunning drops a run of each company, alternately, and measures
// the drop → its Job's pod Running (the namespace's watch), then cancels
// it.
func (e *proxyBenchEnv) dropToRunning(b *testing.B) (px, dx []time.Duration) {
	b.Helper()
	watchPX, watchDX := podsRunning(b, e.c, e.nsPX), podsRunning(b, e.c, e.nsDX)
	for r := range proxyDropRounds {
		for k := range 2 {
			proxy := (r+k)%2 == 0
			slug, w, out, name := e.slugDX, watchDX, &dx, fmt.Sprintf("drop-dx-%d", r)
			if proxy {
				slug, w, out, name = e.slugPX, watchPX, &px, fmt.Sprintf("drop-px-%d", r)
			}
			begin := time.Now()
			e.drop(b, slug, name)
			pt := w.wait(b, agentpod.LabelRunID, name)
			*out = append(*out, pt.running.Sub(begin))
			e.cancelRun(b, name)
		}
	}
	return px, dx
}

// proxyRSSUnder opens 50 tunnels at once from the proxy company's client
// (GET /hold, which the server holds until all 50 are in flight) and
// reads the proxy's RSS while they are open.
func (e *proxyBenchEnv) proxyRSSUnder(ctx context.Context, b *testing.B) float64 {
	b.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := e.client(ctx, e.clientPX, "proxy", "hold", strconv.Itoa(int(e.holds.n)))
		done <- err
	}()
	select {
	case <-e.holds.reached:
	case err := <-done:
		b.Fatalf("the 50 held requests ended before all were in flight: %v", err)
	case <-time.After(time.Minute):
		b.Fatalf("only %d of 50 held requests in flight after a minute", e.holds.active.Load())
	}
	rss := e.proxyRSS(ctx, b)
	e.holds.Release()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return rss
}

// The proxy pod's containers: pcsync's proxy, and the bench's relay.
const (
	proxyContainer = "egress-proxy"
	relayContainer = "relay"
)

// proxyProcs are the /proc directories of the host's processes whose
// cgroup names the ID of the proxy pod's container.
func (e *proxyBenchEnv) proxyProcs(ctx context.Context, b *testing.B, container string) []string {
	b.Helper()
	pod, err := e.c.Client().CoreV1().Pods(e.nsPX).Get(ctx, e.proxyPod.Name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	id := ""
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == container {
			id = st.ContainerID
		}
	}
	if id == "" {
		b.Fatalf("pod %s/%s: no container ID for %s", pod.Namespace, pod.Name, container)
	}
	id = id[strings.Index(id, "://")+3:]
	cgs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	var procs []string
	for _, cg := range cgs {
		if raw, err := os.ReadFile(cg); err == nil && strings.Contains(string(raw), id) {
			procs = append(procs, filepath.Dir(cg))
		}
	}
	if len(procs) == 0 {
		b.Fatalf("no host process in the cgroup of container %s (pod %s/%s)", id, pod.Namespace, pod.Name)
	}
	return procs
}

// proxyRSS is the proxy container's resident memory in MiB: the sum of
// its host processes' VmRSS.
func (e *proxyBenchEnv) proxyRSS(ctx context.Context, b *testing.B) float64 {
	b.Helper()
	var kb int64
	for _, proc := range e.proxyProcs(ctx, b, proxyContainer) {
		status, err := os.ReadFile(filepath.Join(proc, "status"))
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				kb += v
			}
		}
	}
	return float64(kb) / 1024
}

// proxyCPU is the proxy container's CPU time and its CFS throttling
// (cgroup v1: cpuacct.usage, cpu.stat's nr_throttled and throttled_time),
// from the cgroup its first process names.
type proxyCPU struct{ usage, throttled, throttledTime int64 }

func (e *proxyBenchEnv) proxyCPU(ctx context.Context, b *testing.B, container string) proxyCPU {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join(e.proxyProcs(ctx, b, container)[0], "cgroup"))
	if err != nil {
		b.Fatal(err)
	}
	var c proxyCPU
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, ctl := range strings.Split(f[1], ",") {
			switch ctl {
			case "cpuacct":
				c.usage = readInt(b, filepath.Join(cgroupV1Dir("cpuacct"), f[2], "cpuacct.usage"))
			case "cpu":
				stat, err := os.ReadFile(filepath.Join(cgroupV1Dir("cpu"), f[2], "cpu.stat"))
				if err != nil {
					b.Fatal(err)
				}
				for _, l := range strings.Split(string(stat), "\n") {
					if kv := strings.Fields(l); len(kv) == 2 {
						v, _ := strconv.ParseInt(kv[1], 10, 64)
						switch kv[0] {
						case "nr_throttled":
							c.throttled = v
						case "throttled_time":
							c.throttledTime = v
						}
					}
				}
			}
		}
	}
	return c
}

func readInt(b *testing.B, path string) int64 {
	b.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		b.Fatalf("%s: %v", path, err)
	}
	return v
}

// reportCPU reports a container's CPU time and CFS throttling between two
// readings, per unit of work (both containers' CPU limit is the proxy's).
func reportCPU(b *testing.B, who string, before, after proxyCPU, units float64, unit string) {
	b.Helper()
	ms := float64(after.usage-before.usage) / 1e6
	b.ReportMetric(ms/units, who+"-cpu-ms/"+unit)
	b.ReportMetric(float64(after.throttled-before.throttled), who+"-throttled-periods")
	b.ReportMetric(float64(after.throttledTime-before.throttledTime)/1e6, who+"-throttled-ms")
	b.Logf("the %s's CPU over the phase: %.1f ms (%.2f ms per %s), throttled in %d periods for %.1f ms (its CPU limit: %s)",
		who, ms, ms/units, unit, after.throttled-before.throttled, float64(after.throttledTime-before.throttledTime)/1e6, *config.EgressProxyResources().Limits.CPU)
}
