package leasepod

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/podsched"
	"github.com/pcsync/pcsync/pkg/podsec"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
	"github.com/pcsync/pcsync/pkg/sandbox/internal/sandboxtest"
)

// TestLeasePodSchedulingIsTheJobs: a lease pod of an agent declared in Git
// has the scheduling fields of that agent's run Job, field for field; a
// lease of no declared agent has the company's defaults.
func TestLeasePodSchedulingIsTheJobs(t *testing.T) {
	m := sandboxtest.SchedModel(t)
	c, _ := m.Company("acme")
	gvisor := "gvisor"
	tests := []struct {
		name, agent string
		want        podsched.Scheduling
	}{
		{"pinned", "pinned", podsched.Scheduling{
			NodeSelector: map[string]string{"pool": "agents", "topology.kubernetes.io/zone": "eu-west-1a"},
			Tolerations: []corev1.Toleration{
				{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "agents", Effect: corev1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(60))},
			},
			RuntimeClassName: &gvisor,
		}},
		{"zoned", "zoned", podsched.Scheduling{NodeSelector: map[string]string{"topology.kubernetes.io/zone": "eu-west-1b"}, RuntimeClassName: &gvisor}},
		{"free", "free", podsched.Scheduling{RuntimeClassName: &gvisor}},
		{"no agent declared in Git: the company's defaults", "", podsched.Scheduling{RuntimeClassName: &gvisor}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &Record{ID: "pcsync-sbx-1", Namespace: m.Namespace(c), Company: "acme", Image: "img", Agent: tt.agent,
				Server: "/usr/local/bin/pcsync", ExpiresAt: time.Now().Add(time.Hour)}
			pod, err := BuildPod(l, m)
			if err != nil {
				t.Fatal(err)
			}
			lease := podsched.Of(&pod.Spec)
			if diff := cmp.Diff(tt.want, lease); diff != "" {
				t.Errorf("lease pod's scheduling (-want +got):\n%s", diff)
			}
			if tt.agent == "" {
				return
			}
			a, _ := c.Agent(tt.agent)
			job, err := kubeexec.BuildJob(kubeexec.Input{Model: m, Company: c, Agent: a, RunID: "run-1",
				Command: adapters.Command{Args: []string{"claude"}}}, kubeexec.DefaultBuildOptions())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(podsched.Of(&job.Spec.Template.Spec), lease); diff != "" {
				t.Errorf("the lease pod's scheduling is not the Job's (-job +lease):\n%s", diff)
			}
		})
	}
}

// TestLeasePodHardeningIsTheJobs: a lease pod is hardened as the run Job
// of the same agent, field for field, and its helper container (when the
// image holds no pcsync) as its main container.
func TestLeasePodHardeningIsTheJobs(t *testing.T) {
	m := sandboxtest.SchedModel(t)
	c, _ := m.Company("acme")
	a, _ := c.Agent("pinned")
	job, err := kubeexec.BuildJob(kubeexec.Input{Model: m, Company: c, Agent: a, RunID: "run-1",
		Command: adapters.Command{Args: []string{"claude"}}}, kubeexec.DefaultBuildOptions())
	if err != nil {
		t.Fatal(err)
	}
	jobs := podsec.Of(&job.Spec.Template.Spec)
	if jobs.SecurityContext == nil || len(jobs.Containers) != 1 || jobs.Containers[0].SecurityContext == nil {
		t.Fatalf("the Job is not hardened: %+v", jobs)
	}
	withHelper := jobs
	withHelper.Containers = append([]podsec.ContainerFields{jobs.Containers[0]}, jobs.Containers...)
	tests := []struct {
		name   string
		server string
		want   podsec.Fields
	}{
		{"pcsync in the image", "/usr/local/bin/pcsync", jobs},
		{"pcsync copied in by a helper container", "", withHelper},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &Record{ID: "pcsync-sbx-1", Namespace: m.Namespace(c), Company: "acme", Image: "img", Agent: "pinned",
				Server: tt.server, HelperImage: "helper", ExpiresAt: time.Now().Add(time.Hour)}
			pod, err := BuildPod(l, m)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, podsec.Of(&pod.Spec)); diff != "" {
				t.Errorf("the lease pod's hardening is not the Job's (-job +lease):\n%s", diff)
			}
		})
	}
}

// TestLeasePodLabels: paperclip.io/agent-id holds Paperclip's agent id,
// pcsync.io/agent the pcsync agent's name, as on the agent's Jobs; a lease
// of no agent declared in Git has no pcsync.io/agent.
func TestLeasePodLabels(t *testing.T) {
	m := sandboxtest.SchedModel(t)
	c, _ := m.Company("acme")
	tests := []struct {
		name, agent, agentID string
		want                 map[string]string
	}{
		{"a declared agent", "pinned", "0199c0de-0001", map[string]string{agentpod.LabelAgentID: "0199c0de-0001", agentpod.LabelAgent: "pinned"}},
		{"no agent declared in Git", "", "0199c0de-0002", map[string]string{agentpod.LabelAgentID: "0199c0de-0002"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &Record{ID: "pcsync-sbx-1", Namespace: m.Namespace(c), Company: "acme", Image: "img", Agent: tt.agent, AgentID: tt.agentID,
				Server: "/usr/local/bin/pcsync", ExpiresAt: time.Now().Add(time.Hour)}
			pod, err := BuildPod(l, m)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, k := range []string{agentpod.LabelAgentID, agentpod.LabelAgent} {
				if v, ok := pod.Labels[k]; ok {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("agent labels (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLeasePodCodexConfigDir: a codex lease's pod has a writable
// /etc/codex (on its run emptyDir) for the system config the daemon writes
// when the lease uses a credential; other leases' pods have none.
func TestLeasePodCodexConfigDir(t *testing.T) {
	m := sandboxtest.SchedModel(t)
	c, _ := m.Company("acme")
	for adapter, want := range map[string][]string{"codex_local": {"run:etc-codex"}, "claude_local": nil} {
		l := &Record{ID: "pcsync-sbx-1", Namespace: m.Namespace(c), Company: "acme", Image: "img", AdapterType: adapter,
			Server: "/usr/local/bin/pcsync", ExpiresAt: time.Now().Add(time.Hour)}
		pod, err := BuildPod(l, m)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, vm := range pod.Spec.Containers[0].VolumeMounts {
			if vm.MountPath == adapters.CodexSystemConfigDir && !vm.ReadOnly {
				got = append(got, vm.Name+":"+vm.SubPath)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: mounts at %s (-want +got):\n%s", adapter, adapters.CodexSystemConfigDir, diff)
		}
	}
}

// TestBuildPodUnknownAgent: a record naming an agent the company does not
// declare is refused, not built with some other scheduling.
func TestBuildPodUnknownAgent(t *testing.T) {
	m := sandboxtest.SchedModel(t)
	c, _ := m.Company("acme")
	l := &Record{ID: "pcsync-sbx-1", Namespace: m.Namespace(c), Company: "acme", Image: "img", Agent: "gone", ExpiresAt: time.Now().Add(time.Hour)}
	if _, err := BuildPod(l, m); err == nil {
		t.Fatal("BuildPod of a record naming an undeclared agent: no error")
	}
}

// TestLeasePodNoClusterDNSInProxyMode: a lease pod of a company in egress
// mode proxy has no cluster DNS (its lookups fail at once on its own
// loopback); one in another mode keeps the cluster's.
func TestLeasePodNoClusterDNSInProxyMode(t *testing.T) {
	for _, tc := range []struct {
		mode       config.EgressMode
		wantPolicy corev1.DNSPolicy
		wantConfig *corev1.PodDNSConfig
	}{
		{config.EgressProxy, corev1.DNSNone, &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"},
			Options: []corev1.PodDNSConfigOption{{Name: "attempts", Value: ptr.To("1")}, {Name: "timeout", Value: ptr.To("1")}}}},
		{config.EgressStandard, "", nil},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			m := sandboxtest.SchedModel(t)
			m.Settings.Spec.Egress.Mode = tc.mode
			c, _ := m.Company("acme")
			c.Spec.Egress.Mode = ""
			l := &Record{ID: "pcsync-sbx-1", Namespace: m.Namespace(c), Company: "acme", Image: "img",
				Server: "/usr/local/bin/pcsync", ExpiresAt: time.Now().Add(time.Hour)}
			pod, err := BuildPod(l, m)
			if err != nil {
				t.Fatal(err)
			}
			if pod.Spec.DNSPolicy != tc.wantPolicy {
				t.Errorf("dnsPolicy %q, want %q", pod.Spec.DNSPolicy, tc.wantPolicy)
			}
			if diff := cmp.Diff(tc.wantConfig, pod.Spec.DNSConfig); diff != "" {
				t.Errorf("dnsConfig (-want +got):\n%s", diff)
			}
		})
	}
}
