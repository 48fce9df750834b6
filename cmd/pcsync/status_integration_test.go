//go:build integration

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	cs "github.com/pcsync/pcsync/pkg/companystatus"
)

// publish writes a commit of the config files as git-sync publishes it
// (a worktree named by the commit, the link root/config swapped to it)
// and returns the commit.
func publish(t *testing.T, root string, files map[string]string) string {
	t.Helper()
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	hash := hex.EncodeToString(b)
	wt := filepath.Join(root, ".worktrees", hash)
	if err := os.MkdirAll(wt, 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, wt, files)
	tmp := filepath.Join(root, ".config.tmp")
	if err := os.Symlink(filepath.Join(".worktrees", hash), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(root, "config")); err != nil {
		t.Fatal(err)
	}
	return hash
}

// getStatus is pcsync get companies NAME -o json, until ok or a minute.
func getStatus(t *testing.T, kc, ns, name, what string, ok func(*cs.CompanyStatus) bool) *cs.CompanyStatus {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, stdout, stderr := pcsync(t, "get", "companies", name, "-n", ns, "-o", "json", "--kubeconfig", kc)
		var s cs.CompanyStatus
		if code == 0 && json.Unmarshal([]byte(stdout), &s) == nil && ok(&s) {
			return &s
		}
		if time.Now().After(deadline) {
			t.Fatalf("pcsync get companies %s: not %s: exit %d\n%s%s", name, what, code, stdout, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestGetCompaniesAndReconcileWait: with a daemon applying a git-sync
// checkout, pcsync get companies prints each company's status (the commit
// applied) as kubectl would, pcsync reconcile --wait gets a reconcile and
// its answer (exit 0 when Ready, 1 when not, with why), and without a
// daemon to answer it gives up at --timeout (exit 2, saying so).
func TestGetCompaniesAndReconcileWait(t *testing.T) {
	c := testcluster.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.ApplyCRD(ctx, cs.CRD, cs.CRDName); err != nil {
		t.Fatal(err)
	}
	kc, ns := c.KubeconfigPath(), c.Namespace(t, "getcompanies", nil)
	prefix := "gc" + strings.ToLower(ns[len(ns)-5:]) + "-"
	t.Cleanup(func() {
		for _, slug := range []string{"acme", "globex"} {
			_ = c.Client().CoreV1().Namespaces().Delete(context.Background(), prefix+slug, metav1.DeleteOptions{})
		}
	})
	root := t.TempDir()
	settings := fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  namespacePrefix: %s\n", prefix)
	company := func(slug string) string {
		return "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: " + slug + "}\nspec:\n  id: " + slug + "-id\n" +
			"  agents:\n    - {name: coder, adapter: claude_local}\n"
	}
	h1 := publish(t, root, map[string]string{"settings.yaml": settings, "acme.yaml": company("acme")})
	done := make(chan string, 1)
	dctx, stopDaemon := context.WithCancel(ctx)
	defer stopDaemon()
	go func() {
		var stdout, stderr bytes.Buffer
		run(dctx, []string{"daemon", filepath.Join(root, "config"), "--no-runs", "--skip-network-check", "--interval", "1h",
			"--applyset-namespace", ns, "--kubeconfig", kc}, &stdout, &stderr)
		done <- stderr.String()
	}()
	readyAt := func(rev string) func(*cs.CompanyStatus) bool {
		return func(s *cs.CompanyStatus) bool {
			r := s.Status.Condition(cs.ConditionReady)
			return r != nil && r.Status == metav1.ConditionTrue && s.Status.Revision == rev
		}
	}
	getStatus(t, kc, ns, "acme", "Ready at "+h1, readyAt(h1))

	code, stdout, stderr := pcsync(t, "get", "companies", "-n", ns, "--kubeconfig", kc)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME ") ||
		strings.Join(strings.Fields(lines[1])[:5], " ") != "acme True "+h1+" false "+strings.Fields(lines[1])[4] {
		t.Errorf("pcsync get companies: exit %d\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr = pcsync(t, "reconcile", "acme", "-n", ns, "--wait", "--timeout", "2m", "--kubeconfig", kc)
	if code != 0 || !strings.Contains(stdout, "acme: reconciled: Ready at revision "+h1) {
		t.Errorf("pcsync reconcile acme --wait: exit %d\n%s%s", code, stdout, stderr)
	}

	// globex's Namespace is someone else's: its apply fails.
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "globex"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h2 := publish(t, root, map[string]string{"settings.yaml": settings, "acme.yaml": company("acme"), "globex.yaml": company("globex")})
	getStatus(t, kc, ns, "globex", "failed", func(s *cs.CompanyStatus) bool { return s.Status.LastAttemptedRevision == h2 })
	code, stdout, stderr = pcsync(t, "reconcile", "globex", "-n", ns, "--wait", "--timeout", "2m", "--kubeconfig", kc)
	if code != 1 || !strings.Contains(stdout, "globex: reconciled: not ready: "+cs.ReasonFailed+": ") {
		t.Errorf("pcsync reconcile globex --wait (its Namespace not pcsync's): exit %d, want 1\n%s%s", code, stdout, stderr)
	}

	stopDaemon()
	<-done
	code, _, stderr = pcsync(t, "reconcile", "acme", "-n", ns, "--wait", "--timeout", "3s", "--kubeconfig", kc)
	if code != 2 || !strings.Contains(stderr, "the daemon did not answer the request within 3s") {
		t.Errorf("pcsync reconcile --wait with no daemon: exit %d, want 2 saying so\n%s", code, stderr)
	}
}
