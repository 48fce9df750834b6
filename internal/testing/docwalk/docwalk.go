// Package docwalk reads the shell blocks of a section of the docs, so that a
// test follows a walkthrough word for word: the blocks as written, with only
// the reader's own values (a registry, a path, a URL) put in.
package docwalk

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
)

// ShellBlocks returns the ```sh blocks of the markdown file's section that
// starts at the heading line heading and ends at the next heading of the
// same or a higher level, each with its fence's indentation removed.
func ShellBlocks(path, heading string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	level := strings.IndexByte(heading, ' ')
	var blocks, cur []string
	in, inBlock := false, false
	var indent string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case !in:
			in = line == heading
		case inBlock && trimmed == "```":
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
			inBlock, cur = false, nil
		case inBlock:
			cur = append(cur, strings.TrimPrefix(line, indent))
		case trimmed == "```sh":
			inBlock, indent = true, line[:len(line)-len(trimmed)]
		case strings.HasPrefix(line, "#"):
			if l := strings.IndexByte(line, ' '); l > 0 && l <= level && strings.Trim(line[:l], "#") == "" {
				return blocks, nil
			}
		}
	}
	if !in {
		return nil, fmt.Errorf("%s has no heading %q", path, heading)
	}
	return blocks, sc.Err()
}

// Script joins the section's shell blocks, which must be n, and puts the
// reader's values in: each subs pair replaces its first string, which the
// blocks must still say (else the docs changed under the test).
func Script(path, heading string, n int, subs [][2]string) (string, error) {
	return Sections(path, []Section{{Heading: heading, Blocks: n}}, subs)
}

// Section is a section of a doc that a test follows: its heading line and
// the number of shell blocks it has.
type Section struct {
	Heading string
	Blocks  int
}

// Sections is Script of a walkthrough spread over several sections of one
// doc: their shell blocks joined in order, then the reader's values put in.
func Sections(path string, sections []Section, subs [][2]string) (string, error) {
	var b strings.Builder
	for _, s := range sections {
		blocks, err := ShellBlocks(path, s.Heading)
		if err != nil {
			return "", err
		}
		if len(blocks) != s.Blocks {
			return "", fmt.Errorf("%s %q has %d shell blocks, want %d (update the test)", path, s.Heading, len(blocks), s.Blocks)
		}
		b.WriteString(strings.Join(blocks, ""))
	}
	where := fmt.Sprintf("%s %q", path, sections[0].Heading)
	if len(sections) > 1 {
		where += fmt.Sprintf(" to %q", sections[len(sections)-1].Heading)
	}
	script := b.String()
	for _, r := range subs {
		if !strings.Contains(script, r[0]) {
			return "", fmt.Errorf("%s no longer says %q (update the test's substitutions)", where, r[0])
		}
		script = strings.ReplaceAll(script, r[0], r[1])
	}
	return script, nil
}

// Run writes script into dir as walkthrough.sh and runs it as a reader's
// shell would stop at the first failure (bash -euo pipefail), in dir, with
// env added to this process's, until it exits or ctx ends, and returns
// what it printed. What it started in the background runs on in its process
// group until stop ends it: SIGTERM, then SIGKILL after grace (its output
// must go elsewhere, e.g. to a file: Run waits for its output to close).
func Run(ctx context.Context, dir, script string, env []string) (out string, stop func(grace time.Duration), err error) {
	stop = func(time.Duration) {}
	if err := os.WriteFile(filepath.Join(dir, "walkthrough.sh"), []byte(script), 0o644); err != nil {
		return "", stop, err
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "walkthrough.sh")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var buf lockedbuf.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return "", stop, err
	}
	pgid := cmd.Process.Pid
	stop = func(grace time.Duration) {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		time.Sleep(grace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	err = cmd.Wait()
	return buf.String(), stop, err
}
