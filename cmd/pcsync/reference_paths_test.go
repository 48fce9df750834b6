package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/lib/kube"
	"github.com/pcsync/pcsync/pkg/fastpath"
)

// TestReferencePathsFlagAndEnv checks that --reference-paths and
// PCSYNC_REFERENCE_PATHS set the switch, that the flag wins over the
// environment, and that it reaches the options of load, render and apply.
func TestReferencePathsFlagAndEnv(t *testing.T) {
	tests := []struct {
		name string
		env  string // "-" leaves it unset
		args []string
		want fastpath.Reference
		code int
	}{
		{name: "default", env: "-", args: []string{"version"}},
		{name: "flag", env: "-", args: []string{"--reference-paths", "version"}, want: true},
		{name: "flag after the command", env: "-", args: []string{"version", "--reference-paths"}, want: true},
		{name: "env 1", env: "1", args: []string{"version"}, want: true},
		{name: "env true", env: "true", args: []string{"version"}, want: true},
		{name: "env 0", env: "0", args: []string{"version"}},
		{name: "env empty", env: "", args: []string{"version"}},
		{name: "flag false wins over env", env: "1", args: []string{"--reference-paths=false", "version"}},
		{name: "env not a boolean", env: "yes please", args: []string{"version"}, code: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env == "-" {
				t.Setenv(referencePathsEnv, "")
				os.Unsetenv(referencePathsEnv)
			} else {
				t.Setenv(referencePathsEnv, tt.env)
			}
			var stdout, stderr bytes.Buffer
			g := &globalOptions{Kube: kube.DefaultFlags(), Stdout: &stdout, Stderr: &stderr,
				Logger: slog.New(slog.NewTextHandler(&stderr, nil))}
			root := newRootCmdFor(g)
			root.SetArgs(tt.args)
			if code := exitCode(root.ExecuteContext(context.Background())); code != tt.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if tt.code != 0 {
				return
			}
			got := map[string]fastpath.Reference{
				"switch": g.reference, "load": g.loadOptions("").Reference,
				"render": g.renderOptions().Reference, "apply": g.managerOptions().Reference,
			}
			want := map[string]fastpath.Reference{"switch": tt.want, "load": tt.want, "render": tt.want, "apply": tt.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("reference switch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReferencePathsSameOutput runs render (to stdout and with -o) and
// validate on examples/config and every config of testdata/render,
// testdata/badpatches and testdata/badconfig, with and without
// --reference-paths, and requires byte-identical output, errors and exit
// codes.
func TestReferencePathsSameOutput(t *testing.T) {
	t.Setenv(referencePathsEnv, "")
	dirs := []string{filepath.Join("..", "..", "examples", "config")}
	for _, corpus := range []string{"render", "badpatches", "badconfig"} {
		cases, err := filepath.Glob(filepath.Join("..", "..", "testdata", corpus, "*", "config"))
		if err != nil || len(cases) == 0 {
			t.Fatalf("testdata/%s: %v (%d cases)", corpus, err, len(cases))
		}
		dirs = append(dirs, cases...)
	}
	type result struct {
		Code           int
		Stdout, Stderr string
		Files          map[string]string
	}
	pcsync := func(args ...string) result {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr)
		return result{Code: code, Stdout: stdout.String(), Stderr: stderr.String()}
	}
	renderTo := func(dir string, flags ...string) result {
		out := t.TempDir()
		r := pcsync(append(flags, "render", dir, "--output-dir", out)...)
		r.Files = map[string]string{}
		entries, err := os.ReadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(out, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			r.Files[e.Name()] = string(b)
		}
		return r
	}
	codes := map[int]int{}
	for _, dir := range dirs {
		for _, cmd := range []string{"render", "validate"} {
			fast := pcsync(cmd, dir)
			ref := pcsync("--reference-paths", cmd, dir)
			if diff := cmp.Diff(fast, ref); diff != "" {
				t.Errorf("pcsync %s %s: --reference-paths changes the result (-fast +reference):\n%s", cmd, dir, diff)
			}
			codes[fast.Code]++
		}
		fast, ref := renderTo(dir), renderTo(dir, "--reference-paths")
		if diff := cmp.Diff(fast, ref); diff != "" {
			t.Errorf("pcsync render %s --output-dir: --reference-paths changes the result (-fast +reference):\n%s", dir, diff)
		}
	}
	// The corpus holds valid configs and invalid ones.
	if codes[0] == 0 || codes[1] == 0 {
		t.Errorf("exit codes seen: %v; want both 0 and 1", codes)
	}
}
