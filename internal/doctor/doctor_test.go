//go:build integration

package doctor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/introspect"
)

// Every test binary of this package runs one real control plane.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rows returns "area|name|status" per check, for comparison; details are
// checked separately where they matter.
func rows(r *Report) []string {
	var out []string
	for _, c := range r.Checks {
		out = append(out, c.Area+"|"+c.Name+"|"+string(c.Status))
	}
	return out
}

func detail(r *Report, area, name string) string {
	for _, c := range r.Checks {
		if c.Area == area && c.Name == name {
			return c.Detail
		}
	}
	return ""
}

func TestDoctorFindsWhatIsMissing(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	cs := c.Client()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	prefix := "d" + hex.EncodeToString(b) + "-"

	// Config: acme with sessions, a required and an optional secretRef, a
	// credential (whose Secret is missing) and a pull secret; globex in
	// cilium mode, not applied.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "settings.yaml"), fmt.Sprintf(
		"apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  namespacePrefix: %s\n  images: {pullSecrets: [regcred]}\n", prefix))
	writeFile(t, filepath.Join(dir, "acme.yaml"), `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: acme}
spec:
  id: acme-1
  sessions: {size: 1Gi}
  secretRefs:
    - {name: acme-keys, optional: false}
    - {name: acme-extra}
  credentials:
    - {name: claude, provider: anthropic, type: apiKey, secretRef: {name: model-keys, key: anthropic}}
  agents: [{name: coder, adapter: claude_local}]
`)
	writeFile(t, filepath.Join(dir, "globex.yaml"), `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: globex}
spec:
  id: globex-1
  egress: {mode: cilium}
  agents: [{name: coder, adapter: codex_local}]
`)

	// The acme tenant as pcsync would have applied it: its namespace, the
	// sessions PVC (bound by the test cluster's binder to a volume made
	// for it: the cluster has no provisioner) and the pull secret;
	// acme-keys is missing.
	acme := prefix + "acme"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: acme}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), acme, metav1.DeleteOptions{}) })
	pvc, err := cs.CoreV1().PersistentVolumeClaims(acme).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "paperclip-sessions"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bindSessions(ctx, t, cs, pvc)
	if _, err := cs.CoreV1().Secrets(acme).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// pcsync's own pod, with a pull secret of its own that agents inherit.
	self := c.Namespace(t, "pcsync-system", nil)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pcsync-0", Namespace: self},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pcsync", Image: "pcsync"}},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "mirror"}}}}
	if _, err := cs.CoreV1().Pods(self).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nsFile := filepath.Join(t.TempDir(), "namespace")
	writeFile(t, nsFile, self)

	opts := DefaultOptions()
	opts.ConfigDir, opts.Spool, opts.RESTConfig, opts.LeaseNamespace = dir, t.TempDir(), c.RESTConfig(), self
	opts.Introspect = introspect.Options{NamespaceFile: nsFile, Getenv: func(k string) string {
		return map[string]string{"POD_NAME": "pcsync-0"}[k]
	}}
	r := Run(ctx, opts)

	want := []string{
		"config|" + dir + "|ok",
		"cluster|reachable|ok",
		"rbac|permissions|ok",
		"crds|CiliumNetworkPolicy (cilium.io/v2)|fail",
		"inherit|own pod|ok",
		"inherit|agent Jobs inherit|info",
		"sessions|" + acme + "/paperclip-sessions|ok",
		"secrets|" + acme + "/acme-keys|fail",
		"secrets|" + acme + "/acme-extra|warn",
		"secrets|" + acme + "/regcred|ok",
		"secrets|" + acme + "/mirror|fail",
		"secrets|" + acme + "/model-keys|fail",
		"secrets|" + prefix + "globex|warn",
		"network|NetworkPolicies enforced|fail",
		"keys|acme|ok",
		"keys|globex|info",
		"images|Secret/" + acme + "/regcred|warn",
		"images|pcsync-agent-claude:dev|fail",
		"images|pcsync-agent-codex:dev|fail",
		"spool|" + opts.Spool + "|ok",
		"daemon|" + filepath.Join(opts.Spool, ".pcsync") + "|warn",
	}
	if diff := cmp.Diff(want, rows(r)); diff != "" {
		var buf bytes.Buffer
		_ = r.WriteTable(&buf)
		t.Errorf("checks (-want +got):\n%s\n%s", diff, buf.String())
	}
	for _, w := range []struct{ area, name, want string }{
		{"cluster", "reachable", "Kubernetes v1.34.4"},
		{"crds", "CiliumNetworkPolicy (cilium.io/v2)", "install Cilium"},
		{"inherit", "agent Jobs inherit", "imagePullSecrets: mirror"},
		{"secrets", acme + "/mirror", "inherited imagePullSecret does not exist"},
		{"secrets", acme + "/acme-keys", "cannot start"},
		{"secrets", acme + "/model-keys", "Secret of credential acme/claude does not exist: the runs and leases of coder (anthropic) fail before their pods start; create it in namespace " + acme + ` with key "anthropic"`},
		{"keys", "acme", "no agent holds a model key in its pod: the egress proxy holds acme/claude (anthropic)"},
		{"keys", "globex", "coder (codex_local: openai); spec.credentials would keep the openai keys in the egress proxy, which egress mode cilium does not run"},
		{"rbac", "permissions", "the per-tenant ones in " + acme},
		{"images", "Secret/" + acme + "/regcred", "not a docker config"},
		{"network", "NetworkPolicies enforced", "not proven that NetworkPolicies are enforced: namespace " + acme + " has no NetworkPolicy"},
		{"images", "pcsync-agent-claude:dev", "needed by acme/coder: pcsync's images have no registry: push them with `make images REGISTRY=<registry> PUSH=1`"},
	} {
		if got := detail(r, w.area, w.name); !strings.Contains(got, w.want) {
			t.Errorf("%s %s: detail %q lacks %q", w.area, w.name, got, w.want)
		}
	}

	// With inherit turned off, the inherited secret is not required.
	writeFile(t, filepath.Join(dir, "settings.yaml"), fmt.Sprintf(
		"apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  namespacePrefix: %s\n  images: {pullSecrets: [regcred]}\n  inherit: {imagePullSecrets: false}\n", prefix))
	r = Run(ctx, opts)
	for _, row := range rows(r) {
		if strings.Contains(row, "/mirror|") {
			t.Errorf("inherit off, yet checked: %s", row)
		}
	}
	if got := detail(r, "inherit", "agent Jobs inherit"); got != "nothing (its pod has no imagePullSecrets or dnsConfig)" {
		t.Errorf("inherit off: %q", got)
	}
}

func TestDoctorWithoutPermissionsOrCluster(t *testing.T) {
	c := testcluster.Get(t)
	// A service account that holds nothing.
	cfg := c.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:default:nobody"}
	opts := DefaultOptions()
	opts.RESTConfig = cfg
	opts.Introspect = introspect.Options{NamespaceFile: filepath.Join(t.TempDir(), "absent")}
	notDir := filepath.Join(t.TempDir(), "file")
	writeFile(t, notDir, "x")
	opts.Spool = notDir
	r := Run(context.Background(), opts)
	fails := map[string]int{}
	for _, ch := range r.Checks {
		if ch.Status == StatusFail {
			fails[ch.Area]++
		}
	}
	// Every permission but selfsubjectaccessreviews (everyone may ask) is
	// missing; the per-tenant ones are not checked without a tenant
	// namespace (no config here).
	wantRBAC := 0
	for _, p := range DefaultPermissions() {
		if !p.Optional && p.Resource != "selfsubjectaccessreviews" && p.Scope != ScopeTenant {
			wantRBAC++
		}
	}
	if got := detail(r, "rbac", "tenant permissions"); !strings.Contains(got, "per-tenant verbs not checked: no valid config names a tenant namespace") {
		t.Errorf("tenant permissions without a config: %q", got)
	}
	if diff := cmp.Diff(map[string]int{"rbac": wantRBAC, "spool": 1}, fails); diff != "" {
		var buf bytes.Buffer
		_ = r.WriteTable(&buf)
		t.Errorf("failed checks per area (-want +got):\n%s\n%s", diff, buf.String())
	}
	if got := detail(r, "inherit", "own pod"); !strings.Contains(got, "not running in a pod") {
		t.Errorf("inherit outside a pod: %q", got)
	}

	r = Run(context.Background(), Options{ClusterError: fmt.Errorf("no Kubernetes cluster configured")})
	if diff := cmp.Diff([]string{"config|config directory|skip", "cluster|reachable|fail", "inherit|own pod|skip",
		"spool|spool directory|skip"}, rows(r)); diff != "" {
		t.Errorf("without a cluster (-want +got):\n%s", diff)
	}
}

// bindSessions makes a PersistentVolume for pvc (pre-bound to it) and waits
// until the test cluster's binder has bound the claim.
func bindSessions(ctx context.Context, t *testing.T, cs kubernetes.Interface, pvc *corev1.PersistentVolumeClaim) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "doctor-" + pvc.Namespace},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			ClaimRef:               &corev1.ObjectReference{Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/nonexistent/doctor-test"}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		got, err := cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err == nil && got.Status.Phase == corev1.ClaimBound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("PersistentVolumeClaim/%s/%s not Bound after a minute (err %v)", pvc.Namespace, pvc.Name, err)
		}
	}
}
