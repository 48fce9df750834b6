package kubeexec

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/podinformer"
)

// TestLabelsOneMeaning: paperclip.io/agent-id holds the agent's id as
// Paperclip knows it (the run's PAPERCLIP_AGENT_ID), pcsync.io/agent the
// pcsync agent's name, whatever the two are.
func TestLabelsOneMeaning(t *testing.T) {
	m := loadModel(t)
	c, _ := m.Company("acme")
	a, _ := c.Agent("coder")
	tests := []struct {
		name, agentID   string
		wantID, wantAgt string
	}{
		{"a Paperclip agent id", "0199c0de-aaaa-bbbb-cccc-000000000001", "0199c0de-aaaa-bbbb-cccc-000000000001", "coder"},
		{"a Paperclip agent id that is another agent's name", "reviewer", "reviewer", "coder"},
		{"no Paperclip agent id: PAPERCLIP_AGENT_ID is the name", "", "coder", "coder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Input{Model: m, Company: c, Agent: a, RunID: "r1", AgentID: tt.agentID}.Labels()
			got := [2]string{l[agentpod.LabelAgentID], l[agentpod.LabelAgent]}
			if diff := cmp.Diff([2]string{tt.wantID, tt.wantAgt}, got); diff != "" {
				t.Errorf("[agent-id, agent] labels (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentCountsOldAndNewJobs: a restarted daemon counts against an
// agent's concurrency (and so adopts within it) its unfinished Jobs, those
// labelled by this pcsync (pcsync.io/agent: the name; paperclip.io/agent-id:
// Paperclip's id) and those of a pcsync before pcsync.io/agent existed
// (paperclip.io/agent-id: the name), and no Job of another agent, even one
// whose Paperclip id reads like the agent's name.
func TestAgentCountsOldAndNewJobs(t *testing.T) {
	m := loadModel(t)
	c, _ := m.Company("acme")
	a, _ := c.Agent("coder")
	ns := m.Namespace(c)
	job := func(name string, labels map[string]string, finished bool) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}}
		if finished {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}
		return j
	}
	current := func(runID, paperclipID string) map[string]string {
		return Input{Model: m, Company: c, Agent: a, RunID: runID, AgentID: paperclipID}.Labels()
	}
	older := func(runID, agent string) map[string]string {
		// The labels of a Job created before pcsync.io/agent existed.
		return map[string]string{agentpod.LabelManagedBy: agentpod.ManagedByValue, agentpod.LabelRunID: runID, agentpod.LabelAgentID: agent, agentpod.LabelRole: agentpod.RoleAgent}
	}
	other := current("r5", "coder")
	other[agentpod.LabelAgent] = "reviewer"
	cs := fake.NewClientset(
		job("new", current("r1", "0199c0de-0001"), false),
		job("new-finished", current("r2", "0199c0de-0001"), true),
		job("old", older("r3", "coder"), false),
		job("old-other-agent", older("r4", "reviewer"), false),
		job("other-agent-with-an-id-like-coder", other, false),
	)
	tr := testTracker(t, cs)
	if err := tr.start(t.Context(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, agent := range []string{"coder", "reviewer", "0199c0de-0001"} {
		got[agent] = tr.occupied(agentKey{ns, agent})
	}
	want := map[string]int{"coder": 2, "reviewer": 2, "0199c0de-0001": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unfinished Jobs per agent (-want +got):\n%s", diff)
	}
}

// TestOccupiedCountsEachRunOnce: a run holds one slot of its agent whether
// it is only reserved (its Job being created), a cached unfinished Job, or
// both; a finished Job, a Job whose run the executor saw end, and another
// agent's reservation hold none.
func TestOccupiedCountsEachRunOnce(t *testing.T) {
	m := loadModel(t)
	c, _ := m.Company("acme")
	a, _ := c.Agent("coder")
	ns := m.Namespace(c)
	job := func(runID string, finished bool) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "job-" + runID, Namespace: ns,
			Labels: Input{Model: m, Company: c, Agent: a, RunID: runID}.Labels()}}
		if finished {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}
		return j
	}
	coder, reviewer := agentKey{ns, "coder"}, agentKey{ns, "reviewer"}
	tests := []struct {
		name     string
		jobs     []*batchv1.Job
		reserved map[string]agentKey
		ended    []string
		want     int
	}{
		{"nothing", nil, nil, nil, 0},
		{"reserved only", nil, map[string]agentKey{jobKey(ns, "job-r1"): coder}, nil, 1},
		{"a Job only", []*batchv1.Job{job("r1", false)}, nil, nil, 1},
		{"a Job and its reservation", []*batchv1.Job{job("r1", false)}, map[string]agentKey{jobKey(ns, "job-r1"): coder}, nil, 1},
		{"a Job, its reservation and another reservation", []*batchv1.Job{job("r1", false)},
			map[string]agentKey{jobKey(ns, "job-r1"): coder, jobKey(ns, "job-r2"): coder}, nil, 2},
		{"a finished Job", []*batchv1.Job{job("r1", true)}, nil, nil, 0},
		{"a Job whose run ended", []*batchv1.Job{job("r1", false)}, nil, []string{jobKey(ns, "job-r1")}, 0},
		{"another agent's reservation", []*batchv1.Job{job("r1", false)}, map[string]agentKey{jobKey(ns, "job-r9"): reviewer}, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset()
			for _, j := range tt.jobs {
				if _, err := cs.BatchV1().Jobs(ns).Create(t.Context(), j, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			tr := testTracker(t, cs)
			if err := tr.start(t.Context(), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			tr.mu.Lock()
			for key, k := range tt.reserved {
				tr.reserved[key] = k
			}
			for _, key := range tt.ended {
				tr.ended[key] = true
			}
			tr.mu.Unlock()
			if got := tr.occupied(coder); got != tt.want {
				t.Errorf("occupied(coder) = %d, want %d", got, tt.want)
			}
		})
	}
}

// testTracker is a tracker of cs beside a pod informer of cs (the
// daemon's is shared), which runs until the test ends.
func testTracker(t *testing.T, cs kubernetes.Interface) *tracker {
	t.Helper()
	pods := podinformer.New(cs, podinformer.DefaultOptions())
	if err := pods.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pods.Stop)
	return newTracker(cs, pods)
}
