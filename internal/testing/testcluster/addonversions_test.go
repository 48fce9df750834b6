package testcluster

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAddonVersionsMatchBuildScript(t *testing.T) {
	got := readEnvFile(t, "../../../hack/addons/versions.env")
	want := map[string]string{
		"LOCAL_PATH_VERSION": LocalPathVersion,
		"COREDNS_VERSION":    CoreDNSVersion,
		"ADDONS_RECIPE":      AddonBuildRecipe,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hack/addons/versions.env vs. the package constants (-want +got):\n%s", diff)
	}
	for mod, require := range map[string]string{
		"localpath": "github.com/rancher/local-path-provisioner " + LocalPathVersion + "\n",
		"coredns":   "github.com/coredns/coredns " + CoreDNSVersion + "\n",
	} {
		data, err := os.ReadFile("../../../hack/addons/" + mod + "/go.mod")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), require) {
			t.Errorf("hack/addons/%s/go.mod does not require %s", mod, strings.TrimSpace(require))
		}
		if strings.Contains(string(data), "\nreplace") {
			t.Errorf("hack/addons/%s/go.mod replaces modules: the add-ons are built as released", mod)
		}
	}
}

func TestAddonVersionKey(t *testing.T) {
	t.Setenv(AddonBinDirEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	want := "/cache/pcsync/addons/" + AddonVersionKey()
	if got := DefaultAddonBinDir(); got != want {
		t.Errorf("DefaultAddonBinDir() = %q, want %q", got, want)
	}
	for _, v := range []string{"local-path-provisioner-" + LocalPathVersion + "_", "coredns-" + CoreDNSVersion + "_"} {
		if !strings.Contains(AddonVersionKey(), v) {
			t.Errorf("AddonVersionKey() = %q lacks %q", AddonVersionKey(), v)
		}
	}
	t.Setenv(AddonBinDirEnv, "/x")
	if got := DefaultAddonBinDir(); got != "/x" {
		t.Errorf("DefaultAddonBinDir() with %s=/x = %q", AddonBinDirEnv, got)
	}
}
