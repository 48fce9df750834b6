//go:build integration

package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/config"
)

// schedAgents are agents with scheduling of their own; kwok's node is
// kwok-node-0 (testcluster's default).
const schedAgents = `[
    {name: pinned, adapter: claude_local, nodeSelector: {kubernetes.io/hostname: kwok-node-0},
     tolerations: [{key: dedicated, operator: Equal, value: agents, effect: NoSchedule}], paperclip: {environment: k8s}},
    {name: twin, adapter: claude_local, nodeSelector: {kubernetes.io/hostname: kwok-node-0},
     tolerations: [{key: dedicated, operator: Equal, value: agents, effect: NoSchedule}], paperclip: {environment: k8s}},
    {name: jobs-only, adapter: claude_local, nodeSelector: {pool: batch}}]`

// resolverFunc is an AgentResolver of a function.
type resolverFunc func(id string) (string, error)

func (f resolverFunc) ResolveAgent(_ context.Context, _ *config.Model, _ *config.Company, id string) (string, error) {
	return f(id)
}

// TestProbeScheduling: the probe dry-runs a lease pod for the company's
// defaults and one per distinct scheduling of the agents in its sandbox
// environments, and says which nodes each needs.
func TestProbeScheduling(t *testing.T) {
	e := newEnv(t, envOptions{Agents: schedAgents, Environment: "k8s"})
	out := e.m.Probe(context.Background(), map[string]any{"company": e.slug()})
	var admitted []string
	for _, d := range out.Diagnostics {
		if d.Code == CodePodAdmitted {
			// The part after the namespace: who and where.
			who, _, _ := strings.Cut(d.Message, " (image ")
			_, needs, _ := strings.Cut(d.Message, " and needs ")
			admitted = append(admitted, who+" needs "+needs)
		}
	}
	want := []string{
		"a lease pod of an agent the config does not declare needs any schedulable node",
		"a lease pod of agents pinned, twin needs nodes kubernetes.io/hostname=kwok-node-0; tolerating dedicated=agents:NoSchedule",
	}
	if diff := cmp.Diff(want, admitted); diff != "" || !out.OK {
		t.Errorf("probe ok %v; pods admitted (-want +got):\n%s\ndiagnostics: %+v", out.OK, diff, out.Diagnostics)
	}
}

// TestAcquireFollowsTheAgent: a lease whose Paperclip agent id the resolver
// names gets that agent's scheduling and says so in its record; one whose
// agent cannot be told is refused before any pod exists.
func TestAcquireFollowsTheAgent(t *testing.T) {
	e := newEnv(t, envOptions{Agents: schedAgents, Environment: "k8s", Resolver: resolverFunc(func(id string) (string, error) {
		switch id {
		case "pc-pinned":
			return "pinned", nil
		case "pc-down":
			return "", errors.New("Paperclip at http://127.0.0.1:1 is unreachable")
		}
		return "", nil
	})})
	ctx := context.Background()
	_, err := e.m.Acquire(ctx, AcquireParams{Config: EnvironmentConfig{Company: e.slug()}, AdapterType: "claude_local", AgentID: "pc-down"})
	var ue *UserError
	if !errors.As(err, &ue) || ue.Code != "agent_unresolved" || !strings.Contains(ue.Message, "unreachable") {
		t.Errorf("acquire whose agent cannot be told: %v; want agent_unresolved with the cause", err)
	}
	if pods, err := e.c.Client().CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Fatalf("pods after the refusal: %v, %v; want none", pods, err)
	}

	info, err := e.m.Acquire(ctx, AcquireParams{Config: EnvironmentConfig{Company: e.slug()}, AdapterType: "claude_local", AgentID: "pc-pinned"})
	if err != nil {
		t.Fatalf("acquire: %v\nlogs:\n%s", err, e.logs.String())
	}
	pod, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "kwok-node-0" || pod.Spec.NodeSelector["kubernetes.io/hostname"] != "kwok-node-0" || pod.Spec.Tolerations[0].Key != "dedicated" {
		t.Errorf("lease pod on %q, nodeSelector %v, tolerations %v; want agent pinned's", pod.Spec.NodeName, pod.Spec.NodeSelector, pod.Spec.Tolerations)
	}
	if l := e.m.lookup(info.ID); l == nil || l.Agent != "pinned" {
		t.Errorf("lease record %+v; want agent pinned", l)
	}
	if _, err := e.m.Release(ctx, ReleaseParams{ID: info.ID}); err != nil {
		t.Fatal(err)
	}
}
