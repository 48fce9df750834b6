//go:build unix && realcli

package adapters

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// usageErrorPattern matches how the CLIs reject a command line they do not
// understand (commander, yargs, clap, and the CLIs' own checks; opencode
// prints its usage).
var usageErrorPattern = regexp.MustCompile(`(?i)unknown option|unknown argument|unexpected argument|unrecognized (?:option|argument)|invalid option|not enough arguments|requires --verbose|too many arguments|missing required argument|(?m)^opencode run \[message\.\.\]`)

// TestRealCLIsAcceptCommandLines runs the installed agent CLIs with the
// command lines this package builds and fails if one rejects its argv. It
// needs every CLI on PATH, so it is built only with the realcli tag (no
// credentials or network are needed: each run ends with an auth or network
// error, or is stopped after 25 s, which is acceptance too); a missing CLI
// fails the test. Last run against the versions in CheckedVersions:
//
//	npm install @anthropic-ai/claude-code@2.1.197 @openai/codex@0.169.0 \
//	  @google/gemini-cli@0.61.0 opencode-ai@1.18.33 \
//	  @mariozechner/pi-coding-agent@0.73.1 acpx@0.19.1
//	PATH=$PWD/node_modules/.bin:$PATH go test -tags realcli -run RealCLIs -v ./pkg/adapters/
func TestRealCLIsAcceptCommandLines(t *testing.T) {
	tmp := t.TempDir()
	instr := filepath.Join(tmp, "AGENTS.md")
	if err := os.WriteFile(instr, []byte("Be brief.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sessions := map[Type]string{
		ClaudeLocal: "3f2c5a8e-1111-4222-8333-944455556666", CodexLocal: "019f0cbe-bd02-75f3-a758-1004ad5cad64",
		GeminiLocal: "3f2c5a8e-1111-4222-8333-944455556666", CursorLocal: "3f2c5a8e-1111-4222-8333-944455556666",
		OpencodeLocal: "ses_doesnotexist", PiLocal: "3f2c5a8e-1111", AcpxLocal: "3f2c5a8e-1111-4222-8333-944455556666",
	}
	efforts := map[Type]string{ClaudeLocal: "high", CodexLocal: "high", OpencodeLocal: "high", PiLocal: "high"}
	for _, typ := range Types() {
		if strings.HasSuffix(CheckedVersions()[typ], "(transcripts only)") {
			continue // no installable CLI (cursor_local): checked on transcripts
		}
		exe := BuiltinDefaults()[typ].Command[0]
		path, err := exec.LookPath(exe)
		if err != nil {
			t.Errorf("%s: %s is not on PATH; install the CLIs as this test's comment says (npm install %s)", typ, exe, CheckedVersions()[typ])
			continue
		}
		for _, resume := range []bool{false, true} {
			inv := Invocation{Command: []string{path}, Model: "test-model", Effort: efforts[typ], MaxTurns: 3,
				InstructionsFile: instr, Prompt: "say hi", WorkDir: tmp}
			if typ == AcpxLocal {
				// A raw agent command that exits at once: acpx still parses
				// the whole command line first.
				inv.ExtraArgs = []string{"--agent", "false"}
			}
			if resume {
				inv.SessionID = sessions[typ]
			}
			runCLI(t, typ, inv, tmp)
		}
	}
}

func runCLI(t *testing.T, typ Type, inv Invocation, tmp string) {
	t.Helper()
	a, _ := Get(typ)
	c, err := a.Command(inv)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Args[0], c.Args[1:]...)
	cmd.Dir = c.Dir
	// npm launchers start the real binary as a child: stop the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 3 * time.Second
	cmd.Stdin = bytes.NewReader(c.Stdin)
	home := filepath.Join(tmp, "home-"+string(typ))
	_ = os.MkdirAll(home, 0o755)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=dumb"}
	for k, v := range c.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	code := cmd.ProcessState.ExitCode()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && ctx.Err() == nil {
		t.Fatalf("%s: run %q: %v", typ, c.Args, err)
	}
	text := out.String()
	head := text
	if len(head) > 600 {
		head = head[:600]
	}
	if m := usageErrorPattern.FindString(text); m != "" {
		t.Errorf("%s rejected %q (%q): %s", typ, c.Args, m, head)
		return
	}
	t.Logf("%s accepted %s (exit %d, timed out %v): %s", typ, strings.Join(c.Args, " "), code, ctx.Err() != nil, strings.ReplaceAll(head, "\n", " | "))
}
