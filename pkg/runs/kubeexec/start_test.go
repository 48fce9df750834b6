package kubeexec

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/pcsync/pcsync/internal/lib/podinformer"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/tenantns"
)

// startExecutor is an Executor on a fake clientset, enough for Start's
// steps up to a handle: no watches run and no worker takes the queue.
func startExecutor(t *testing.T, cs *fake.Clientset) *Executor {
	t.Helper()
	opts := Options{StateDir: t.TempDir(), Environ: func() []string { return testEnviron }, Logger: slog.New(slog.DiscardHandler)}
	opts.complete()
	return &Executor{ctx: t.Context(), client: cs, window: newStartWindow(4), journal: quietJournal(t, opts.StateDir),
		opts: opts, tracker: newTracker(cs, podinformer.New(cs, podinformer.DefaultOptions())), tenants: tenantns.New(cs, 0)}
}

// refuse makes the fake clientset answer verb on resource with err.
func refuse(cs *fake.Clientset, verb, resource string, err error) {
	cs.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err })
}

// TestStartRollsBack: a start whose step fails undoes every step done
// before it (the Job it created, the journal record, the start window's
// place, the concurrency reservation) and says what became of the Job.
func TestStartRollsBack(t *testing.T) {
	m := loadModel(t)
	const body = `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"coder","prompt":"Fix the login bug."}`
	forbidden := func(resource string) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("no"))
	}
	for _, tc := range []struct {
		name string
		// setup prepares the fake cluster; job is the run's Job name.
		setup func(cs *fake.Clientset, job *batchv1.Job)
		// wantErr is Start's error, with JOB for ns/name of the run's Job.
		wantErr  string
		wantCode result.ErrorCode
		// wantJob says whether the run's Job is left in the cluster.
		wantJob bool
	}{{
		name:    "Secret refused",
		setup:   func(cs *fake.Clientset, _ *batchv1.Job) { refuse(cs, "create", "secrets", forbidden("secrets")) },
		wantErr: `Secret/JOB create failed: secrets is forbidden: no (the Job was deleted)`,
	}, {
		name: "Secret refused and the Job's delete too",
		setup: func(cs *fake.Clientset, _ *batchv1.Job) {
			refuse(cs, "create", "secrets", forbidden("secrets"))
			refuse(cs, "delete", "jobs", forbidden("jobs"))
		},
		wantErr: `Secret/JOB create failed: secrets is forbidden: no (and Job/JOB delete failed: jobs is forbidden: no)`,
		wantJob: true,
	}, {
		name: "no tenant namespace",
		setup: func(cs *fake.Clientset, _ *batchv1.Job) {
			refuse(cs, "create", "jobs", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "paperclip-acme"))
		},
		wantErr: `Job/JOB create failed: namespaces "paperclip-acme" not found (the tenant manifests are not applied: run pcsync apply)`,
	}, {
		name: "runId taken by another request",
		setup: func(cs *fake.Clientset, job *batchv1.Job) {
			other := job.DeepCopy()
			other.Annotations[AnnotationRequest] = "/spool/other.json"
			if err := cs.Tracker().Add(other); err != nil {
				panic(err)
			}
		},
		wantErr:  `Job/JOB already exists for request "/spool/other.json": the runId "fix-login" of company acme agent coder is taken`,
		wantCode: result.ErrInvalidRequest,
		wantJob:  true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := parseRun(t, m, t.TempDir(), "fix-login.json", body)
			in, err := NewInput(r, testEnviron, DefaultBuildOptions())
			if err != nil {
				t.Fatal(err)
			}
			job, err := BuildJob(in, DefaultBuildOptions())
			if err != nil {
				t.Fatal(err)
			}
			cs := fake.NewClientset()
			tc.setup(cs, job)
			e := startExecutor(t, cs)

			h, err := e.Start(context.Background(), r)
			if h != nil || err == nil {
				t.Fatalf("Start = %v, %v; want an error", h, err)
			}
			want := strings.ReplaceAll(tc.wantErr, "JOB", job.Namespace+"/"+job.Name)
			if diff := cmp.Diff(want, err.Error()); diff != "" {
				t.Errorf("Start's error (-want +got):\n%s", diff)
			}
			var se *runs.StartError
			if got := errors.As(err, &se); got != (tc.wantCode != "") || got && se.Code != tc.wantCode {
				t.Errorf("Start's error %#v, want a StartError with code %q", err, tc.wantCode)
			}

			_, jerr := cs.BatchV1().Jobs(job.Namespace).Get(context.Background(), job.Name, metav1.GetOptions{})
			_, recorded := e.journal.get(r.Name())
			limit, _ := e.window.state()
			e.window.mu.Lock()
			inflight := e.window.inflight
			e.window.mu.Unlock()
			type left struct {
				Job, Recorded    bool
				Reserved         int
				WindowLimit, Now int
			}
			if diff := cmp.Diff(left{Job: tc.wantJob, WindowLimit: 4},
				left{Job: jerr == nil, Recorded: recorded, Reserved: e.Running(job.Namespace, r.Agent.Name), WindowLimit: limit, Now: inflight}); diff != "" {
				t.Errorf("what the failed start left (-want +got):\n%s", diff)
			}
		})
	}
}
