//go:build integration

package kubeexec

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/hostilespool"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
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

// TestRecreatedJobWithCopiedNonceIsNotAdopted: the run's Job is created and
// its UID recorded; while no daemon runs, someone deletes it and creates
// another under the run's name with the same labels and annotations, the
// nonce copied. The next daemon does not adopt it: the run fails saying the
// Job's UID is not the one pcsync created, no Secret is created for the new
// Job, and the Job is left in place (pcsync neither deletes nor changes it).
func TestRecreatedJobWithCopiedNonceIsNotAdopted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{Labels: testcluster.RunForever()})
	const name = "recreated-1"
	e.drop(name, nil)
	job := e.jobName(name)
	first := e.startDaemon(false, nil)
	first.waitEvent(t, "started", name)
	first.stop(t)

	jobs := e.cs.BatchV1().Jobs(e.ns)
	orig, err := jobs.Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if orig.Annotations[AnnotationNonce] == "" {
		t.Fatalf("Job/%s/%s has no %s annotation", e.ns, job, AnnotationNonce)
	}
	bg := metav1.DeletePropagationBackground
	if err := jobs.Delete(ctx, job, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	e.waitUntil("the run's Job to be deleted", func() bool {
		_, err := jobs.Get(ctx, job, metav1.GetOptions{})
		return isNotFound(err)
	})
	// The copy: the Job pcsync builds for the run (the original's spec
	// holds the selector the API server generated for its UID), with the
	// original's labels and annotations, nonce included.
	copied := e.buildJob(name)
	copied.Labels, copied.Annotations = orig.Labels, orig.Annotations
	recreated, err := jobs.Create(ctx, copied, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if recreated.UID == orig.UID {
		t.Fatalf("the re-created Job has the original's UID %s", orig.UID)
	}

	e.startDaemon(true, nil).wait(t)

	res := e.result(name)
	want := fmt.Sprintf("a Job not created by pcsync holds the run's name Job/%s/%s (it carries the run's nonce but its UID %s is not the UID %s of the Job pcsync created",
		e.ns, job, recreated.UID, orig.UID)
	if res.Status != result.StatusFailed || !strings.Contains(deref(res.ErrorMessage), want) {
		t.Errorf("result: %s %s %q; want failed, %q", res.Status, deref(res.ErrorCode), deref(res.ErrorMessage), want)
	}
	got, err := jobs.Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		t.Errorf("the re-created Job: %v (it must be left in place)", err)
	} else if got.UID != recreated.UID || got.DeletionTimestamp != nil {
		t.Errorf("the re-created Job was replaced or deleted (uid %s → %s)", recreated.UID, got.UID)
	}
	// The test's own requests only: the first daemon's create, the test's
	// delete and create; the first daemon's Secret, none for the copy.
	counts := map[string]int{}
	for _, vr := range []string{"create jobs", "delete jobs", "update jobs", "patch jobs", "create secrets"} {
		verb, resource, _ := strings.Cut(vr, " ")
		counts[vr] = e.auditCount(verb, resource, job)
	}
	wantCounts := map[string]int{"create jobs": 2, "delete jobs": 1, "update jobs": 0, "patch jobs": 0, "create secrets": 1}
	if diff := cmp.Diff(wantCounts, counts); diff != "" {
		t.Errorf("requests on the run's Job and Secret (-want +got):\n%s", diff)
	}
}
