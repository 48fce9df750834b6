//go:build integration

package doctor

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// doctor checks the StorageClass of each company that suspends its kept
// leases: one that exists is OK with its provisioner (the control), one
// that does not is a failure naming it and the field.
func TestDoctorLeaseStorage(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	ns := c.Namespace(t, "keep", nil)
	i := strings.LastIndexByte(ns, '-')
	prefix, slug := ns[:i+1], ns[i+1:]
	class := "pcsync-doctor-" + slug
	if _, err := c.Client().StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "example.com/test"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client().StorageV1().StorageClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "settings.yaml"), fmt.Sprintf(
		"apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  namespacePrefix: %s\n  images: {registry: reg.example/pcsync}\n", prefix))
	company := func(name, class string) string {
		return fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %q}\nspec:\n  id: %s-1\n  sandbox: {suspend: {storageClassName: %s}}\n---\n", name, name, class)
	}
	writeFile(t, filepath.Join(dir, "companies.yaml"), company(slug, class)+company(slug+"b", "no-such-class"))
	opts := DefaultOptions()
	opts.ConfigDir, opts.RESTConfig = dir, c.RESTConfig()
	opts.Images.Tag = "dev"
	r := Run(ctx, opts)
	var got []string
	for _, ch := range r.Checks {
		if ch.Area == "lease storage" {
			got = append(got, ch.Name+"|"+string(ch.Status)+"|"+ch.Detail)
		}
	}
	want := []string{
		ns + "|ok|StorageClass " + class + ", provisioner example.com/test",
		ns + "b|fail|StorageClass no-such-class (spec.sandbox.suspend.storageClassName) does not exist: kept leases' claims stay Pending and their pods never start",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lease storage rows (-want +got):\n%s", diff)
	}
}
