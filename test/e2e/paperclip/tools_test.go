//go:build integration

package paperclip

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/paperclipserver"
)

// tools are the programs the tests drive, installed or built once per test
// binary.
type tools struct {
	// Root is the repository's root directory.
	Root string
	// NodeBin is the bin directory of Node 24 (first on the PATH of every
	// Node program the tests start).
	NodeBin string
	// Install is hack/paperclip/install.sh's directory: node_modules with
	// paperclipai and playwright-core.
	Install string
	// Pcsync is a pcsync binary built from the repository.
	Pcsync string
	// Adapter is the directory `make paperclip-adapter` built, which
	// Paperclip installs as a local package.
	Adapter string
	// Standin is the stand-in Claude CLI (testdata/standin-claude).
	Standin string
	// StandinBin is a directory whose claude and codex are the stand-in
	// CLI (testdata/standin-claude replays any transcript): first on the
	// PATH of the sandbox's commands.
	StandinBin string
	// Plugin is the directory `make paperclip-plugin` built: pcsync's
	// sandbox-provider plugin, which Paperclip installs as a local path.
	Plugin string
}

var (
	toolsOnce sync.Once
	toolsVal  tools
	toolsErr  error
)

// getTools installs and builds what the tests need, once; a failure fails
// every test that needs them, saying what to install.
func getTools(t testing.TB) tools {
	t.Helper()
	toolsOnce.Do(func() { toolsVal, toolsErr = buildTools() })
	if toolsErr != nil {
		t.Fatal(toolsErr)
	}
	return toolsVal
}

func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot find the repository root")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// run runs a command in dir and returns its stdout; stderr goes to the
// error when it fails.
func runCmd(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(stderr.String(), 4000))
	}
	return stdout.String(), nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func buildTools() (tools, error) {
	var tl tools
	root, err := repoRoot()
	if err != nil {
		return tl, err
	}
	tl.Root = root
	tl.Standin = filepath.Join(root, "test", "e2e", "paperclip", "testdata", "standin-claude")

	start := time.Now()
	out, err := runCmd(root, nil, "bash", "hack/node/install.sh")
	if err != nil {
		return tl, fmt.Errorf("installing Node 24 (hack/node/install.sh; needs npm): %w", err)
	}
	tl.NodeBin = lastLine(out)
	out, err = runCmd(root, nil, "bash", "hack/paperclip/install.sh")
	if err != nil {
		return tl, fmt.Errorf("installing Paperclip, playwright-core and chromium (hack/paperclip/install.sh; needs npm and apt-get): %w", err)
	}
	tl.Install = lastLine(out)
	fmt.Fprintf(os.Stderr, "e2e: Node and Paperclip ready in %s (%s)\n", time.Since(start).Round(time.Millisecond), tl.Install)

	// PCSYNC_E2E_BIN: a pcsync binary to use instead of building one (as
	// hack/demo.sh's PCSYNC_BIN).
	if tl.Pcsync = os.Getenv("PCSYNC_E2E_BIN"); tl.Pcsync == "" {
		bin, err := os.MkdirTemp("", "pcsync-e2e-bin-")
		if err != nil {
			return tl, err
		}
		onExit(func() { _ = os.RemoveAll(bin) })
		tl.Pcsync = filepath.Join(bin, "pcsync")
		if _, err := runCmd(root, nil, "go", "build", "-o", tl.Pcsync, "./cmd/pcsync"); err != nil {
			return tl, fmt.Errorf("building pcsync: %w", err)
		}
		if err := os.Chmod(bin, 0o755); err != nil {
			return tl, err
		}
	}
	adapter, err := buildAdapter()
	if err != nil {
		return tl, err
	}
	tl.Adapter = adapter
	if tl.Plugin, err = buildPlugin(); err != nil {
		return tl, err
	}
	if tl.StandinBin, err = os.MkdirTemp("", "pcsync-e2e-standin-"); err != nil {
		return tl, err
	}
	standin := tl.StandinBin
	onExit(func() { _ = os.RemoveAll(standin) })
	if err := os.Chmod(tl.StandinBin, 0o755); err != nil {
		return tl, err
	}
	for name, script := range map[string]string{"claude": "standin-claude", "codex": "standin-claude"} {
		src := filepath.Join(root, "test", "e2e", "paperclip", "testdata", script)
		if err := os.Symlink(src, filepath.Join(tl.StandinBin, name)); err != nil {
			return tl, err
		}
	}
	return tl, nil
}

// buildPlugin builds integrations/paperclip-sandbox (make paperclip-plugin's
// script, paperclipserver.BuildPlugin) into a directory of its own.
func buildPlugin() (string, error) {
	dir, err := os.MkdirTemp("", "pcsync-e2e-plugin-")
	if err != nil {
		return "", err
	}
	onExit(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	start := time.Now()
	out, err := paperclipserver.BuildPlugin(context.Background(), filepath.Join(dir, "paperclip-plugin"))
	if err != nil {
		return "", fmt.Errorf("building the Paperclip sandbox plugin (make paperclip-plugin): %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e: sandbox plugin built in %s\n", time.Since(start).Round(time.Millisecond))
	return out, nil
}

// nodeEnv puts Node 24 first on PATH.
func (tl tools) nodeEnv() []string {
	return []string{"PATH=" + tl.NodeBin + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// buildAdapter builds integrations/paperclip (make paperclip-adapter's
// script, paperclipserver.BuildAdapter) into a directory of its own and
// returns it.
func buildAdapter() (string, error) {
	dir, err := os.MkdirTemp("", "pcsync-e2e-adapter-")
	if err != nil {
		return "", err
	}
	onExit(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	start := time.Now()
	out, err := paperclipserver.BuildAdapter(context.Background(), filepath.Join(dir, "paperclip-adapter"))
	if err != nil {
		return "", fmt.Errorf("building the Paperclip adapter (make paperclip-adapter): %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e: adapter built in %s\n", time.Since(start).Round(time.Millisecond))
	return out, nil
}
