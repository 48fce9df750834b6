package tenantns

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		exists  bool
		wantErr string
	}{
		{name: "tenant", exists: true, labels: map[string]string{"paperclip.io/company": "acme"}},
		{name: "missing", exists: false},
		{name: "foreign", exists: true, labels: map[string]string{"app": "paperclip"},
			wantErr: "Namespace/paperclip-acme exists but is not company acme's tenant namespace (no label paperclip.io/company=acme)"},
		{name: "other company", exists: true, labels: map[string]string{"paperclip.io/company": "shop"},
			wantErr: "Namespace/paperclip-acme is company shop's tenant namespace, not company acme's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			if tt.exists {
				objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "paperclip-acme", Labels: tt.labels}})
			}
			cs := fake.NewClientset(objs...)
			err := New(cs, 0).Check(context.Background(), "paperclip-acme", "acme")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrNotTenant)):
				t.Fatalf("Check: %v, want an ErrNotTenant containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestCheckRemembers: a burst of checks of one confirmed namespace costs one
// GET; a refusal is not remembered (adopting and applying fixes it at once).
func TestCheckRemembers(t *testing.T) {
	cs := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "paperclip-acme",
		Labels: map[string]string{"paperclip.io/company": "acme"}}})
	gets := 0
	cs.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return false, nil, nil
	})
	g := New(cs, 0)
	for range 50 {
		if err := g.Check(context.Background(), "paperclip-acme", "acme"); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := g.Check(context.Background(), "paperclip-acme", "shop"); err == nil {
			t.Fatal("shop's check of acme's namespace passed")
		}
	}
	if gets != 4 {
		t.Errorf("GETs: %d, want 4 (one confirmed, three refused)", gets)
	}
}
