//go:build integration

package kubeexec

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// credentialCompany is a company in egress mode proxy that declares an
// anthropic credential in Secret model-keys, key anthropic.
var credentialCompany = map[string]any{
	"egress": map[string]any{"mode": "proxy"},
	"credentials": []any{map[string]any{"name": "claude", "provider": "anthropic", "type": "apiKey",
		"secretRef": map[string]any{"name": "model-keys", "key": "anthropic"}}},
}

// TestMissingCredentialSecret: a run whose credential's Secret does not
// exist fails before its pod starts: its result (auth_required) names the
// Secret, the credential and how to create it; no Job, no pod and no
// per-run Secret was created, and the check was a dry run. With the Secret
// created, the next run's Job is created and the run starts.
func TestMissingCredentialSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.RunForever(), Company: credentialCompany})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addrs := agentenv.NewAddresses(e.cs)
	if err := addrs.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	e.waitUntil("the proxy Service's address", func() bool { _, err := addrs.ClusterIP(e.ns); return err == nil })

	e.drop("nokey-1", nil)
	d := e.startDaemon(true, func(o *Options) { o.ProxyAddresses = addrs })
	d.wait(t)
	d.stop(t)
	res := e.result("nokey-1")
	msg := deref(res.ErrorMessage)
	want := "no Job created: credential " + e.slug + "/claude: Secret " + e.ns + "/model-keys does not exist, so the egress proxy has no key to give this run's CLI; " +
		"create it in namespace " + e.ns + ` with key "anthropic" (kubectl -n ` + e.ns + " create secret generic model-keys --from-file=anthropic=<file holding the key>)"
	if res.Status != result.StatusFailed || deref(res.ErrorCode) != result.ErrAuthRequired || msg != want {
		t.Errorf("result: %s %s %q;\nwant failed (auth_required) %q", res.Status, deref(res.ErrorCode), msg, want)
	}
	job := e.jobName("nokey-1")
	if n := e.auditCount("create", "jobs", ""); n != 0 {
		t.Errorf("%d Job creates in %s, want none", n, e.ns)
	}
	if n := e.auditCount("create", "secrets", job); n != 0 {
		t.Errorf("%d creates of the run's Secret, want none", n)
	}
	pods, err := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("pods of the run: %v %v, want none", pods, err)
	}
	evs, err := e.c.AuditEvents(func(a testcluster.AuditEvent) bool {
		return a.Verb == "create" && a.ObjectRef != nil && a.ObjectRef.Resource == "secrets" &&
			a.ObjectRef.Namespace == e.ns && a.ObjectRef.Name == "model-keys"
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 {
		t.Error("no create of model-keys seen: the check did not ask the API server")
	}
	for _, ev := range evs {
		if !strings.Contains(ev.RequestURI, "dryRun=All") {
			t.Errorf("a create of model-keys that is no dry run: %s", ev.RequestURI)
		}
	}

	// The Secret exists: the run proceeds to its Job.
	if _, err := e.cs.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-keys"},
		StringData: map[string]string{"anthropic": "sk-ant-credential-check"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.drop("withkey-1", nil)
	d = e.startDaemon(false, func(o *Options) { o.ProxyAddresses = addrs })
	d.waitEvent(t, spool.EventStarted, "withkey-1")
	if _, err := e.cs.BatchV1().Jobs(e.ns).Get(ctx, e.jobName("withkey-1"), metav1.GetOptions{}); err != nil {
		t.Errorf("the run's Job: %v", err)
	}
	d.stop(t)
}
