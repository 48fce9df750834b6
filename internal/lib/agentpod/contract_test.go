package agentpod_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/render"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// contractConfig has a company in each egress mode whose policies select
// agent pods: standard (with an allowed CIDR), proxy and cilium.
var contractConfig = map[string]string{
	"settings.yaml": `apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata: {name: s}
spec: {}
`,
	"companies.yaml": `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: acme}
spec:
  id: acme-id
  egress: {mode: standard, allowCidrs: [10.20.0.0/16], allowPrivateCidrs: true}
  agents: [{name: coder, adapter: claude_local}]
---
apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: globex}
spec:
  id: globex-id
  egress: {mode: proxy, allowFqdns: [github.com]}
  agents: [{name: coder, adapter: claude_local}]
---
apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: initech}
spec:
  id: initech-id
  egress: {mode: cilium, allowFqdns: [github.com]}
  agents: [{name: coder, adapter: claude_local}]
`,
}

// TestRenderedSelectorsSelectRuntimePods: every selector of a rendered
// policy that is meant for agent pods selects the pods pcsync makes at run
// time (a run Job's pod, a sandbox lease pod), and the egress proxy's
// selects none of them. It fails when render's keys and the runtime's
// labels part, which would leave agent pods outside their egress policy
// (denied everything but by deny-all) or inside the proxy's.
func TestRenderedSelectorsSelectRuntimePods(t *testing.T) {
	m := loadModel(t)
	out, err := render.Render(m, render.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, co := range out.Companies {
		c, _ := m.Company(co.Slug)
		pods := runtimePods(t, m, c)
		agents, proxy := selectors(t, co.Objects)
		if len(agents) == 0 || len(proxy) == 0 && m.EgressMode(c) == config.EgressProxy {
			t.Fatalf("%s: found %d agent selectors, %d proxy selectors in the rendered policies", co.Slug, len(agents), len(proxy))
		}
		for kind, pod := range pods {
			for where, sel := range agents {
				if !sel.Matches(labels.Set(pod.Labels)) {
					t.Errorf("%s: %s (%s) does not select the %s (labels %v)", co.Slug, where, sel, kind, pod.Labels)
				}
				checked++
			}
			for where, sel := range proxy {
				if sel.Matches(labels.Set(pod.Labels)) {
					t.Errorf("%s: %s (%s) selects the %s as the egress proxy", co.Slug, where, sel, kind)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no selector checked")
	}
}

func loadModel(t *testing.T) *config.Model {
	t.Helper()
	dir := t.TempDir()
	for name, body := range contractConfig {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := config.Load(t.Context(), dir, config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// runtimePods are the agent pods pcsync makes for c's agent at run time,
// by kind.
func runtimePods(t *testing.T, m *config.Model, c *config.Company) map[string]*corev1.Pod {
	t.Helper()
	a, _ := c.Agent("coder")
	job, err := kubeexec.BuildJob(kubeexec.Input{Model: m, Company: c, Agent: a, RunID: "run-1",
		Command: adapters.Command{Args: []string{"claude"}}}, kubeexec.DefaultBuildOptions())
	if err != nil {
		t.Fatal(err)
	}
	lease, err := leasepod.BuildPod(&leasepod.Record{ID: "pcsync-sbx-1", Namespace: m.Namespace(c), Company: c.Slug(),
		Image: "img", Agent: a.Name, Server: images.ServerPath, ExpiresAt: time.Now().Add(time.Hour)}, m)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*corev1.Pod{
		"run Job's pod":     {ObjectMeta: job.Spec.Template.ObjectMeta},
		"sandbox lease pod": lease,
	}
}

// selectors are the label selectors of c's rendered policies, by where
// they are: those meant for agent pods, and those of the egress proxy's
// pods.
func selectors(t *testing.T, objs []*unstructured.Unstructured) (agents, proxy map[string]labels.Selector) {
	t.Helper()
	agents, proxy = map[string]labels.Selector{}, map[string]labels.Selector{}
	for _, o := range objs {
		ref := o.GetKind() + "/" + o.GetName()
		switch {
		case o.GetKind() == "NetworkPolicy" && o.GetName() == render.EgressAllowName:
			agents[ref+" spec.podSelector"] = selectorAt(t, o, "spec", "podSelector")
		case o.GetKind() == "CiliumNetworkPolicy":
			agents[ref+" spec.endpointSelector"] = selectorAt(t, o, "spec", "endpointSelector")
		case o.GetKind() == "NetworkPolicy" && o.GetName() == render.EgressProxyName:
			proxy[ref+" spec.podSelector"] = selectorAt(t, o, "spec", "podSelector")
			ingress, _, _ := unstructured.NestedSlice(o.Object, "spec", "ingress")
			from, _, _ := unstructured.NestedSlice(ingress[0].(map[string]any), "from")
			agents[ref+" spec.ingress[0].from[0].podSelector"] = toSelector(t, from[0].(map[string]any)["podSelector"])
		case o.GetKind() == "Deployment" && o.GetName() == render.EgressProxyName:
			proxy[ref+" spec.selector"] = selectorAt(t, o, "spec", "selector")
		}
	}
	return agents, proxy
}

func selectorAt(t *testing.T, o *unstructured.Unstructured, path ...string) labels.Selector {
	t.Helper()
	v, ok, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
	if !ok {
		t.Fatalf("%s/%s has no %v", o.GetKind(), o.GetName(), path)
	}
	return toSelector(t, v)
}

func toSelector(t *testing.T, v any) labels.Selector {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("selector %v is not an object", v)
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		t.Fatalf("selector %v selects every pod: not one meant for agents", v)
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}
