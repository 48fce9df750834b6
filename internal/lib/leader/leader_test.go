package leader

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOptionsAndDefaults(t *testing.T) {
	dir := t.TempDir()
	sa := filepath.Join(dir, "namespace")
	if err := os.WriteFile(sa, []byte("from-sa\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	got := []string{namespaceFrom(getenv, filepath.Join(dir, "missing"))}
	got = append(got, namespaceFrom(getenv, sa))
	env["POD_NAMESPACE"] = "from-env"
	got = append(got, namespaceFrom(getenv, sa))
	if diff := cmp.Diff([]string{"pcsync-system", "from-sa", "from-env"}, got); diff != "" {
		t.Errorf("namespace defaults (-want +got):\n%s", diff)
	}

	o := DefaultOptions()
	o.RenewDeadline = o.LeaseDuration
	if err := o.complete(); err == nil {
		t.Error("renew deadline equal to the lease duration accepted")
	}
	if a, b := DefaultIdentity(), DefaultIdentity(); a == b {
		t.Errorf("two identities are equal: %s", a)
	}
}
