//go:build integration

package secretcheck

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/adapters"
)

// BenchmarkCredentialCheck is what the check costs a run, against the test
// control plane on loopback: dry-run is the one request (a Secret found;
// the first run of a burst, then one run per TTL); cached is every other
// run (a Secret found within the TTL); missing is a run that fails.
func BenchmarkCredentialCheck(b *testing.B) {
	c := testcluster.Get(b)
	ctx := context.Background()
	ns := c.Namespace(b, "secretcheck-bench", nil)
	if _, err := c.Client().CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-keys"},
		StringData: map[string]string{"anthropic": "sk-ant-bench"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	cs := c.Client()
	b.Run("dry-run", func(b *testing.B) {
		for b.Loop() {
			if err := Exists(ctx, cs, ns, "model-keys"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		g := NewGuard(cs, DefaultOptions())
		for b.Loop() {
			if err := g.Check(ctx, ns, acme(), adapters.ClaudeLocal); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("missing", func(b *testing.B) {
		g := NewGuard(cs, DefaultOptions())
		for b.Loop() {
			if err := g.Check(ctx, ns, acme(), adapters.CodexLocal); !IsMissing(err) {
				b.Fatal(err)
			}
		}
	})
}
