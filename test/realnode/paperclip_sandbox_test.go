//go:build integration

package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

const (
	// boardKeySecret is deploy/paperclip's optional Secret holding a board
	// API key, mounted in the pcsync container as boardKeyFile.
	boardKeySecret = "paperclip-board-key"
	boardKeyFile   = "/var/run/secrets/paperclip/token"
)

// overlaySettings is the Settings of TestPaperclipOverlay's config
// repository; with board, also spec.paperclip as deploy/paperclip's README
// has it (Paperclip beside pcsync in the pod, the board key from the
// mounted Secret, the shared spool).
func overlaySettings(t *testing.T, prefix, registry string, board bool) string {
	spec := map[string]any{
		"namespacePrefix": prefix, "images": map[string]any{"registry": registry},
		"pcsync": map[string]any{"serviceAccount": map[string]any{"name": "pcsync", "namespace": paperclipNamespace}}}
	if board {
		spec["paperclip"] = map[string]any{"url": "http://localhost:3100", "tokenFile": boardKeyFile, "spoolDir": "/spool"}
	}
	return gitSyncDoc(t, "Settings", "fleet", spec)
}

// storeBoardKey does what deploy/paperclip's README has the operator do
// with the first admin's board API key: the Secret paperclip-board-key.
func storeBoardKey(ctx context.Context, t *testing.T, c *testcluster.Cluster, key string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: boardKeySecret, Namespace: paperclipNamespace},
		StringData: map[string]string{"token": key}}
	if _, err := c.Client().CoreV1().Secrets(paperclipNamespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Secret %s/%s: %v", paperclipNamespace, boardKeySecret, err)
	}
}

// checkSandboxFromGit is deploy/paperclip's second road (its agents' images
// of registry at tag): a stock
// claude_local agent in pcsync's sandbox environment, both declared in Git
// (Company spec.paperclip.manage) and kept in Paperclip by the sidecar with
// the board key of the Secret. Assigning it an issue runs the CLI (the
// stand-in of pcsync's claude image) in a lease pod on the real node,
// placed by the agent's nodeSelector and tolerations from Git, and the run
// ends succeeded with the transcript's tokens and cost on its page.
func checkSandboxFromGit(ctx context.Context, t *testing.T, c *testcluster.Cluster, node *testcluster.RealNode, b *paperclipBoard, repo *gitServer, prefix, registry, tag string) {
	t.Helper()
	var company struct {
		ID string `json:"id"`
	}
	b.must(ctx, t, "POST", "/api/companies", map[string]any{"name": "Globex"}, &company)
	tenant := prefix + "globex"
	leases := c.WatchPods(t, tenant, leasepod.LabelLease)
	tol := node.Toleration()
	committed := time.Now()
	hash := repo.commit("globex: a claude_local agent in pcsync's sandbox, from Git", map[string]string{
		"settings.yaml": overlaySettings(t, prefix, registry, true),
		"globex.yaml": gitSyncDoc(t, "Company", "globex", map[string]any{"id": company.ID,
			"paperclip": map[string]any{"manage": true, "environments": []any{map[string]any{"name": "kubernetes"}}},
			"agents": []any{map[string]any{
				"name": "coder", "adapter": "claude_local", "model": "claude-sonnet-4-6",
				"nodeSelector": node.NodeSelector(),
				"tolerations":  []any{map[string]any{"key": tol.Key, "operator": string(tol.Operator), "effect": string(tol.Effect)}},
				// The description, in the wake's prompt, is what
				// the stand-in CLI does.
				"paperclip": map[string]any{"environment": "kubernetes",
					"adapterConfig": map[string]any{"engine": "cli", "timeoutSec": 120}},
			}}}),
	})
	a := waitManagedAgent(ctx, t, b, company.ID, "coder")
	t.Logf("commit %.12s → agent %s (claude_local) and its environment made in Paperclip by the sidecar in %s",
		hash, a.agent, time.Since(committed).Round(time.Millisecond))

	woken := time.Now()
	r := b.waitRun(ctx, t, b.assign(ctx, t, a, "please succeed"))
	t.Logf("issue assigned → sandbox run %s %s on Paperclip's page in %s", r.ID, r.Status, time.Since(woken).Round(time.Millisecond))
	if r.Status != "succeeded" {
		t.Fatalf("sandbox run %s: %s (%s: %s), want succeeded\n%s\n%s", r.ID, r.Status, deref(r.ErrorCode), deref(r.Error),
			testcluster.LastLines(b.runLog(ctx, t, r.ID), 30), podsReport(c, tenant))
	}
	if out, _ := r.UsageJSON["outputTokens"].(float64); out != 8 {
		t.Errorf("sandbox run %s: usage %v, want the stand-in transcript's 8 output tokens", r.ID, r.UsageJSON)
	}
	if cost, _ := r.UsageJSON["costUsd"].(float64); cost != 0.0123 {
		t.Errorf("sandbox run %s: usage %v, want the stand-in transcript's cost 0.0123", r.ID, r.UsageJSON)
	}
	if log := b.runLog(ctx, t, r.ID); !strings.Contains(log, "The README says hello.") {
		t.Errorf("sandbox run %s: its transcript on Paperclip's page has no %q:\n%.2000s", r.ID, "The README says hello.", log)
	}
	b.done(ctx, t)
	want := images.Ref(registry, images.Agent("claude"), tag)
	pods := leases.All()
	if len(pods) == 0 {
		t.Fatalf("no lease pod was seen in %s", tenant)
	}
	// A lease pod made after the run (the pool's refill, the next wake's
	// prestart) may not be bound yet when the watch is read: it must still
	// ask for the real node, and one pod at least must have run there.
	ran := 0
	for _, p := range pods {
		var imgs []string
		for _, c := range p.Spec.Containers {
			imgs = append(imgs, c.Image)
		}
		bound := p.Spec.NodeName != ""
		if bound {
			ran++
		}
		onNode := p.Spec.NodeName == node.Name() || !bound && selects(p.Spec.NodeSelector, node.NodeSelector())
		if !onNode || len(imgs) != 1 || imgs[0] != want {
			t.Errorf("lease pod %s: node %q (nodeSelector %v), images %v; want the real node %s and %s",
				p.Name, p.Spec.NodeName, p.Spec.NodeSelector, imgs, node.Name(), want)
		}
	}
	if ran == 0 {
		t.Errorf("none of the %d lease pods seen in %s was bound to a node", len(pods), tenant)
	}
}

// selects reports whether a pod's nodeSelector holds every label of want.
func selects(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// waitManagedAgent waits for the agent pcsync keeps in Paperclip for the
// company's agent name (pcsync's marker in its metadata), with its stock
// adapter type and a default environment.
func waitManagedAgent(ctx context.Context, t *testing.T, b *paperclipBoard, companyID, name string) paperclipAgent {
	t.Helper()
	for {
		var agents []struct {
			ID                   string         `json:"id"`
			AdapterType          string         `json:"adapterType"`
			DefaultEnvironmentID string         `json:"defaultEnvironmentId"`
			Metadata             map[string]any `json:"metadata"`
		}
		b.must(ctx, t, "GET", "/api/companies/"+companyID+"/agents", nil, &agents)
		for _, a := range agents {
			mk, _ := a.Metadata["pcsync"].(map[string]any)
			if mk["agent"] == name && a.AdapterType == "claude_local" && a.DefaultEnvironmentID != "" {
				return paperclipAgent{companyID, a.ID}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("company %s: no agent %s of pcsync's with its environment in Paperclip (%+v): %v", companyID, name, agents, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
