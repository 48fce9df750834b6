//go:build integration

package kubeexec

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/hostilespool"
	"github.com/pcsync/pcsync/internal/testcluster"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// TestHostileSpool is the corpus of issue 15 with the Kubernetes executor on
// the test control plane (kwok serves a real Claude transcript as the pod's
// log): the daemon with Once ends by itself, the good request succeeds with
// its log copied (0600), the requests that own a hostile .log or are hard
// links are rejected with no Job created, the FIFO and /dev/zero results are
// skipped, the file outside the spool is untouched, and the listing answers.
func TestHostileSpool(t *testing.T) {
	t.Parallel()
	lines := transcript(t, claudeTranscript)
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(time.Second), LogLines: lines})
	c := hostilespool.Build(t, e.spool, t.TempDir(), func(runID string) []byte {
		data, err := json.Marshal(map[string]any{"apiVersion": config.APIVersion, "kind": "Run", "company": e.slug,
			"agent": agentName, "runId": runID, "prompt": "Summarise the repository's README in one sentence."})
		if err != nil {
			t.Fatal(err)
		}
		return data
	})
	d := e.startDaemon(true, nil)
	d.wait(t)
	c.CheckOutside(t)

	if res := e.result(hostilespool.Good); res.Status != result.StatusSucceeded {
		t.Errorf("good: %s %v, want succeeded", res.Status, deref(res.ErrorMessage))
	}
	if got := e.logFile(hostilespool.Good); got != strings.Join(lines, "\n")+"\n" {
		t.Errorf("good.log is not the transcript:\n%s", got)
	}
	if fi, err := os.Stat(runs.Paths{Spool: e.spool, Name: hostilespool.Good}.Log()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("good.log: %v %v, want 0600", fi.Mode(), err)
	}
	for name, want := range map[string]string{
		hostilespool.LinkLog:     "link-log.log: not a regular file: a symbolic link",
		hostilespool.HardLog:     "hard-log.log: has 2 hard links",
		hostilespool.FIFOLog:     "fifo-log.log: not a regular file: a named pipe",
		hostilespool.HardRequest: "hard-request.yaml: has 2 hard links",
	} {
		res := e.result(name)
		if res.Status != result.StatusRejected || res.ErrorMessage == nil || !strings.Contains(*res.ErrorMessage, want) {
			t.Errorf("%s: %s %v, want rejected with %q", name, res.Status, deref(res.ErrorMessage), want)
		}
		if n := e.auditCount("create", "jobs", e.jobName(name)); n != 0 {
			t.Errorf("%s: %d Job creations, want none", name, n)
		}
	}
	for _, id := range []string{hostilespool.ZeroResult, hostilespool.FIFOResult, hostilespool.FIFOResult2, "long"} {
		if n := e.auditCount("create", "jobs", e.jobName(id)); n != 0 {
			t.Errorf("%s: %d Job creations for a skipped request, want none", id, n)
		}
	}
	l, err := spool.ListRuns(e.spool, e.state)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range l.Runs {
		got[r.Name] = r.Status
	}
	if got[hostilespool.Good] != "succeeded" || got[hostilespool.ZeroResult] != spool.ListIgnored || got[hostilespool.Long] != spool.ListIgnored {
		t.Errorf("listing: %v", got)
	}
}
