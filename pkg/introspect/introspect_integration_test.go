//go:build integration

package introspect

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/config"
)

// Every test binary of this package runs one real control plane.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func nsFile(t *testing.T, ns string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(p, []byte(ns+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDetectReadsItsOwnPod(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "introspect", nil)
	ctx := context.Background()
	ndots := "2"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pcsync-7d9f-abcde", Namespace: ns},
		Spec: corev1.PodSpec{
			Containers:       []corev1.Container{{Name: "git-sync", Image: "registry.example/git-sync:v4"}, {Name: "pcsync", Image: "registry.example/pcsync:v1"}},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "mirror-creds"}, {Name: "ghcr-creds"}},
			DNSPolicy:        corev1.DNSNone,
			DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.53"}, Searches: []string{"corp.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}}},
		},
	}
	if _, err := c.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOSTNAME": pod.Name}
	self, err := Detect(ctx, c.Client(), Options{NamespaceFile: nsFile(t, ns), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	want := &Self{InCluster: true, Namespace: ns, Name: pod.Name, ServiceAccount: "default",
		ImagePullSecrets: []string{"mirror-creds", "ghcr-creds"}, Image: "registry.example/pcsync:v1",
		DNSPolicy: corev1.DNSNone, DNSConfig: pod.Spec.DNSConfig}
	if diff := cmp.Diff(want, self); diff != "" {
		t.Errorf("Detect (-want +got):\n%s", diff)
	}

	all := self.Inherit(config.Inherit{ImagePullSecrets: true, DNSConfig: true})
	if diff := cmp.Diff(Inheritance{ImagePullSecrets: []string{"mirror-creds", "ghcr-creds"}, DNSConfig: pod.Spec.DNSConfig, DNSPolicy: corev1.DNSNone}, all); diff != "" {
		t.Errorf("Inherit everything (-want +got):\n%s", diff)
	}
	if got := self.Inherit(config.Inherit{}); !got.Empty() {
		t.Errorf("Inherit with both opted out: %+v", got)
	}
	if diff := cmp.Diff([]string{"imagePullSecrets: mirror-creds, ghcr-creds",
		"dnsConfig: policy None, nameservers 10.0.0.53, searches corp.example, option ndots=2"}, all.Describe()); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}

	// POD_NAME wins over HOSTNAME; a wrong name is an error that says what to do.
	env["POD_NAME"] = "not-this-pod"
	_, err = Detect(ctx, c.Client(), Options{NamespaceFile: nsFile(t, ns), Getenv: func(k string) string { return env[k] }})
	if err == nil || !strings.Contains(err.Error(), "POD_NAME") || !strings.Contains(err.Error(), "not-this-pod") {
		t.Errorf("Detect with a wrong POD_NAME: %v", err)
	}
}
