//go:build integration

package paperclip

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	sharedMu  sync.Mutex
	sharedSrv *server
	// atExit runs after every test (TestMain, last added first): it stops
	// the shared server and removes the tools' directories. Add with onExit.
	atExitMu sync.Mutex
	atExit   []func()
)

// onExit has f run after every test (TestMain).
func onExit(f func()) {
	atExitMu.Lock()
	defer atExitMu.Unlock()
	atExit = append(atExit, f)
}

// sharedServer is the test binary's Paperclip server with the adapter
// installed, started by the first test that asks for it. Tests share it
// (each works in a company of its own); a test that restarts Paperclip
// starts its own with startServer.
func sharedServer(t testing.TB) *server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedSrv != nil {
		return sharedSrv
	}
	tl := getTools(t)
	s := newServer(t, tl, false)
	s.installAdapter(t)
	sharedSrv = s
	onExit(s.Stop)
	return s
}

// transcript is what a Claude stream-json transcript says about its run,
// read from its result line (independently of pcsync's parser).
type transcript struct {
	Path      string
	Lines     []string
	SessionID string
	Model     string
	CostUSD   float64
	Input     int64 // input tokens not read from cache
	Cached    int64 // cache reads
	Output    int64
}

// repoSample returns the path of one of the repository's agent transcripts
// (testdata/agent-samples).
func repoSample(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(getTools(t).Root, "testdata", "agent-samples", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("agent sample %s not found in testdata/agent-samples: %v", name, err)
	}
	return p
}

// readTranscript parses a Claude transcript's lines and its result line.
func readTranscript(t testing.TB, name string) transcript {
	t.Helper()
	tr := transcript{Path: repoSample(t, name)}
	f, err := os.Open(tr.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		tr.Lines = append(tr.Lines, line)
		var m struct {
			Type       string  `json:"type"`
			SessionID  string  `json:"session_id"`
			TotalCost  float64 `json:"total_cost_usd"`
			ModelUsage map[string]struct {
				InputTokens          int64 `json:"inputTokens"`
				OutputTokens         int64 `json:"outputTokens"`
				CacheReadInputTokens int64 `json:"cacheReadInputTokens"`
			} `json:"modelUsage"`
		}
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if m.SessionID != "" {
			tr.SessionID = m.SessionID
		}
		if m.Type == "result" {
			tr.CostUSD = m.TotalCost
			tr.Input, tr.Cached, tr.Output = 0, 0, 0
			for model, u := range m.ModelUsage {
				tr.Model = model
				tr.Input += u.InputTokens
				tr.Cached += u.CacheReadInputTokens
				tr.Output += u.OutputTokens
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return tr
}

// world is one test's Paperclip company with its agents, and the pcsync
// config, spool and daemon that serve it.
type world struct {
	t       testing.TB
	srv     *server
	company company
	pc      *pcsyncEnv
	daemon  *daemon
	agents  map[string]agent // by pcsync agent name
}

// worldOptions shape newWorld.
type worldOptions struct {
	Agents   []pcsyncAgent
	Executor string // "local" (default) or "kubernetes"
	// Settings and Company are merged into pcsync's Settings and Company specs.
	Settings, Company map[string]any
	// DaemonEnv and DaemonArgs are added to the daemon's environment and flags.
	DaemonEnv, DaemonArgs []string
	// AdapterConfig is merged into every Paperclip agent's adapterConfig.
	AdapterConfig map[string]any
	// Slug is pcsync's company slug (default from the test name).
	Slug string
	// Before runs after the config is written and before the daemon starts
	// (e.g. pcsync apply).
	Before func(w *world)
}

var slugCount struct {
	sync.Mutex
	n int
}

// newWorld creates a company in Paperclip, writes pcsync's config naming
// it by its id, starts the daemon, and creates one Paperclip agent (adapter
// type pcsync) per pcsync agent.
func newWorld(t testing.TB, srv *server, o worldOptions) *world {
	t.Helper()
	tl := getTools(t)
	slug := o.Slug
	if slug == "" {
		slugCount.Lock()
		slugCount.n++
		slug = fmt.Sprintf("e2e%d-%d", time.Now().UnixMilli()%100000, slugCount.n)
		slugCount.Unlock()
	}
	w := &world{t: t, srv: srv, agents: map[string]agent{}}
	w.company = srv.API.createCompany(t, "pcsync "+t.Name())
	w.pc = newPcsyncEnv(t, tl, slug, w.company.ID, o.Agents, o.Settings, o.Company)
	if o.Before != nil {
		o.Before(w)
	}
	executor := o.Executor
	if executor == "" {
		executor = "local"
	}
	w.daemon = w.pc.startDaemon(executor, o.DaemonEnv, o.DaemonArgs...)
	for _, a := range o.Agents {
		cfg := map[string]any{"spoolDir": w.pc.Spool, "agent": a.Name, "timeoutSec": 120}
		if a.TimeoutSec > 0 {
			cfg["timeoutSec"] = a.TimeoutSec
		}
		for k, v := range o.AdapterConfig {
			cfg[k] = v
		}
		w.agents[a.Name] = srv.API.createAgent(t, w.company.ID, strings.ToUpper(a.Name[:1])+a.Name[1:], cfg)
	}
	return w
}

// request reads the spool's request for a Paperclip run.
func (w *world) request(runID string) map[string]any {
	w.t.Helper()
	data, err := os.ReadFile(filepath.Join(w.pc.Spool, strings.ToLower(runID)+".json"))
	if err != nil {
		w.t.Fatalf("the adapter wrote no request for run %s: %v (spool: %v)", runID, err, w.pc.spoolFiles())
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		w.t.Fatal(err)
	}
	return m
}

// jsonValue is a JSON string value after a key.
var jsonValue = regexp.MustCompile(`":"((?:[^"\\]|\\.)*)"`)

// storedForm matches a transcript line as Paperclip stores it in a run log:
// Paperclip's log redaction may replace a string value it takes for a
// secret (e.g. "apiKeySource") with ***REDACTED***; everything else is kept
// byte for byte.
func storedForm(line string) *regexp.Regexp {
	var b strings.Builder
	last := 0
	for _, m := range jsonValue.FindAllStringSubmatchIndex(line, -1) {
		b.WriteString(regexp.QuoteMeta(line[last:m[2]]))
		b.WriteString("(?:" + regexp.QuoteMeta(line[m[2]:m[3]]) + `|\*\*\*REDACTED\*\*\*)`)
		last = m[3]
	}
	b.WriteString(regexp.QuoteMeta(line[last:]))
	return regexp.MustCompile(b.String())
}

// checkRunLog checks that Paperclip's log of a run holds every line of the
// transcript.
func checkRunLog(t testing.TB, srv *server, runID string, tr transcript) string {
	t.Helper()
	stdout, _ := srv.API.runLog(t, runID)
	for _, line := range tr.Lines {
		if !strings.Contains(stdout, line) && !storedForm(line).MatchString(stdout) {
			t.Errorf("Paperclip's log of run %s lacks the transcript line %q", runID, truncate(line, 120))
		}
	}
	return stdout
}

// runCheck is what runAndCheck expects of a run.
type runCheck struct {
	// Within bounds the wait for the run to end.
	Within time.Duration
	// Figures are Paperclip's figures of the run (status, tokens, cost,
	// session).
	Figures runFigures
	// Transcript's lines must all be in Paperclip's log of the run.
	Transcript transcript
	// Log, when set, is shown with figures that differ (the daemon's
	// output).
	Log func() string
}

// runAndCheck wakes agentID (why is the wake's reason), waits for its run
// and checks it as want says. It returns the run and the stdout of
// Paperclip's log of it.
func runAndCheck(t testing.TB, srv *server, agentID, why string, want runCheck) (heartbeatRun, string) {
	t.Helper()
	run := srv.API.wake(t, agentID, why)
	got := srv.API.waitRun(t, run.ID, want.Within)
	if diff := cmp.Diff(want.Figures, figuresOf(got)); diff != "" {
		log := ""
		if want.Log != nil {
			log = "\ndaemon log:\n" + tail(want.Log(), 6000)
		}
		t.Errorf("Paperclip's run %s (-transcript +Paperclip):\n%s\nrun: %+v%s", run.ID, diff, got, log)
	}
	return got, checkRunLog(t, srv, run.ID, want.Transcript)
}

// waitSucceeded waits within for run runID to end, and fails t unless it
// succeeded, with its error and the end of its log.
func waitSucceeded(t testing.TB, srv *server, runID, what string, within time.Duration) heartbeatRun {
	t.Helper()
	got := srv.API.waitRun(t, runID, within)
	if got.Status != "succeeded" {
		stdout, _ := srv.API.runLog(t, runID)
		t.Fatalf("%s run %s: %s (%q)\n%s", what, runID, got.Status, str(got.Error), tail(stdout, 3000))
	}
	return got
}

// waitSpend waits until the company's costs summary books want cents (the
// cost event is written just after the run turns terminal).
func waitSpend(t testing.TB, srv *server, cid string, want int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := srv.API.costs(t, cid)
		got, _ := s["spendCents"].(float64)
		if int64(got) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("costs summary of company %s: %v; want spendCents %d", cid, s, want)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cents is a cost in dollars as Paperclip books it.
func cents(usd float64) int64 { return int64(math.Round(usd * 100)) }
