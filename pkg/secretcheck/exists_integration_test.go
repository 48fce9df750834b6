//go:build integration

package secretcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/adapters"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// tenantRole is deploy/base/rbac.yaml's ClusterRole pcsync-tenant: the
// rights pcsync holds in a tenant namespace.
func tenantRole(t *testing.T) rbacv1.ClusterRole {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "base", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "ClusterRole" && r.Name == "pcsync-tenant" {
			return r
		}
	}
	t.Fatal("deploy/base/rbac.yaml has no ClusterRole pcsync-tenant")
	return rbacv1.ClusterRole{}
}

// asTenantPcsync binds a copy of pcsync-tenant to a user in ns (as each
// tenant's RoleBinding pcsync does) and returns a client acting as it.
func asTenantPcsync(t *testing.T, c *testcluster.Cluster, ns string) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "secretcheck-" + hex.EncodeToString(b)
	role := tenantRole(t)
	role.ObjectMeta = metav1.ObjectMeta{Name: name}
	cs := c.Client()
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pcsync", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := c.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name}
	user, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// RBAC's cache sees the binding a moment later.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := Exists(ctx, user, ns, "warm-up")
		if apierrors.IsNotFound(err) {
			return user
		}
		if time.Now().After(deadline) {
			t.Fatalf("the binding of %s does not take effect: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestExistsWithPcsyncsRights: with only the rights pcsync holds in a
// tenant namespace (deploy/base's pcsync-tenant, which has no get on
// Secrets), Exists tells an existing Secret from a missing one, and the dry
// run stores nothing. Beside it, the control: reading that Secret is
// refused to the same user and allowed to the admin; and a user without
// create cannot tell (an error, neither answer).
func TestExistsWithPcsyncsRights(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	ns := c.Namespace(t, "secretcheck", nil)
	admin := c.Client()
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-keys"},
		StringData: map[string]string{"anthropic": "sk-ant-secretcheck"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user := asTenantPcsync(t, c, ns)

	if err := Exists(ctx, user, ns, "model-keys"); err != nil {
		t.Errorf("Exists(model-keys) = %v, want nil", err)
	}
	if err := Exists(ctx, user, ns, "openai-key"); !apierrors.IsNotFound(err) {
		t.Errorf("Exists(openai-key) = %v, want NotFound", err)
	}
	if _, err := admin.CoreV1().Secrets(ns).Get(ctx, "openai-key", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the dry run, Secret openai-key: %v, want NotFound (nothing stored)", err)
	}
	// The control: the Secret is there to read, for the admin only.
	if _, err := admin.CoreV1().Secrets(ns).Get(ctx, "model-keys", metav1.GetOptions{}); err != nil {
		t.Errorf("admin get: %v", err)
	}
	if _, err := user.CoreV1().Secrets(ns).Get(ctx, "model-keys", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get as pcsync-tenant: %v, want Forbidden (pcsync never reads a tenant's Secrets)", err)
	}
	// Where pcsync holds no create (another namespace), it cannot tell.
	other := c.Namespace(t, "secretcheck-other", nil)
	err := Exists(ctx, user, other, "model-keys")
	if err == nil || apierrors.IsNotFound(err) || !apierrors.IsForbidden(err) ||
		!strings.HasPrefix(err.Error(), "Secret/"+other+"/model-keys: dry-run create") {
		t.Errorf("Exists without create: %v, want a Forbidden error naming the Secret", err)
	}

	// The Guard, with the same rights.
	g := NewGuard(user, DefaultOptions())
	if err := g.Check(ctx, ns, acme(), adapters.ClaudeLocal); err != nil {
		t.Errorf("Check(claude_local) = %v, want nil", err)
	}
	var miss *MissingError
	if err := g.Check(ctx, ns, acme(), adapters.CodexLocal); !errors.As(err, &miss) || miss.Secret != "openai-key" {
		t.Errorf("Check(codex_local) = %v, want Secret openai-key missing", err)
	}
}
