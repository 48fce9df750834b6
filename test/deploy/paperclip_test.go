package deploy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/pcsync/pcsync/internal/testing/testkustomize"
	"github.com/pcsync/pcsync/pkg/config"
)

// TestPaperclipOverlay renders deploy/paperclip: pcsync is a sidecar of
// the Paperclip server, the spool a ReadWriteOnce PersistentVolumeClaim
// both containers mount at /spool (a replaced pod loses no run), base's own Deployment and RWX spool are gone, pcsync's RBAC
// names the pod's service account, only pcsync gets its token, and the
// Service is where a default config sends agent pods (PAPERCLIP_API_URL).
func TestPaperclipOverlay(t *testing.T) {
	objs := buildDir(t, "paperclip")
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
		if ns := o.GetNamespace(); ns != "" && ns != "paperclip" {
			t.Errorf("%s/%s is in namespace %s, want paperclip", o.GetKind(), o.GetName(), ns)
		}
	}
	sort.Strings(kinds)
	want := []string{"ClusterRole/pcsync", "ClusterRole/pcsync-tenant", "ClusterRoleBinding/pcsync",
		"CustomResourceDefinition/companystatuses.pcsync.io", "Deployment/paperclip-server", "Namespace/paperclip",
		"PersistentVolumeClaim/paperclip-data", "PersistentVolumeClaim/paperclip-spool", "Role/pcsync", "RoleBinding/pcsync",
		"Service/paperclip-server", "Service/pcsync-metrics", "ServiceAccount/pcsync"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("objects of deploy/paperclip (-want +got):\n%s", diff)
	}
	ns := typed[corev1.Namespace](t, testkustomize.Find(objs, "Namespace", "paperclip"))
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Errorf("namespace paperclip enforces Pod Security %q, want restricted", got)
	}
	crb := typed[rbacv1.ClusterRoleBinding](t, testkustomize.Find(objs, "ClusterRoleBinding", "pcsync"))
	rb := typed[rbacv1.RoleBinding](t, testkustomize.Find(objs, "RoleBinding", "pcsync"))
	dep := typed[appsv1.Deployment](t, testkustomize.Find(objs, "Deployment", "paperclip-server"))
	pod := dep.Spec.Template.Spec
	got := []string{crb.Subjects[0].Namespace + "/" + crb.Subjects[0].Name, rb.Subjects[0].Namespace + "/" + rb.Subjects[0].Name,
		dep.Namespace + "/" + pod.ServiceAccountName}
	if diff := cmp.Diff([]string{"paperclip/pcsync", "paperclip/pcsync", "paperclip/pcsync"}, got); diff != "" {
		t.Errorf("service account of the bindings and the pod (-want +got):\n%s", diff)
	}

	var spool *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == "spool" {
			spool = &pod.Volumes[i]
		}
	}
	if spool == nil || spool.PersistentVolumeClaim == nil || spool.PersistentVolumeClaim.ClaimName != "paperclip-spool" {
		t.Fatalf("the spool volume is %+v, want the PersistentVolumeClaim paperclip-spool", spool)
	}
	pvc := typed[corev1.PersistentVolumeClaim](t, testkustomize.Find(objs, "PersistentVolumeClaim", "paperclip-spool"))
	if diff := cmp.Diff([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pvc.Spec.AccessModes); diff != "" {
		t.Errorf("access modes of the spool's claim (-want +got):\n%s", diff)
	}
	if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("the Deployment's strategy is %q, want Recreate (the old pod lets go of the RWO spool first)", dep.Spec.Strategy.Type)
	}
	mounts := map[string][]string{}
	for _, c := range pod.Containers {
		for _, m := range c.VolumeMounts {
			mounts[c.Name] = append(mounts[c.Name], m.Name+":"+m.MountPath)
		}
	}
	for _, c := range []string{"paperclip", "pcsync"} {
		if !slices.Contains(mounts[c], "spool:/spool") {
			t.Errorf("container %s does not mount the spool at /spool: %v", c, mounts[c])
		}
	}
	for c, ms := range mounts {
		has := slices.Contains(ms, "pcsync-token:/var/run/secrets/kubernetes.io/serviceaccount")
		if has != (c == "pcsync") {
			t.Errorf("container %s mounts the service account token: %v", c, has)
		}
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pod automounts the service account token into every container")
	}
	var pcsync corev1.Container
	for _, c := range pod.Containers {
		if c.Name == "pcsync" {
			pcsync = c
		}
	}
	if !slices.Contains(pcsync.Args, "--spool=/spool") || !slices.Contains(pcsync.Args, "--executor=kubernetes") {
		t.Errorf("pcsync args %v", pcsync.Args)
	}

	// A config with Settings left at their defaults sends agent pods to
	// this Service, and its egress policy allows these pods.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "acme.yaml"), []byte(
		"apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec:\n  id: co-1\n  agents: [{name: coder, adapter: claude_local}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
	if err != nil {
		t.Fatal(err)
	}
	svc := typed[corev1.Service](t, testkustomize.Find(objs, "Service", "paperclip-server"))
	url := "http://" + svc.Name + "." + svc.Namespace + ".svc:" + strconv.Itoa(int(svc.Spec.Ports[0].Port))
	if url != m.ServerURL() {
		t.Errorf("the Service is %s, a default config sends agent pods to %s", url, m.ServerURL())
	}
	srv := m.Settings.Spec.Server
	for k, v := range srv.PodSelector {
		if dep.Spec.Template.Labels[k] != v || svc.Spec.Selector[k] != v {
			t.Errorf("spec.server.podSelector %s=%s does not select the Paperclip pod (labels %v) or its Service", k, v, dep.Spec.Template.Labels)
		}
	}
	if srv.Namespace != dep.Namespace {
		t.Errorf("spec.server.namespace %s, the Paperclip pod is in %s", srv.Namespace, dep.Namespace)
	}
	metrics := typed[corev1.Service](t, testkustomize.Find(objs, "Service", "pcsync-metrics"))
	if diff := cmp.Diff(map[string]string{"app": "paperclip-server"}, metrics.Spec.Selector); diff != "" {
		t.Errorf("pcsync-metrics selector (-want +got):\n%s", diff)
	}
}
