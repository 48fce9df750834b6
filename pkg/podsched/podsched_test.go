package podsched_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/podsched"
)

// TestFor: the agent gives the node selector and the tolerations, the
// company the runtime class; a pod that serves no declared agent gets the
// company's part alone.
func TestFor(t *testing.T) {
	kata := config.Company{Spec: config.CompanySpec{RuntimeClassName: "kata-fc"}}
	plain := config.Company{}
	pinned := config.Agent{
		Name:         "pinned",
		NodeSelector: map[string]string{"pool": "agents", "topology.kubernetes.io/zone": "eu-west-1a"},
		Tolerations: []config.Toleration{
			{Key: "dedicated", Operator: "Equal", Value: "agents", Effect: "NoSchedule"},
			{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr.To(int64(30))},
		},
	}
	tests := []struct {
		name    string
		company *config.Company
		agent   *config.Agent
		want    podsched.Scheduling
		says    string
	}{
		{"no agent, no runtime class", &plain, nil, podsched.Scheduling{}, "any schedulable node"},
		{"no agent: the company's runtime class", &kata, nil,
			podsched.Scheduling{RuntimeClassName: ptr.To("kata-fc")}, "runtime class kata-fc"},
		{"an agent with no scheduling", &kata, &config.Agent{Name: "free", NodeSelector: map[string]string{}},
			podsched.Scheduling{RuntimeClassName: ptr.To("kata-fc")}, "runtime class kata-fc"},
		{"the agent's selector and tolerations, the company's runtime class", &kata, &pinned,
			podsched.Scheduling{
				NodeSelector: map[string]string{"pool": "agents", "topology.kubernetes.io/zone": "eu-west-1a"},
				Tolerations: []corev1.Toleration{
					{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "agents", Effect: corev1.TaintEffectNoSchedule},
					{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(30))},
				},
				RuntimeClassName: ptr.To("kata-fc"),
			},
			"nodes pool=agents,topology.kubernetes.io/zone=eu-west-1a; " +
				"tolerating dedicated=agents:NoSchedule, node.kubernetes.io/unreachable:NoExecute for 30s; runtime class kata-fc"},
		{"tolerate everything", &plain, &config.Agent{Tolerations: []config.Toleration{{Operator: "Exists"}}},
			podsched.Scheduling{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, "tolerating *"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := podsched.For(tt.company, tt.agent)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("For (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.says, got.String()); diff != "" {
				t.Errorf("String (-want +got):\n%s", diff)
			}
			var spec corev1.PodSpec
			got.Apply(&spec)
			if diff := cmp.Diff(tt.want, podsched.Of(&spec)); diff != "" {
				t.Errorf("Of(Apply) (-want +got):\n%s", diff)
			}
		})
	}
}

// TestForCopies: a pod's scheduling shares no memory with the config, so
// that changing one pod's spec cannot change the next pod's.
func TestForCopies(t *testing.T) {
	c := &config.Company{Spec: config.CompanySpec{RuntimeClassName: "gvisor"}}
	a := &config.Agent{NodeSelector: map[string]string{"pool": "agents"},
		Tolerations: []config.Toleration{{Key: "k", Operator: "Exists", TolerationSeconds: ptr.To(int64(5))}}}
	s := podsched.For(c, a)
	s.NodeSelector["pool"] = "other"
	*s.Tolerations[0].TolerationSeconds = 99
	*s.RuntimeClassName = "runc"
	want := podsched.Scheduling{
		NodeSelector:     map[string]string{"pool": "agents"},
		Tolerations:      []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To(int64(5))}},
		RuntimeClassName: ptr.To("gvisor"),
	}
	if diff := cmp.Diff(want, podsched.For(c, a)); diff != "" {
		t.Errorf("For after changing an earlier result (-want +got):\n%s", diff)
	}
}
