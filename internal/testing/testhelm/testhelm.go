package testhelm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/testkustomize"
	"github.com/pcsync/pcsync/internal/testing/testtool"
)

// Binary returns the path of the helm that hack/helm/build.sh of the
// repository at root builds, building it when its cache has none (minutes;
// make helm builds it before the tests).
func Binary(ctx context.Context, root string) (string, error) {
	return testtool.Binary(ctx, root, "helm")
}

// Template renders the chart in directory (or package) chart as `helm
// template release chart --namespace namespace` with values (written to a
// values file, as -f takes it) and returns its objects in helm's order.
// Helm's error, its stderr, is in the error.
func Template(ctx context.Context, helm, chart, release, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	data, err := yaml.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	f, err := os.CreateTemp("", "testhelm-values-*.yaml")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, helm, "template", release, chart, "--namespace", namespace, "-f", f.Name())
	// No repository, plugin or registry configuration of the machine's.
	home, err := os.MkdirTemp("", "testhelm-home-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w: %s", chart, err, strings.TrimSpace(stderr.String()))
	}
	objs, err := testkustomize.Decode(out)
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", chart, err)
	}
	return objs, nil
}
