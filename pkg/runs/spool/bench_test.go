package spool

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/localexec"
)

// benchAgent is a trivial Claude: it reads the prompt and prints one
// result line. It runs under the real run shim (the test binary).
const benchAgent = `cat >/dev/null; echo '{"type":"system","subtype":"init","session_id":"s-1","model":"m"}'; echo '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"ok","session_id":"s-1","total_cost_usd":0,"usage":{"input_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}'`

// BenchmarkLocalExecutor1000 drops 1,000 requests at once (hidden temp
// file, then rename) into the spool of a running daemon with the local
// executor and a trivial agent (4 agents, concurrency 50 each), and waits
// for every result. It reports, over the 1,000 runs, the time from the
// request's rename to its process start and to its result file, at the
// 50th and 99th percentile, and the daemon's peak RSS (the test process,
// which is the daemon; agents and shims are separate processes), and the
// CPU time per run of the daemon and of the shim and agent processes: the
// latencies depend on how busy the machine is, the CPU times much less.
func BenchmarkLocalExecutor1000(b *testing.B) {
	const n, agents, concurrency = 1000, 4, 50
	for range b.N {
		dir := b.TempDir()
		spool, cfg := filepath.Join(dir, "spool"), filepath.Join(dir, "config")
		for _, d := range []string{spool, cfg} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		var list strings.Builder
		for i := range agents {
			fmt.Fprintf(&list, "\n  - {name: agent-%d, adapter: claude_local, concurrency: %d}", i, concurrency)
		}
		doc := fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata: {name: bench}
spec:
  adapters:
    claude_local:
      command: ["/bin/sh", "-c", %q, "agent"]
---
apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: acme}
spec:
  id: bench
  agents:%s
`, benchAgent, list.String())
		if err := os.WriteFile(filepath.Join(cfg, "fleet.yaml"), []byte(doc), 0o644); err != nil {
			b.Fatal(err)
		}
		m, err := config.Load(context.Background(), cfg, config.LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		exec, err := localexec.New(localexec.Options{StateDir: runs.DefaultStateDir(spool), Shim: []string{os.Args[0], localexec.ShimArg},
			Environ: []string{"PATH=" + os.Getenv("PATH")}, PollInterval: 50 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		var finished atomic.Int64
		done := make(chan struct{})
		opts := DefaultOptions(spool)
		opts.Logger = slog.New(slog.DiscardHandler)
		opts.Observe = func(e Event) {
			if e.Kind == EventFinished && finished.Add(1) == n {
				close(done)
			}
		}
		d, err := New(m, exec, opts)
		if err != nil {
			b.Fatal(err)
		}
		resetPeakRSS()
		selfBefore, childBefore := cpuTime(syscall.RUSAGE_SELF), cpuTime(syscall.RUSAGE_CHILDREN)
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() { stopped <- d.Run(ctx) }()

		created := make([]time.Time, n)
		b.StartTimer()
		for i := range n {
			name := fmt.Sprintf("run-%04d", i)
			body := fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: acme\nagent: agent-%d\nprompt: benchmark %d\n", i%agents, i)
			tmp := filepath.Join(spool, "."+name+".tmp")
			if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(spool, name+".yaml")); err != nil {
				b.Fatal(err)
			}
			created[i] = time.Now()
		}
		select {
		case <-done:
		case <-time.After(10 * time.Minute):
			b.Fatalf("only %d of %d runs finished", finished.Load(), n)
		}
		b.StopTimer()
		selfCPU, childCPU := cpuTime(syscall.RUSAGE_SELF)-selfBefore, cpuTime(syscall.RUSAGE_CHILDREN)-childBefore
		cancel()
		if err := <-stopped; err != nil {
			b.Fatal(err)
		}
		var toStart, toResult []float64
		for i := range n {
			name := fmt.Sprintf("run-%04d", i)
			p := runs.Paths{Spool: spool, Name: name}.Result()
			r, err := result.Read(p)
			if err != nil {
				b.Fatal(err)
			}
			if r.Status != result.StatusSucceeded || r.StartedAt == nil {
				b.Fatalf("%s: %s %v", name, r.Status, deref(r.ErrorMessage))
			}
			fi, err := os.Stat(p)
			if err != nil {
				b.Fatal(err)
			}
			toStart = append(toStart, ms(r.StartedAt.Sub(created[i])))
			toResult = append(toResult, ms(fi.ModTime().Sub(created[i])))
		}
		b.ReportMetric(percentile(toStart, 50), "start-p50-ms")
		b.ReportMetric(percentile(toStart, 99), "start-p99-ms")
		b.ReportMetric(percentile(toResult, 50), "result-p50-ms")
		b.ReportMetric(percentile(toResult, 99), "result-p99-ms")
		b.ReportMetric(peakRSSMiB(), "peak-rss-MiB")
		b.ReportMetric(ms(selfCPU)/n, "daemon-cpu-ms/run")
		b.ReportMetric(ms(childCPU)/n, "shim+agent-cpu-ms/run")
	}
}

// cpuTime is the user and system CPU time of this process (RUSAGE_SELF)
// or of its reaped children and their descendants (RUSAGE_CHILDREN).
func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func percentile(v []float64, p int) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(min(i, len(s))-1, 0)]
}

// resetPeakRSS resets the kernel's peak RSS mark of this process.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSSMiB reads VmHWM, the peak resident set of this process.
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}
