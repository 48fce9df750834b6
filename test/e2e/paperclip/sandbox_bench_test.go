//go:build integration

package paperclip

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// installLocalProvider installs the benchmark's peer, a minimal sandbox
// provider that runs each execute as a local process
// (testdata/local-provider, plain ESM), with an environment of it in the
// world's company. Its SDK comes from the sandbox plugin's node_modules.
// With init, every execute runs as init's last arguments (e.g. tini -s --).
func (sw *sandboxWorld) installLocalProvider(t testing.TB, init ...string) string {
	t.Helper()
	return sw.installLocalEnv(t, localEnvOptions{Init: init})
}

// localEnvOptions shape an environment of the local-process provider.
type localEnvOptions struct {
	// Driver is the provider's driver key: "benchlocal" (the default) or
	// "benchlocal-stream", which declares incrementalSessionOutput.
	Driver string
	// Init is run with each execute as its last arguments.
	Init []string
	// Log is a file that gets one line per execute.
	Log string
}

// installLocalEnv is installLocalProvider with options.
func (sw *sandboxWorld) installLocalEnv(t testing.TB, o localEnvOptions) string {
	t.Helper()
	tl := getTools(t)
	sw.srv.localOnce.Do(func() { sw.srv.localErr = installLocalPlugin(sw.srv, tl) })
	if sw.srv.localErr != nil {
		t.Fatalf("install the local-process provider: %v", sw.srv.localErr)
	}
	cfg := map[string]any{"provider": cmp.Or(o.Driver, "benchlocal"), "root": shortDir(t, "pcl-"), "timeoutMs": 120000,
		"path": tl.StandinBin + ":" + tl.NodeBin + ":/usr/local/bin:/usr/bin:/bin", "init": o.Init}
	if o.Log != "" {
		cfg["log"] = o.Log
	}
	var env struct {
		ID string `json:"id"`
	}
	sw.srv.API.must(t, "POST", "/api/companies/"+sw.company.ID+"/environments", map[string]any{
		"name": "local processes " + cmp.Or(o.Driver, "benchlocal") + " " + sw.pc.Slug, "driver": "sandbox", "config": cfg,
	}, &env)
	return env.ID
}

// installLocalPlugin copies the provider into a directory that lives as
// long as the server and installs it there.
func installLocalPlugin(srv *server, tl tools) error {
	root, err := os.MkdirTemp("/tmp", "pclocal-")
	if err != nil {
		return err
	}
	onExit(func() { _ = os.RemoveAll(root) })
	dir := filepath.Join(root, "local-provider")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"package.json", "manifest.js", "worker.js"} {
		data, err := os.ReadFile(filepath.Join(tl.Root, "test", "e2e", "paperclip", "testdata", "local-provider", f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			return err
		}
	}
	if err := os.Symlink(filepath.Join(tl.Plugin, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		return err
	}
	var out map[string]any
	return srv.API.do(context.Background(), "POST", "/api/plugins/install", map[string]any{"packageName": dir, "isLocalPath": true}, &out)
}

// BenchmarkPaperclipSandbox: whole runs of a stock claude_local agent,
// wake → succeeded by Paperclip's own timestamps (createdAt → finishedAt),
// through pcsync's sandbox (a lease pod on the kwok node, every execute over
// one exec stream) beside the same agent in an environment whose provider
// runs each execute as a local process (the floor any provider can reach),
// and beside a pcsync-adapter agent run as a Kubernetes Job (the spool
// road), in alternating rounds.
func BenchmarkPaperclipSandbox(b *testing.B) {
	srv := sharedServer(b)
	tr := readTranscript(b, "claude-obers-small-success.jsonl")
	sw := newSandboxWorld(b, srv, sandboxOptions{})
	localEnv := sw.installLocalProvider(b)
	inPod := sw.sandboxAgent(b, "InPod", "claude_local", tr, nil, nil)
	var local agent
	srv.API.must(b, "POST", "/api/companies/"+sw.company.ID+"/agents", map[string]any{
		"name": "Local", "adapterType": "claude_local", "defaultEnvironmentId": localEnv,
		"adapterConfig": map[string]any{"engine": "cli", "timeoutSec": 120,
			"env": map[string]any{"STANDIN_TRANSCRIPT": tr.Path, "STANDIN_RECORD": sw.pc.Record}},
	}, &local)
	kw := newKubeWorld(b, srv, []pcsyncAgent{{Name: "coder", Transcript: tr.Path}}, tr.Lines)
	spool := kw.agents["coder"]
	for range b.N {
		const rounds = 8
		took := map[string][]time.Duration{}
		order := [][]string{{"local", "pcsync", "pcsync", "local"}, {"pcsync", "local", "local", "pcsync"}}
		agents := map[string]agent{"pcsync": inPod, "local": local}
		for i := range rounds {
			for _, who := range append(order[i%2], "spool") {
				id := agents[who].ID
				if who == "spool" {
					id = spool.ID
				}
				run := srv.API.wake(b, id, fmt.Sprintf("bench %s %d", who, i))
				got := srv.API.waitRun(b, run.ID, 3*time.Minute)
				if got.Status != "succeeded" || got.CreatedAt == nil || got.FinishedAt == nil {
					b.Fatalf("%s run %s: %s (%q)", who, run.ID, got.Status, str(got.Error))
				}
				took[who] = append(took[who], got.FinishedAt.Sub(*got.CreatedAt))
			}
		}
		p50 := func(who string) time.Duration { return pct(took[who], 0.5) }
		fmt.Fprintf(os.Stderr, `
BenchmarkPaperclipSandbox: a stock claude_local run, wake → succeeded (Paperclip's createdAt → finishedAt), %d runs each, load %s
  pcsync sandbox (lease pod, one exec stream)   p50 %6d ms  p99 %6d ms
  local-process provider (the floor)            p50 %6d ms  p99 %6d ms
  pcsync adapter type (spool → Job)              p50 %6d ms  p99 %6d ms
  ratio sandbox/local p50 %.2f; sandbox/adapter p50 %.2f
`, len(took["pcsync"]), loadAvg(), p50("pcsync").Milliseconds(), pct(took["pcsync"], 0.99).Milliseconds(),
			p50("local").Milliseconds(), pct(took["local"], 0.99).Milliseconds(),
			p50("spool").Milliseconds(), pct(took["spool"], 0.99).Milliseconds(),
			float64(p50("pcsync"))/float64(p50("local")), float64(p50("pcsync"))/float64(p50("spool")))
		b.ReportMetric(float64(p50("pcsync"))/float64(p50("local")), "sandbox/local-p50")
		b.ReportMetric(float64(p50("pcsync").Milliseconds()), "sandbox-p50-ms")
	}
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	var a, b5, c float64
	fmt.Sscanf(string(data), "%f %f %f", &a, &b5, &c)
	return fmt.Sprintf("%.1f %.1f %.1f", a, b5, c)
}

// BenchmarkPaperclipSandboxRealNode: whole runs of a stock claude_local
// agent, wake → succeeded by Paperclip's own timestamps, through pcsync's
// sandbox with its lease pods on the real kubelet (the stand-in CLI in an
// image built from pcsync's base): cold (its lease begun when Paperclip
// starts the run, the default), cold in an environment with prestart
// false (begun at the acquire), from a warm pool of one member whose
// refill waits the default refillDelaySec (3 s), and from one whose
// company sets refillDelaySec 0, refilling at once (each a company of its
// own whose Git config declares it), beside the same agent in an
// environment whose provider runs each execute as a local process under a
// reaping init (tini -s, as a container's PID 1 would be): the floor, in
// alternating rounds. A pool's
// runs are also given alone where they claimed a member, and the cold
// runs where their acquire took a prestarted lease. No run waits for its
// pool's member to be Ready (a refill may still be under way): each run's
// claim is read from the daemon's warm-claims counter, so a run that found
// no Ready member starts cold and counts among its pool's runs only, not
// its warm claims: the figures hold either way.
func BenchmarkPaperclipSandboxRealNode(b *testing.B) {
	srv := sharedServer(b)
	tr := readTranscript(b, realNodeTranscript)
	cold := newBenchWorld(b, srv, nil)
	sw := cold.w
	pools := map[string]*benchPool{"pcsync": cold, "pool": newBenchPool(b, srv, nil), "atonce": newBenchPool(b, srv, map[string]any{"refillDelaySec": 0})}
	tini, err := exec.LookPath("tini")
	if err != nil {
		b.Fatalf("the floor runs its executes under tini -s: %v (apt-get install tini)", err)
	}
	localEnv := sw.installLocalProvider(b, tini, "-s", "--")
	var local agent
	srv.API.must(b, "POST", "/api/companies/"+sw.company.ID+"/agents", map[string]any{
		"name": "Local", "adapterType": "claude_local", "defaultEnvironmentId": localEnv,
		"adapterConfig": map[string]any{"engine": "cli", "timeoutSec": 120,
			"env": map[string]any{"STANDIN_TRANSCRIPT": tr.Path}},
	}, &local)
	agents := map[string]agent{"pcsync": sw.realNodeAgent(b, "InPod"), "pool": pools["pool"].w.realNodeAgent(b, "InPoolPod"),
		"atonce": pools["atonce"].w.realNodeAgent(b, "InAtOncePoolPod"), "local": local,
		"noprestart": sw.realNodeAgentIn(b, "InPodNoPrestart", sw.environment(b, "no prestart", map[string]any{"prestart": false}))}
	rounds := 8
	if n, err := strconv.Atoi(os.Getenv("PCSYNC_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for range b.N {
		took := map[string][]time.Duration{}
		// Each round turns the order by one: each side takes each place
		// as often, and two runs of others or more come between two of
		// its own.
		order := []string{"local", "pcsync", "noprestart", "pool", "atonce"}
		for i := range rounds {
			for j := range order {
				who := order[(i+j)%len(order)]
				warm0, pre0 := pools[who].warm(b), pools[who].prestarted(b)
				run := srv.API.wake(b, agents[who].ID, fmt.Sprintf("bench %s %d", who, i))
				got := srv.API.waitRun(b, run.ID, 3*time.Minute)
				if got.Status != "succeeded" || got.CreatedAt == nil || got.FinishedAt == nil {
					b.Fatalf("%s run %s: %s (%q)", who, run.ID, got.Status, str(got.Error))
				}
				d := got.FinishedAt.Sub(*got.CreatedAt)
				took[who] = append(took[who], d)
				if pools[who] != nil && pools[who].warm(b) > warm0 {
					took[who+"-warm"] = append(took[who+"-warm"], d)
				}
				if who == "pcsync" && pools[who].prestarted(b) > pre0 {
					took[who+"-pre"] = append(took[who+"-pre"], d)
				}
			}
		}
		reportSandboxRealNode(b, took)
		hs := headStarts(cold.w.daemon.out.String())
		fmt.Fprintf(os.Stderr, "  head start of the cold runs' prestarted leases (prestart → the run's acquire), %d: p50 %d ms, min %d ms, max %d ms\n",
			len(hs), pct(hs, 0.5).Milliseconds(), pct(hs, 0).Milliseconds(), pct(hs, 1).Milliseconds())
	}
}

// headStarts are the head starts the daemon's log gives for the leases
// begun before their runs' acquires and taken by them.
func headStarts(log string) []time.Duration {
	var out []time.Duration
	for line := range strings.Lines(log) {
		if !strings.Contains(line, "sandbox lease prestarted for its run taken by its acquire") {
			continue
		}
		_, v, ok := strings.Cut(line, "headStart=")
		if !ok {
			continue
		}
		v, _, _ = strings.Cut(v, " ")
		if d, err := time.ParseDuration(strings.TrimSpace(v)); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// benchPool is a company of its own with a warm pool of one claude_local
// member, its daemon serving metrics at metrics.
type benchPool struct {
	w       *sandboxWorld
	metrics string
}

func newBenchPool(b *testing.B, srv *server, fields map[string]any) *benchPool {
	sandbox := map[string]any{"warmPool": []any{map[string]any{"adapterType": "claude_local", "count": 1}}}
	maps.Copy(sandbox, fields)
	return newBenchWorld(b, srv, sandbox)
}

// newBenchWorld is a company of its own with Company spec.sandbox sandbox
// (nil: none, no pool), its daemon serving metrics.
func newBenchWorld(b *testing.B, srv *server, sandbox map[string]any) *benchPool {
	metrics := freeAddr(b)
	o := sandboxOptions{DaemonArgs: []string{"--metrics-bind-address", metrics}}
	if sandbox != nil {
		o.Company = map[string]any{"sandbox": sandbox}
	}
	return &benchPool{w: newRealNodeSandboxWorldWith(b, srv, o), metrics: metrics}
}

// prestarted is how many leases begun when their run started were taken
// by the run's acquire so far.
func (p *benchPool) prestarted(b *testing.B) float64 {
	if p == nil {
		return 0
	}
	return metricSum(b, p.metrics, `pcsync_sandbox_prestarts_total{company="`+p.w.pc.Slug+`",outcome="adopted"}`)
}

// warm is how many leases claimed a member so far; 0 for no pool.
func (p *benchPool) warm(b *testing.B) float64 {
	if p == nil {
		return 0
	}
	return metricSum(b, p.metrics, `pcsync_sandbox_pool_claims_total{company="`+p.w.pc.Slug+`",outcome="warm"}`)
}

func reportSandboxRealNode(b *testing.B, took map[string][]time.Duration) {
	p50 := func(who string) time.Duration { return pct(took[who], 0.5) }
	ms := func(who string) int64 { return p50(who).Milliseconds() }
	p99 := func(who string) int64 { return pct(took[who], 0.99).Milliseconds() }
	floor := float64(p50("local"))
	fmt.Fprintf(os.Stderr, `
BenchmarkPaperclipSandboxRealNode: a stock claude_local run, wake → succeeded (Paperclip's createdAt → finishedAt), %d runs each, load %s
  pcsync sandbox, no pool (lease pod started cold)     p50 %6d ms  p99 %6d ms  (its %d prestarted runs: p50 %d ms)
  the same, environment prestart: false                p50 %6d ms  p99 %6d ms
  warm pool of 1, refill after 3 s (the default)       p50 %6d ms  p99 %6d ms  (its %d warm claims: p50 %d ms)
  warm pool of 1, refillDelaySec 0 (at once)           p50 %6d ms  p99 %6d ms  (its %d warm claims: p50 %d ms)
  local-process provider under tini -s (the floor)     p50 %6d ms  p99 %6d ms
  ratio p50 to the floor: cold %.2f (%+d ms), cold without prestart %.2f (%+d ms), pool %.2f (%+d ms), its warm claims %.2f (%+d ms), the pool refilled at once %.2f (%+d ms), its warm claims %.2f (%+d ms)
`, len(took["pcsync"]), loadAvg(), ms("pcsync"), p99("pcsync"), len(took["pcsync-pre"]), ms("pcsync-pre"),
		ms("noprestart"), p99("noprestart"),
		ms("pool"), p99("pool"), len(took["pool-warm"]), ms("pool-warm"),
		ms("atonce"), p99("atonce"), len(took["atonce-warm"]), ms("atonce-warm"),
		ms("local"), p99("local"),
		float64(p50("pcsync"))/floor, ms("pcsync")-ms("local"), float64(p50("noprestart"))/floor, ms("noprestart")-ms("local"), float64(p50("pool"))/floor, ms("pool")-ms("local"),
		float64(p50("pool-warm"))/floor, ms("pool-warm")-ms("local"), float64(p50("atonce"))/floor, ms("atonce")-ms("local"),
		float64(p50("atonce-warm"))/floor, ms("atonce-warm")-ms("local"))
	b.ReportMetric(float64(p50("pcsync"))/floor, "sandbox/local-p50")
	b.ReportMetric(float64(p50("noprestart"))/floor, "noprestart/local-p50")
	b.ReportMetric(float64(p50("pool"))/floor, "pool/local-p50")
	b.ReportMetric(float64(p50("pool-warm"))/floor, "pool-warm/local-p50")
	b.ReportMetric(float64(p50("atonce"))/floor, "atonce/local-p50")
	b.ReportMetric(float64(ms("pcsync")), "sandbox-p50-ms")
	b.ReportMetric(float64(ms("pool")), "pool-p50-ms")
	b.ReportMetric(float64(ms("local")), "local-p50-ms")
}
