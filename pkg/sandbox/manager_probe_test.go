package sandbox

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

// TestProbePods: the probe dry-runs the company's defaults and one pod
// per distinct scheduling of the agents in its sandbox environments.
func TestProbePods(t *testing.T) {
	c := &config.Company{Spec: config.CompanySpec{Agents: []config.Agent{
		{Name: "a", NodeSelector: map[string]string{"pool": "x"}, Paperclip: config.PaperclipAgent{Environment: "k8s"}},
		{Name: "jobs-only", NodeSelector: map[string]string{"pool": "y"}},
		{Name: "b", NodeSelector: map[string]string{"pool": "x"}, Paperclip: config.PaperclipAgent{Environment: "k8s"}},
		{Name: "plain", Paperclip: config.PaperclipAgent{Environment: "k8s"}},
		{Name: "c", Tolerations: []config.Toleration{{Key: "t", Operator: "Exists"}}, Paperclip: config.PaperclipAgent{Environment: "k8s"}},
	}}}
	want := []probePod{
		{who: "a lease pod of an agent the config does not declare"},
		{who: "a lease pod of agents a, b", agent: "a"},
		{who: "a lease pod of agent c", agent: "c"},
	}
	if diff := cmp.Diff(want, probePods(c), cmp.AllowUnexported(probePod{})); diff != "" {
		t.Errorf("probePods (-want +got):\n%s", diff)
	}
}
