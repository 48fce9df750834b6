//go:build integration

package paperclip

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	atExit = append(atExit, func() { _ = os.RemoveAll(root) })
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
// image built from pcsync's base), cold and from a warm pool of one member
// (a second company whose Git config declares it), beside the same agent
// in an environment whose provider runs each execute as a local process
// under a reaping init (tini -s, as a container's PID 1 would be): the
// floor, in alternating rounds.
func BenchmarkPaperclipSandboxRealNode(b *testing.B) {
	srv := sharedServer(b)
	tr := readTranscript(b, realNodeTranscript)
	sw := newRealNodeSandboxWorld(b, srv)
	metrics := freeAddr(b)
	pw := newRealNodeSandboxWorldWith(b, srv, sandboxOptions{
		DaemonArgs: []string{"--metrics-bind-address", metrics},
		Company:    map[string]any{"sandbox": map[string]any{"warmPool": []any{map[string]any{"adapterType": "claude_local", "count": 1}}}},
	})
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
	agents := map[string]agent{"pcsync": sw.realNodeAgent(b, "InPod", tr), "pool": pw.realNodeAgent(b, "InPoolPod", tr), "local": local}
	claims := func(outcome string) float64 {
		return metricSum(b, metrics, `pcsync_sandbox_pool_claims_total{company="`+pw.pc.Slug+`",outcome="`+outcome+`"}`)
	}
	for range b.N {
		const rounds = 8
		took := map[string][]time.Duration{}
		order := [][]string{{"local", "pcsync", "pool"}, {"pool", "pcsync", "local"}}
		warm0, cold0 := claims("warm"), claims("miss")
		for i := range rounds {
			for _, who := range order[i%2] {
				run := srv.API.wake(b, agents[who].ID, fmt.Sprintf("bench %s %d", who, i))
				got := srv.API.waitRun(b, run.ID, 3*time.Minute)
				if got.Status != "succeeded" || got.CreatedAt == nil || got.FinishedAt == nil {
					b.Fatalf("%s run %s: %s (%q)", who, run.ID, got.Status, str(got.Error))
				}
				took[who] = append(took[who], got.FinishedAt.Sub(*got.CreatedAt))
			}
		}
		warm, cold := claims("warm")-warm0, claims("miss")-cold0
		p50 := func(who string) time.Duration { return pct(took[who], 0.5) }
		fmt.Fprintf(os.Stderr, `
BenchmarkPaperclipSandboxRealNode: a stock claude_local run, wake → succeeded (Paperclip's createdAt → finishedAt), %d runs each, load %s
  pcsync sandbox, warm pool of 1 (lease pod claimed)   p50 %6d ms  p99 %6d ms  (%.0f warm claims, %.0f misses)
  pcsync sandbox, no pool (lease pod started cold)     p50 %6d ms  p99 %6d ms
  local-process provider under tini -s (the floor)     p50 %6d ms  p99 %6d ms
  ratio p50: cold/local %.2f, pool/local %.2f, pool/cold %.2f
`, len(took["pcsync"]), loadAvg(), p50("pool").Milliseconds(), pct(took["pool"], 0.99).Milliseconds(), warm, cold,
			p50("pcsync").Milliseconds(), pct(took["pcsync"], 0.99).Milliseconds(),
			p50("local").Milliseconds(), pct(took["local"], 0.99).Milliseconds(),
			float64(p50("pcsync"))/float64(p50("local")), float64(p50("pool"))/float64(p50("local")), float64(p50("pool"))/float64(p50("pcsync")))
		b.ReportMetric(float64(p50("pcsync"))/float64(p50("local")), "sandbox/local-p50")
		b.ReportMetric(float64(p50("pool"))/float64(p50("pcsync")), "pool/cold-p50")
		b.ReportMetric(float64(p50("pcsync").Milliseconds()), "sandbox-p50-ms")
		b.ReportMetric(float64(p50("pool").Milliseconds()), "pool-p50-ms")
		b.ReportMetric(float64(p50("local").Milliseconds()), "local-p50-ms")
	}
}
