package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/images"
)

// TestRenderNamesTheRelease: with no Settings spec.images.registry, render
// names pcsync's images with the release version whatever the build is
// stamped with (go build, make build, an image's build), so that render's
// output is the same from any build of a release; version prints the
// release and the stamp.
func TestRenderNamesTheRelease(t *testing.T) {
	dir := t.TempDir()
	company := "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\n" +
		"spec:\n  id: acme-1\n  egress: {allowFqdns: [github.com]}\n  agents: [{name: coder, adapter: claude_local}]\n"
	if err := os.WriteFile(filepath.Join(dir, "acme.yaml"), []byte(company), 0o644); err != nil {
		t.Fatal(err)
	}
	imageLine := regexp.MustCompile(`(?m)^\s*image: (\S+)$`)
	saved := commit
	t.Cleanup(func() { commit = saved })
	var renders []string
	for _, tc := range []struct {
		stamp, wantBuild string
	}{
		{stamp: "v0.1.0-3-g1234567-dirty", wantBuild: "v0.1.0-3-g1234567-dirty"},
		{stamp: "realnode", wantBuild: "realnode"},
		{stamp: "", wantBuild: buildStamp()},
	} {
		commit = tc.stamp
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"render", dir}, &stdout, &stderr); code != 0 {
			t.Fatalf("stamp %q: render: exit code %d\n%s", tc.stamp, code, stderr.String())
		}
		renders = append(renders, stdout.String())
		var got []string
		for _, m := range imageLine.FindAllStringSubmatch(stdout.String(), -1) {
			got = append(got, m[1])
		}
		// The company's egress proxy runs pcsync's own image.
		if diff := cmp.Diff([]string{images.Pcsync + ":" + images.Version}, got); diff != "" {
			t.Errorf("stamp %q: render's images (-want +got):\n%s", tc.stamp, diff)
		}

		stdout.Reset()
		if code := run(context.Background(), []string{"version"}, &stdout, &stderr); code != 0 {
			t.Fatalf("stamp %q: version: exit code %d\n%s", tc.stamp, code, stderr.String())
		}
		want := "pcsync " + images.Version + " (build " + tc.wantBuild + ", " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
		if diff := cmp.Diff(want, stdout.String()); diff != "" {
			t.Errorf("stamp %q: version (-want +got):\n%s", tc.stamp, diff)
		}
	}
	for i, r := range renders[1:] {
		if r != renders[0] {
			t.Errorf("render with stamp %d differs from the first's", i+1)
		}
	}
}
