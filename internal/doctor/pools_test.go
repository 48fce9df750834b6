//go:build integration

package doctor

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// doctor shows each declared warm pool against its members in the tenant
// namespace (a member of another image is not the pool's), and the
// members no pool declares. The doctor runs right after the creates,
// without a wait: its one pool member, m1, asks for a node label no node
// has and stays Pending, so "Ready 0" holds however soon kwok runs the
// others (which count in no pool's Ready).
func TestDoctorWarmPools(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	ns := c.Namespace(t, "pools", nil)
	i := strings.LastIndexByte(ns, '-')
	prefix, slug := ns[:i+1], ns[i+1:]
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "settings.yaml"), fmt.Sprintf(
		"apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  namespacePrefix: %s\n  images: {registry: reg.example/pcsync}\n", prefix))
	writeFile(t, filepath.Join(dir, "acme.yaml"), fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: %q}
spec:
  id: acme-1
  agents: [{name: coder, adapter: claude_local, nodeSelector: {disk: ssd}}]
  sandbox:
    warmPool:
      - {adapterType: claude_local, count: 2, agent: coder}
      - {adapterType: codex_local, count: 1}
`, slug))
	member := func(cs kubernetes.Interface, name, image string, sel map[string]string) {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{pool.Label: "h"}},
			Spec: corev1.PodSpec{NodeSelector: sel, Containers: []corev1.Container{{Name: "sandbox", Image: image}}}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	claude := "reg.example/pcsync/pcsync-agent-claude:dev"
	member(c.Client(), "m1", claude, map[string]string{"disk": "ssd"})
	member(c.Client(), "m2", claude, nil) // not the agent's scheduling
	member(c.Client(), "m3", "reg.example/other:1", nil)

	opts := DefaultOptions()
	opts.ConfigDir, opts.RESTConfig = dir, c.RESTConfig()
	opts.Images.Tag = "dev"
	r := Run(ctx, opts)
	var got []string
	for _, ch := range r.Checks {
		if ch.Area == "warm pool" {
			got = append(got, ch.Name+"|"+string(ch.Status)+"|"+ch.Detail)
		}
	}
	want := []string{
		ns + " " + claude + " (agent coder)|warn|declared 2, members 1, Ready 0",
		ns + " reg.example/pcsync/pcsync-agent-codex:dev|warn|declared 1, members 0, Ready 0",
		ns + "|warn|2 members of no declared pool: the daemon drains them",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warm pool rows (-want +got):\n%s", diff)
	}
}
