//go:build integration

package paperclip

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// screenshotEnv, when set, is where TestRunPageInChromium copies its
// screenshot (the README's picture is docs/paperclip-run-page.png).
const screenshotEnv = "PCSYNC_E2E_SCREENSHOT"

// TestRunPageInChromium opens Paperclip's run page of a run that went
// through pcsync in headless Chromium: the page shows the run succeeded,
// its tokens, its cost and the transcript.
func TestRunPageInChromium(t *testing.T) {
	srv := sharedServer(t)
	tl := getTools(t)
	if _, err := os.Stat("/usr/bin/chromium"); err != nil && os.Getenv("CHROMIUM") == "" {
		t.Fatalf("Chromium is missing: run hack/paperclip/install.sh (apt-get install chromium): %v", err)
	}
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	w := newWorld(t, srv, worldOptions{Agents: []pcsyncAgent{{Name: "coder", Transcript: tr.Path}}})
	coder := w.agents["coder"]
	run := srv.API.wake(t, coder.ID, "e2e: run page")
	if got := srv.API.waitRun(t, run.ID, 2*time.Minute); got.Status != "succeeded" {
		t.Fatalf("run %s: %s (%q)", run.ID, got.Status, str(got.Error))
	}
	var c company
	srv.API.must(t, "GET", "/api/companies/"+w.company.ID, nil, &c)
	agentKey := coder.URLKey
	if agentKey == "" {
		agentKey = coder.ID
	}
	url := fmt.Sprintf("%s/%s/agents/%s/runs/%s", srv.URL, c.IssuePrefix, agentKey, run.ID)
	png := filepath.Join(t.TempDir(), "run-page.png")
	script := filepath.Join(tl.Root, "test", "e2e", "paperclip", "testdata", "runpage.mjs")
	env := append(tl.nodeEnv(), "NODE_PATH="+filepath.Join(tl.Install, "node_modules"))
	text, err := runCmd(t.TempDir(), env, filepath.Join(tl.NodeBin, "node"), script, url, png, `succeeded|Transcript|"subtype":"init"`)
	if err != nil {
		t.Fatalf("run page %s: %v", url, err)
	}
	lower := strings.ToLower(text)
	// The figures as the page formats them: tokens with thousands
	// separators or as k, cost in dollars.
	wants := map[string][]string{
		"status succeeded": {"succeeded"},
		"cost":             {fmt.Sprintf("$%.2f", tr.CostUSD), fmt.Sprintf("$%.4f", tr.CostUSD), fmt.Sprintf("%.4f", tr.CostUSD)},
		"input tokens":     tokenForms(tr.Input),
		"cached tokens":    tokenForms(tr.Cached),
		"output tokens":    tokenForms(tr.Output),
		"transcript":       {`"subtype":"init","cwd":"/home/simonerich/Flutters/obers_ui"`},
	}
	for what, forms := range wants {
		found := false
		for _, f := range forms {
			if strings.Contains(lower, strings.ToLower(f)) {
				found = true
			}
		}
		if !found {
			t.Errorf("the run page does not show the %s (any of %q)", what, forms)
		}
	}
	if t.Failed() {
		t.Logf("run page text:\n%s", truncate(text, 6000))
	}
	if dst := os.Getenv(screenshotEnv); dst != "" {
		data, err := os.ReadFile(png)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of %s in %s", url, dst)
	}
}

// tokenForms are the ways a page may print a token count.
func tokenForms(n int64) []string {
	forms := []string{fmt.Sprint(n), commas(n)}
	if n >= 1000 {
		forms = append(forms, fmt.Sprintf("%.1fk", float64(n)/1000), fmt.Sprintf("%.1fK", float64(n)/1000))
	}
	return forms
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
