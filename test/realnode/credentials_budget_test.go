//go:build integration

package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/result"
)

// The agents' monthly budgets in TestBudgetThroughTheProxy, each the cost
// of 5 of its stand-in's answers at the company's prices (everything but
// input tokens free): the Anthropic stand-in's 1,234 input tokens at $10 a
// million are 1.234 cents (4 answers 4.94, 5 answers 6.17: past 6); the
// OpenAI stand-in's 321 at $20 a million are 0.642 cents (4 answers 2.57,
// 5 answers 3.21: past 3).
const (
	claudeBudgetCents = 6
	codexBudgetCents  = 3
)

// TestBudgetThroughTheProxy: the real Claude Code and Codex, in Job runs
// on the real node with the enforcer on, against the stand-in providers
// through their tenant's egress proxy, each agent's budgetMonthlyCents the
// cost of 5 of its stand-in's answers at the company's prices. Each
// agent's runs go one after another until one fails: its stand-in got
// exactly 5 model calls (the 6th was refused at the proxy); the failed
// run's result says budget_exceeded, with the proxy's refusal, which the
// CLI printed, naming the agent's budget and its spend (5 answers' cost,
// rounded up to the cent): what the proxy counted is the stand-in's usage,
// priced, to the cent. After each agent's 2nd run the proxy pod is
// deleted (its Deployment makes a new one, its process new): the month's
// spend is the daemon's to keep (package spendkeep), and the refusal
// still comes at the 6th call.
func TestBudgetThroughTheProxy(t *testing.T) {
	prices := "  budget:\n    prices:\n"
	for _, p := range []string{"anthropic, model: '*', input: 10", "anthropic, model: 'claude*', input: 10",
		"openai, model: '*', input: 20", "openai, model: 'gpt*', input: 20"} {
		prices += "      - {provider: " + p + ", output: 0, cacheRead: 0, cacheWrite: 0}\n"
	}
	e := newCLIEnv(t, fmt.Sprintf(", paperclip: {budgetMonthlyCents: %d}", claudeBudgetCents),
		fmt.Sprintf(", paperclip: {budgetMonthlyCents: %d}", codexBudgetCents), prices)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e.startDaemon(ctx, t)
	for _, tc := range []struct {
		agent, host, key string
		budget           int
		spent            string
	}{
		{"claude", "api.anthropic.com", cliAnthropicKey, claudeBudgetCents, "$0.07"},
		{"codex", "api.openai.com", cliOpenAIKey, codexBudgetCents, "$0.04"},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			calls := func() int {
				n := 0
				for _, k := range e.api.keys(tc.host) {
					if k == tc.key {
						n++
					}
				}
				return n
			}
			name, refused := e.runUntilRefused(ctx, t, tc.agent, calls, func(i int) {
				if i == 2 {
					e.restartProxy(ctx, t)
				}
			})
			if n := calls(); n != 5 {
				t.Errorf("the stand-in got %d model calls of tenant a's %s; want 5: the budget's cost, the 6th refused at the proxy", n, tc.agent)
			}
			want := fmt.Sprintf("pcsync: budget spent: agent %s/%s has spent %s of its monthly budget of $0.%02d", e.slugA, tc.agent, tc.spent, tc.budget)
			b, _ := json.Marshal(refused)
			if refused.Status != result.StatusFailed || refused.ErrorCode == nil || *refused.ErrorCode != result.ErrBudgetExceeded ||
				!strings.Contains(deref(refused.ErrorMessage), want) {
				t.Errorf("the last run's result %s; want failed, budget_exceeded, its error saying %q", b, want)
			}
			log, _ := os.ReadFile(filepath.Join(e.spool, name+".log"))
			if !strings.Contains(string(log), "pcsync: budget spent") {
				t.Errorf("the CLI's output (%s.log) does not print the refusal:\n%s", name, log)
			}
		})
	}
}

// runUntilRefused runs tenant a's agent, one run after another, until a
// run does not succeed (at most 8), and returns that run's name and
// result; after the i-th run that succeeded it calls between(i).
func (e *cliEnv) runUntilRefused(ctx context.Context, t *testing.T, agent string, calls func() int, between func(i int)) (string, result.RunResult) {
	t.Helper()
	for i := 1; i <= 8; i++ {
		name := fmt.Sprintf("budget-%s-%d", agent, i)
		dropAgentRun(t, e.spool, name, e.slugA, agent, "say hi")
		got := waitResult(ctx, t, e.spool, name)
		t.Logf("%s: %s, error %q; the stand-in has had %d model calls", name, got.Status, deref(got.ErrorMessage), calls())
		if got.Status != result.StatusSucceeded {
			return name, got
		}
		between(i)
	}
	t.Fatalf("8 runs of %s succeeded: no budget stopped them", agent)
	return "", result.RunResult{}
}

// restartProxy deletes tenant a's proxy pod and waits until its
// Deployment's new pod is Running, firewalled and the Service's endpoint.
func (e *cliEnv) restartProxy(ctx context.Context, t *testing.T) {
	t.Helper()
	cs := e.c.Client()
	sel := agentpod.LabelRole + "=" + agentpod.RoleEgressProxy
	old, err := cs.CoreV1().Pods(e.nsA).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	gone := map[string]bool{}
	for _, p := range old.Items {
		gone[p.Name] = true
		if err := cs.CoreV1().Pods(e.nsA).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	p := newProxyPod(ctx, t, cs, e.nsA, sel, gone)
	if err := e.node.WaitFirewalled(ctx, e.nsA, p.Name); err != nil {
		t.Fatal(err)
	}
	waitProxyEndpoint(ctx, t, cs, e.nsA, p.Status.PodIP, time.Minute)
	t.Logf("proxy pod %v deleted; %s serves after %s", slices.Sorted(maps.Keys(gone)), p.Name, time.Since(start).Round(time.Millisecond))
}

// newProxyPod waits up to 2 minutes for a Running proxy pod in ns, with an
// IP, that is none of the pods in gone.
func newProxyPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, sel string, gone map[string]bool) corev1.Pod {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Items {
			if !gone[p.Name] && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new proxy pod Running in %s 2 minutes after deleting %v", ns, gone)
		}
	}
}
