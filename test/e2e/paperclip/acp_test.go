//go:build integration

package paperclip

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// acpAgent creates a claude_local agent on the ACP engine (claude_local's
// default) in the given environment, whose agent server is the stand-in
// ACP agent (testdata/standin-acp): one turn of chunks agent_message_chunk
// updates, spacing apart.
func (sw *sandboxWorld) acpAgent(t testing.TB, name, envID string, chunks int, spacing time.Duration) agent {
	t.Helper()
	var ag agent
	sw.srv.API.must(t, "POST", "/api/companies/"+sw.company.ID+"/agents", map[string]any{
		"name": name, "adapterType": "claude_local", "defaultEnvironmentId": envID,
		"adapterConfig": map[string]any{
			"engine": "acp", "timeoutSec": 120,
			"agentCommand": filepath.Join(getTools(t).Root, "test", "e2e", "paperclip", "testdata", "standin-acp"),
			"env": map[string]any{
				"STANDIN_RECORD":       sw.pc.Record,
				"STANDIN_ACP_CHUNKS":   strconv.Itoa(chunks),
				"STANDIN_ACP_CHUNK_MS": strconv.FormatInt(spacing.Milliseconds(), 10),
			},
		},
	}, &ag)
	return ag
}

// The ACP engine's two ways to read its agent's output, as it announces
// them in the run's log.
const (
	acpStreamed = "Starting streamed ACP process session bridge in sandbox"
	acpPolled   = "Starting ACP process session bridge in sandbox"
)

// TestSandboxACPRunStreamsOutput: a claude_local agent on the ACP engine
// (the stock default) runs in pcsync's sandbox, and because pcsync's
// plugin declares incrementalSessionOutput, Paperclip runs the agent
// server as one long execute and reads its output live from that execute
// instead of polling output files through executes ten times a second.
// The turn's chunks reach the run's log in order and the run succeeds.
func TestSandboxACPRunStreamsOutput(t *testing.T) {
	srv := sharedServer(t)
	metrics := freeAddr(t)
	sw := newSandboxWorld(t, srv, sandboxOptions{DaemonArgs: []string{"--metrics-bind-address", metrics}})
	const chunks = 10
	ag := sw.acpAgent(t, "ACP", sw.envID, chunks, 200*time.Millisecond)
	before := sandboxExecutes(t, metrics)
	run := srv.API.wake(t, ag.ID, "e2e: ACP in the sandbox")
	got := srv.API.waitRun(t, run.ID, 3*time.Minute)
	if got.Status != "succeeded" {
		t.Fatalf("run %s: status %s, error %q; want succeeded", run.ID, got.Status, str(got.Error))
	}
	stdout, _ := srv.API.runLog(t, run.ID)
	if !strings.Contains(stdout, acpStreamed) || strings.Contains(stdout, acpPolled) {
		t.Errorf("the run's log does not say the ACP engine streams its agent's output from one execute (%q):\n%s", acpStreamed, truncate(stdout, 4000))
	}
	last := -1
	for i := 1; i <= chunks; i++ {
		at := strings.Index(stdout, fmt.Sprintf("standin chunk %d of %d.", i, chunks))
		if at < 0 || at < last {
			t.Errorf("chunk %d of %d is not in the run's log after chunk %d (at %d):\n%s", i, chunks, i-1, at, truncate(stdout, 4000))
			break
		}
		last = at
	}
	methods, err := os.ReadFile(filepath.Join(sw.pc.Record, "acp-"+strings.ToLower(run.ID)+".methods"))
	if err != nil || !strings.Contains(string(methods), "session/prompt") {
		t.Errorf("the stand-in ACP agent recorded no session/prompt (%v):\n%s", err, methods)
	}
	t.Logf("%.0f executes for one ACP run of %d chunks 200 ms apart, %s", sandboxExecutes(t, metrics)-before, chunks, got.FinishedAt.Sub(*got.CreatedAt))
}

// freeAddr returns a free 127.0.0.1 address.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// sandboxExecutes is the sum of pcsync_sandbox_executes_total that the
// daemon serving /metrics on addr reports.
func sandboxExecutes(t testing.TB, addr string) float64 {
	t.Helper()
	return metricSum(t, addr, "pcsync_sandbox_executes_total{")
}

// metricSum is the sum of the daemon's series (on addr) whose line starts
// with prefix (a metric's name and "{", and maybe some of its labels).
func metricSum(t testing.TB, addr, prefix string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape the daemon's metrics: %v", err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}
