package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// ExecParams are one execute of Paperclip on a lease.
type ExecParams struct {
	LeaseID string
	Command string
	Args    []string
	Cwd     string
	Env     map[string]string
	// Stdin is fed to the command, then closed; nil gives it no stdin
	// (unless ExecStreams.Stdin does).
	Stdin   *string
	Timeout time.Duration
}

// ExecStreams are an execute's standard streams, in the shape of
// client-go's remotecommand.StreamOptions: the daemon holds none of them.
type ExecStreams struct {
	// Stdin, if not nil, is fed to the command as it is read, then closed
	// at its EOF; nil: ExecParams.Stdin, or no stdin.
	Stdin io.Reader
	// Stdout and Stderr, if not nil, are written the command's output as
	// it comes; nil: dropped. A write error ends the execute and kills
	// the command.
	Stdout, Stderr io.Writer
	// Notice, if not nil, is given once what the lease's last resume
	// from suspension has to tell the run, before the command runs; the
	// command's output holds none of it.
	Notice func(string)
}

// ExecExit is how an execute ended.
type ExecExit struct {
	// ExitCode is nil when a signal ended the command.
	ExitCode *int
	Signal   string
	TimedOut bool
}

// ExecResult is how an execute ended, with its whole output: Execute's,
// for callers in the daemon's process that want the output whole.
type ExecResult struct {
	ExecExit
	Stdout string
	Stderr string
}

// ExecuteStream runs one command on the lease's command server, exactly
// as given (argv, cwd, stdin), with the part of env that EnvRule lets
// through over the pod's own environment; its stdin and output flow
// through s as they come. Many executes may run at once on one lease; a
// command's background processes outlive it. Cancelling ctx kills the
// command's process group. A command that could not start ends with exit
// code 127 or 126, and why on its Stderr.
func (m *Manager) ExecuteStream(ctx context.Context, p ExecParams, s ExecStreams) (ExecExit, error) {
	began := time.Now()
	var exit cmdclient.Exit
	record := func(l *lease, err error) {
		outcome := ExecCompleted
		if err != nil {
			outcome = ExecFailed
		}
		m.opts.Metrics.SandboxExecute(l.Company, time.Since(began), string(outcome))
	}
	err := m.onLease(ctx, p.LeaseID, record, func(l *lease, c *cmdclient.Client) error {
		if s.Notice != nil {
			if n := l.takeResumed(); n != "" {
				s.Notice(n)
			}
		}
		cmd := m.command(l, p, s)
		if err := m.addProxyEnv(ctx, l, &cmd); err != nil {
			return fmt.Errorf("lease %s: %w", l.ID, err)
		}
		if err := m.writeCodexConfig(ctx, l, c, cmd.Env); err != nil {
			return fmt.Errorf("lease %s: %w", l.ID, err)
		}
		var err error
		if exit, err = c.Exec(ctx, cmd); err != nil {
			return fmt.Errorf("lease %s: %w", l.ID, err)
		}
		return nil
	})
	if err != nil {
		return ExecExit{}, err
	}
	if exit.Error != "" && s.Stderr != nil {
		_, _ = io.WriteString(s.Stderr, exit.Error+"\n")
	}
	return execExit(exit), nil
}

// Execute runs p as ExecuteStream does, with p.Stdin as its stdin, and
// returns its whole output in the result; onOutput, if not nil, is given
// each chunk as it comes. The API streams (ExecuteStream); Execute holds
// the output, for callers that want it whole (tests and benchmarks; the
// daemon itself does not call it).
func (m *Manager) Execute(ctx context.Context, p ExecParams, onOutput func(stream string, chunk []byte)) (ExecResult, error) {
	var out, errOut bytes.Buffer
	exit, err := m.ExecuteStream(ctx, p, ExecStreams{
		Stdout: chunkTee{&out, "stdout", onOutput}, Stderr: chunkTee{&errOut, "stderr", onOutput}})
	if err != nil {
		return ExecResult{}, err
	}
	return ExecResult{ExecExit: exit, Stdout: out.String(), Stderr: errOut.String()}, nil
}

// chunkTee keeps a stream's output and hands each chunk to onOutput.
type chunkTee struct {
	buf      *bytes.Buffer
	stream   string
	onOutput func(stream string, chunk []byte)
}

func (t chunkTee) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if t.onOutput != nil {
		t.onOutput(t.stream, p)
	}
	return len(p), nil
}

// onLease is the opening that every command on a lease shares (an
// execute, a sync's command): it finds lease id, holds it in use while run
// runs (a release waits for it), and gives run the lease's command stream,
// opened by the lease's first command. Once the lease is found, record is
// told how the command went.
func (m *Manager) onLease(ctx context.Context, id string, record func(l *lease, err error), run func(l *lease, c *cmdclient.Client) error) error {
	l := m.lookup(id)
	if l == nil {
		return fmt.Errorf("lease %s: %w: it was released, expired or never pcsync's", id, ErrNoLease)
	}
	err := m.inUse(ctx, l, run)
	record(l, err)
	return err
}

// inUse runs run on l's command stream while l is in use; a suspended
// lease is resumed first, one suspending or resuming waited for.
func (m *Manager) inUse(ctx context.Context, l *lease, run func(l *lease, c *cmdclient.Client) error) error {
	if err := m.ensureReady(ctx, l); err != nil {
		return err
	}
	if err := l.begin(); err != nil {
		return err
	}
	defer l.done()
	c, err := m.client(ctx, l)
	if err != nil {
		return fmt.Errorf("lease %s: command stream: %w", l.ID, err)
	}
	return run(l, c)
}

// command is the command an execute runs on lease l: its argv, cwd and
// streams as given, and the part of its env that the lease's EnvRule lets
// through (where pods share the host, over the lease's own HOME and
// TMPDIR).
func (m *Manager) command(l *lease, p ExecParams, s ExecStreams) cmdclient.Command {
	env := m.filterEnv(l, p.Env)
	if m.opts.HostRoot != "" {
		if _, ok := env["HOME"]; !ok {
			env["HOME"] = l.Home
		}
		if _, ok := env["TMPDIR"]; !ok {
			env["TMPDIR"] = l.Tmp
		}
	}
	cmd := cmdclient.Command{
		Argv:    append([]string{p.Command}, p.Args...),
		Cwd:     cmp.Or(p.Cwd, l.Workspace),
		Env:     env,
		BaseEnv: true,
		Timeout: p.Timeout,
		Stdin:   s.Stdin,
		Stdout:  s.Stdout,
		Stderr:  s.Stderr,
	}
	if cmd.Stdin == nil && p.Stdin != nil {
		cmd.Stdin = strings.NewReader(*p.Stdin)
	}
	return cmd
}

// filterEnv is the part of env that lease l's EnvRule lets through; the
// keys it keeps from the pod are counted, and logged once per lease.
func (m *Manager) filterEnv(l *lease, in map[string]string) map[string]string {
	env, dropped := l.rule.Filter(in)
	if len(dropped) == 0 {
		return env
	}
	m.opts.Metrics.SandboxEnvKeysKept(l.Company, len(dropped))
	l.mu.Lock()
	var fresh []string
	for _, k := range dropped {
		if !l.warned[k] {
			l.warned[k] = true
			fresh = append(fresh, k)
		}
	}
	l.mu.Unlock()
	if len(fresh) > 0 {
		m.log.Info("sandbox: env keys kept from the pod (allow one with the environment's envAllow)",
			slog.String("lease", l.ID), slog.String("keys", strings.Join(fresh, ",")))
	}
	return env
}

// execExit is how a command ended as an execute answers it: no exit code
// when a signal ended it.
func execExit(exit cmdclient.Exit) ExecExit {
	res := ExecExit{Signal: exit.Signal, TimedOut: exit.TimedOut}
	if exit.Signal == "" {
		code := exit.Code
		res.ExitCode = &code
	}
	return res
}
