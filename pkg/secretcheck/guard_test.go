package secretcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
)

const ns = "paperclip-acme"

// dryRuns is a fake API server's Secrets: a dry-run create of a name in
// present answers AlreadyExists, of a name in refuse that error, of any
// other name success (nothing is stored). It records the names asked for,
// and fails the test on a create that is not a dry run.
type dryRuns struct {
	t       *testing.T
	present map[string]bool
	refuse  map[string]error

	mu    sync.Mutex
	asked []string
}

func (d *dryRuns) client() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateActionImpl)
		s := c.GetObject().(*corev1.Secret)
		if !cmp.Equal(c.CreateOptions.DryRun, []string{metav1.DryRunAll}) {
			d.t.Errorf("create of Secret %s with dryRun %v: want a dry run", s.Name, c.CreateOptions.DryRun)
		}
		if len(s.Data)+len(s.StringData) > 0 || c.GetNamespace() != ns {
			d.t.Errorf("probe %s/%s carries data or is in the wrong namespace", c.GetNamespace(), s.Name)
		}
		d.mu.Lock()
		d.asked = append(d.asked, s.Name)
		d.mu.Unlock()
		switch {
		case d.present[s.Name]:
			return true, nil, apierrors.NewAlreadyExists(corev1.Resource("secrets"), s.Name)
		case d.refuse[s.Name] != nil:
			return true, nil, d.refuse[s.Name]
		}
		return true, s, nil
	})
	return cs
}

func acme() *config.Company {
	c := &config.Company{Metadata: config.Metadata{Name: "acme"}}
	c.Spec.Credentials = []config.Credential{
		{Name: "claude", Provider: adapters.ProviderAnthropic, Type: adapters.KeyAPIKey,
			SecretRef: config.CredentialSecretRef{Name: "model-keys", Key: "anthropic"}},
		{Name: "gpt", Provider: adapters.ProviderOpenAI, Type: adapters.KeyAPIKey,
			SecretRef: config.CredentialSecretRef{Name: "openai-key", Key: "key"}},
	}
	return c
}

// TestGuardCheck: which Secrets are asked for per CLI, and what a missing
// one or a refusal gives.
func TestGuardCheck(t *testing.T) {
	forbidden := apierrors.NewForbidden(corev1.Resource("secrets"), "model-keys", errors.New("no create"))
	tests := []struct {
		name      string
		adapter   adapters.Type
		present   []string
		refuse    map[string]error
		wantAsked []string
		wantMiss  *MissingError
		wantErr   string
	}{
		{name: "present", adapter: adapters.ClaudeLocal, present: []string{"model-keys"}, wantAsked: []string{"model-keys"}},
		{name: "other provider's missing", adapter: adapters.ClaudeLocal, present: []string{"model-keys"}, wantAsked: []string{"model-keys"}},
		{name: "missing", adapter: adapters.CodexLocal, present: []string{"model-keys"}, wantAsked: []string{"openai-key"},
			wantMiss: &MissingError{Company: "acme", Credential: "gpt", Namespace: ns, Secret: "openai-key", Key: "key"}},
		{name: "CLI of no declared provider", adapter: adapters.GeminiLocal},
		{name: "CLI of no provider", adapter: adapters.CursorLocal},
		{name: "first of several missing", adapter: adapters.PiLocal, wantAsked: []string{"model-keys"},
			wantMiss: &MissingError{Company: "acme", Credential: "claude", Namespace: ns, Secret: "model-keys", Key: "anthropic"}},
		{name: "refused", adapter: adapters.ClaudeLocal, refuse: map[string]error{"model-keys": forbidden}, wantAsked: []string{"model-keys"},
			wantErr: "credential acme/claude: Secret/paperclip-acme/model-keys: dry-run create (to see whether it exists) failed: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &dryRuns{t: t, present: map[string]bool{}, refuse: tt.refuse}
			for _, p := range tt.present {
				d.present[p] = true
			}
			err := NewGuard(d.client(), DefaultOptions()).Check(context.Background(), ns, acme(), tt.adapter)
			var miss *MissingError
			errors.As(err, &miss)
			if diff := cmp.Diff(tt.wantMiss, miss); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
			switch {
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) || IsMissing(err) || !apierrors.IsForbidden(err)):
				t.Errorf("Check: %v, want a Forbidden error starting %q", err, tt.wantErr)
			case tt.wantErr == "" && tt.wantMiss == nil && err != nil:
				t.Errorf("Check: %v", err)
			}
			if diff := cmp.Diff(tt.wantAsked, d.asked); diff != "" {
				t.Errorf("Secrets asked for (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGuardRemembers: a Secret found is trusted for the TTL (a burst of
// runs, concurrent ones too, costs one request), then asked for again; a
// missing one is asked for every time (creating it fixes the next run).
func TestGuardRemembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &dryRuns{t: t, present: map[string]bool{"model-keys": true}}
		g := NewGuard(d.client(), Options{TTL: 10 * time.Second})
		ctx := context.Background()
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if err := g.Check(ctx, ns, acme(), adapters.ClaudeLocal); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		time.Sleep(9 * time.Second)
		if err := g.Check(ctx, ns, acme(), adapters.ClaudeLocal); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"model-keys"}, d.asked); diff != "" {
			t.Errorf("within the TTL (-want +got):\n%s", diff)
		}
		time.Sleep(2 * time.Second)
		for range 2 {
			if err := g.Check(ctx, ns, acme(), adapters.ClaudeLocal); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if err := g.Check(ctx, ns, acme(), adapters.CodexLocal); !IsMissing(err) {
				t.Fatalf("codex: %v, want missing", err)
			}
		}
		want := []string{"model-keys", "model-keys", "openai-key", "openai-key"}
		if diff := cmp.Diff(want, d.asked); diff != "" {
			t.Errorf("after the TTL, and a missing one (-want +got):\n%s", diff)
		}
	})
}

func TestMissingError(t *testing.T) {
	err := error(&MissingError{Company: "acme", Credential: "claude", Namespace: ns, Secret: "model-keys", Key: "anthropic"})
	want := `credential acme/claude: Secret paperclip-acme/model-keys does not exist, so the egress proxy has no key to give this run's CLI; ` +
		`create it in namespace paperclip-acme with key "anthropic" (kubectl -n paperclip-acme create secret generic model-keys --from-file=anthropic=<file holding the key>)`
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	if !IsMissing(fmt.Errorf("no Job created: %w", err)) {
		t.Error("IsMissing does not see through wrapping")
	}
}

func TestOptionsComplete(t *testing.T) {
	for _, in := range []time.Duration{0, -time.Second} {
		if got := (Options{TTL: in}).complete().TTL; got != DefaultOptions().TTL {
			t.Errorf("TTL %v completes to %v, want the default", in, got)
		}
	}
	if got := (Options{TTL: time.Second}).complete().TTL; got != time.Second {
		t.Errorf("TTL 1s completes to %v", got)
	}
}
