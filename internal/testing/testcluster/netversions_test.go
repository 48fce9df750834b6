package testcluster

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNetVersionsMatchBuildScript(t *testing.T) {
	got := readEnvFile(t, "../../../hack/kuberouter/versions.env")
	want := map[string]string{
		"KUBE_ROUTER_VERSION": KubeRouterVersion,
		"NODENET_RECIPE":      NetBuildRecipe,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hack/kuberouter/versions.env vs. the package constants (-want +got):\n%s", diff)
	}
	mod, err := os.ReadFile("../../../hack/kuberouter/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "github.com/cloudnativelabs/kube-router/v2 "+KubeRouterVersion+"\n") {
		t.Errorf("hack/kuberouter/go.mod does not require kube-router %s", KubeRouterVersion)
	}
	if strings.Contains(string(mod), "\nreplace") {
		t.Error("hack/kuberouter/go.mod replaces modules: kube-router is built as released")
	}
}

func TestNetVersionKey(t *testing.T) {
	t.Setenv(NetBinDirEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	want := "/cache/pcsync/nodenet/kube-router-" + KubeRouterVersion + "_kube-proxy-" + KubernetesVersion + "_r" + NetBuildRecipe
	if got := DefaultNetBinDir(); !strings.HasPrefix(got, want+"_") {
		t.Errorf("DefaultNetBinDir() = %q, want prefix %q", got, want+"_")
	}
	t.Setenv(NetBinDirEnv, "/x")
	if got := DefaultNetBinDir(); got != "/x" {
		t.Errorf("DefaultNetBinDir() with %s=/x = %q", NetBinDirEnv, got)
	}
}

// readEnvFile reads KEY=VALUE lines, skipping blanks and comments.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
