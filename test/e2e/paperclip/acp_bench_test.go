//go:build integration

package paperclip

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkPaperclipSandboxACP: executes per run and wake → succeeded of a
// stock claude_local agent in a sandbox, on each engine: ACP (the stock
// default; the stand-in ACP agent's turn of 20 chunks 100 ms apart) through
// pcsync's sandbox, which declares incrementalSessionOutput, beside the
// same agent through the local-process provider without the declaration
// (Paperclip polls the agent's output files through executes: pcsync's
// road before this change) and with it; and the CLI engine (the stand-in
// CLI replaying a transcript) through pcsync. Lease pods on the kwok node,
// whose executes run on this host; alternating rounds.
func BenchmarkPaperclipSandboxACP(b *testing.B) {
	srv := sharedServer(b)
	tr := readTranscript(b, "claude-obers-small-success.jsonl")
	metrics := freeAddr(b)
	sw := newSandboxWorld(b, srv, sandboxOptions{DaemonArgs: []string{"--metrics-bind-address", metrics}})
	logs := shortDir(b, "pcxlog-")
	pollLog, streamLog := filepath.Join(logs, "poll.log"), filepath.Join(logs, "stream.log")
	pollEnv := sw.installLocalEnv(b, localEnvOptions{Log: pollLog})
	streamEnv := sw.installLocalEnv(b, localEnvOptions{Driver: "benchlocal-stream", Log: streamLog})
	const chunks, spacing = 20, 100 * time.Millisecond
	agents := map[string]agent{
		"pcsync":       sw.acpAgent(b, "ACPInPod", sw.envID, chunks, spacing),
		"local-poll":   sw.acpAgent(b, "ACPLocalPoll", pollEnv, chunks, spacing),
		"local-stream": sw.acpAgent(b, "ACPLocalStream", streamEnv, chunks, spacing),
		"pcsync-cli":   sw.sandboxAgent(b, "CLIInPod", "claude_local", tr, nil, nil),
	}
	executes := func(who string) float64 {
		switch who {
		case "local-poll", "local-stream":
			f := map[string]string{"local-poll": pollLog, "local-stream": streamLog}[who]
			data, err := os.ReadFile(f)
			if err != nil && !os.IsNotExist(err) {
				b.Fatal(err)
			}
			return float64(bytes.Count(data, []byte("\n")))
		}
		return sandboxExecutes(b, metrics)
	}
	for range b.N {
		const rounds = 6
		took := map[string][]time.Duration{}
		execs := map[string][]float64{}
		order := [][]string{{"local-poll", "pcsync", "local-stream", "pcsync-cli"}, {"pcsync-cli", "local-stream", "pcsync", "local-poll"}}
		for i := range rounds {
			for _, who := range order[i%2] {
				before := executes(who)
				run := srv.API.wake(b, agents[who].ID, fmt.Sprintf("bench %s %d", who, i))
				got := srv.API.waitRun(b, run.ID, 3*time.Minute)
				if got.Status != "succeeded" || got.CreatedAt == nil || got.FinishedAt == nil {
					b.Fatalf("%s run %s: %s (%q)", who, run.ID, got.Status, str(got.Error))
				}
				took[who] = append(took[who], got.FinishedAt.Sub(*got.CreatedAt))
				execs[who] = append(execs[who], executes(who)-before)
			}
		}
		med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
		p50 := func(who string) int64 { return pct(took[who], 0.5).Milliseconds() }
		fmt.Fprintf(os.Stderr, `
BenchmarkPaperclipSandboxACP: a stock claude_local run, wake → succeeded (Paperclip's createdAt → finishedAt) and executes per run, %d runs each, load %s
  ACP engine (a turn of %d chunks %s apart):
    pcsync sandbox, incrementalSessionOutput (streamed)     p50 %6d ms  p99 %6d ms  executes p50 %4.0f
    local-process provider, no declaration (polled)          p50 %6d ms  p99 %6d ms  executes p50 %4.0f
    local-process provider, incrementalSessionOutput         p50 %6d ms  p99 %6d ms  executes p50 %4.0f
  CLI engine (the stand-in CLI replaying a transcript):
    pcsync sandbox                                           p50 %6d ms  p99 %6d ms  executes p50 %4.0f
`, rounds, loadAvg(), chunks, spacing,
			p50("pcsync"), pct(took["pcsync"], 0.99).Milliseconds(), med(execs["pcsync"]),
			p50("local-poll"), pct(took["local-poll"], 0.99).Milliseconds(), med(execs["local-poll"]),
			p50("local-stream"), pct(took["local-stream"], 0.99).Milliseconds(), med(execs["local-stream"]),
			p50("pcsync-cli"), pct(took["pcsync-cli"], 0.99).Milliseconds(), med(execs["pcsync-cli"]))
		b.ReportMetric(med(execs["pcsync"]), "acp-executes/run")
		b.ReportMetric(med(execs["local-poll"]), "acp-polled-executes/run")
		b.ReportMetric(float64(p50("pcsync")), "acp-p50-ms")
		b.ReportMetric(float64(p50("local-poll")), "acp-polled-p50-ms")
	}
}
