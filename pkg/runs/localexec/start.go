package localexec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// localFiles are the files of one run in the state directory.
type localFiles struct {
	dir string
}

func (f localFiles) state() string  { return filepath.Join(f.dir, "state.json") }
func (f localFiles) stdin() string  { return filepath.Join(f.dir, "stdin") }
func (f localFiles) stdout() string { return filepath.Join(f.dir, "stdout") }
func (f localFiles) stderr() string { return filepath.Join(f.dir, "stderr") }
func (f localFiles) exit() string   { return filepath.Join(f.dir, "exit.json") }
func (f localFiles) logpos() string { return filepath.Join(f.dir, "logpos") }

// prepared is a run's process, ready to spawn.
type prepared struct {
	argv    []string
	env     []string
	stdin   []byte
	secrets []string
	workDir string
}

// envSecrets returns the agent's environment (without the adapter's own
// variables) and the values that must never appear in a message: those of
// the forwarded keys, of the agent's env and the run's Paperclip JWT.
func (e *Executor) envSecrets(r *runs.Run) (runs.EnvSpec, []string) {
	daemon := runs.EnvMap(e.opts.Environ)
	spec := runs.EnvSpec{
		Basic: runs.BasicEnv(daemon), Forwarded: runs.ForwardedEnv(r, daemon), Agent: r.Agent.Env, Home: e.layout.Home(r.AgentKey()),
		Context: r.Request.Context, RunID: r.RunID, CompanyID: r.Company.Spec.ID, AgentID: r.PaperclipAgentID(),
	}
	var secrets []string
	for _, v := range spec.Forwarded {
		if v != "" {
			secrets = append(secrets, v)
		}
	}
	for _, v := range r.Agent.Env {
		secrets = append(secrets, v)
	}
	if r.HasCallback() {
		spec.APIURL, spec.APIKey = localAPIURL(r), r.APIKey()
		if spec.APIKey != "" {
			secrets = append(secrets, spec.APIKey)
		}
	}
	return spec, secrets
}

// localAPIURL is PAPERCLIP_API_URL of a local run: the request's
// paperclip.apiUrl (the writer's view of Paperclip, which is this host's),
// else Settings spec.server.url when set.
func localAPIURL(r *runs.Run) string {
	if u := r.Request.Paperclip.APIURL; u != "" {
		return u
	}
	return r.Model.Settings.Spec.Server.URL
}

// prepare builds the agent's command line and environment.
func (e *Executor) prepare(r *runs.Run) (prepared, error) {
	spec, secrets := e.envSecrets(r)
	inv := r.Invocation
	inv.Command = slices.Clone(inv.Command)
	inv.WorkDir = e.layout.WorkDir(r.Name())
	if f := inv.InstructionsFile; f != "" && !filepath.IsAbs(f) {
		// Relative to the Company file that names it.
		inv.InstructionsFile = filepath.Join(fileDir(r.Company.Source.File, r.Model.Dir), f)
	}
	exe, err := e.resolveExecutable(r, inv.Command[0], pathOf(spec.Build()))
	if err != nil {
		return prepared{}, err
	}
	inv.Command[0] = exe
	cmd, err := r.Adapter.Command(inv)
	if err != nil {
		return prepared{}, &runs.StartError{Code: result.ErrInvalidRequest, Err: err}
	}
	for _, w := range cmd.Warnings {
		e.log.Warn(w, r.LogAttrs()...)
	}
	spec.Adapter = cmd.Env
	env := spec.Build()
	argv := adapters.WithBaseURL(r.Agent.Adapter, cmd.Args, runs.EnvMap(env))
	return prepared{argv: argv, env: env, stdin: cmd.Stdin, secrets: secrets, workDir: inv.WorkDir}, nil
}

func pathOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return ""
}

// resolveExecutable finds the agent CLI: a path with a '/' is taken as is
// (relative to the directory of the Settings file that sets it), a bare
// name is looked up on the agent's PATH.
func (e *Executor) resolveExecutable(r *runs.Run, name, path string) (string, error) {
	t := r.Agent.Adapter
	notFound := func(why string) error {
		return &runs.StartError{Code: result.ErrAgentFailed, Err: fmt.Errorf(
			"%s: %s; install the CLI or point spec.adapters.%s.command at it", t, why, t)}
	}
	if strings.ContainsRune(name, '/') {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(fileDir(r.Model.Settings.Source.File, r.Model.Dir), p)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", notFound(fmt.Sprintf("executable %q: %v", name, err))
		}
		if err := isExecutable(abs); err != nil {
			return "", notFound(fmt.Sprintf("executable %q: %v", abs, err))
		}
		return abs, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if isExecutable(p) == nil {
			if abs, err := filepath.Abs(p); err == nil {
				return abs, nil
			}
			return p, nil
		}
	}
	return "", notFound(fmt.Sprintf("executable %q is not on PATH", name))
}

func isExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode()&0o111 == 0 {
		return errors.New("is not executable")
	}
	return nil
}

// start spawns a run. The state file says "starting" (durably) before the
// process exists, and "running" with the shim's identity right after, so a
// restarted daemon never starts the run a second time.
func (e *Executor) start(_ context.Context, r *runs.Run) (runs.Handle, error) {
	p, err := e.prepare(r)
	if err != nil {
		return nil, err
	}
	files := localFiles{dir: e.layout.RunDir(r.Name())}
	st, err := e.recordStarting(r, &p, files)
	if err != nil {
		return nil, err
	}
	stdio, err := openStdio(files, p.stdin != nil)
	if err != nil {
		return nil, err
	}
	defer stdio.close()
	argv := slices.Concat(e.opts.Shim, []string{"--exit-file", files.exit(), "--"}, p.argv)
	cmd := &exec.Cmd{
		Path:        argv[0],
		Args:        argv,
		Env:         p.env,
		Dir:         p.workDir,
		Stdin:       stdio.in,
		Stdout:      stdio.out,
		Stderr:      stdio.err,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	st.StartedAt = time.Now().UTC()
	if err := cmd.Start(); err != nil {
		// Nothing ran: forget the run so that the failure is its result.
		_ = os.RemoveAll(files.dir)
		return nil, fmt.Errorf("start run shim %s: %w", argv[0], err)
	}
	pid := cmd.Process.Pid
	start, _, err := procIdentity(pid)
	if err != nil {
		e.log.Warn("cannot read the process start time; adoption after a restart will not verify it",
			append(r.LogAttrs(), slog.Any("error", err))...)
	}
	st.Phase, st.PID, st.ProcStart, st.BootID = PhaseRunning, pid, start, bootID()
	if err := writeRunState(files.state(), st, false); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, fmt.Errorf("record the started run: %w (the process was killed)", err)
	}
	e.log.Debug("run process started", append(r.LogAttrs(), slog.Int("pid", pid), slog.String("executable", p.argv[0]))...)
	h := newLocalHandle(e, r, files, st, p.secrets)
	h.exited = make(chan struct{})
	go func() {
		// Reap the shim; its own wait status stands in for the agent's
		// when the shim was killed before it could record that.
		_ = cmd.Wait()
		h.shimState = cmd.ProcessState
		close(h.exited)
	}()
	return h, nil
}

// recordStarting makes the run's directories, writes its stdin, and records
// the run as starting, durably: a restarted daemon finds it before its
// process exists.
func (e *Executor) recordStarting(r *runs.Run, p *prepared, files localFiles) (RunState, error) {
	if err := os.RemoveAll(files.dir); err != nil {
		return RunState{}, fmt.Errorf("run directory: %w", err)
	}
	for _, d := range []string{files.dir, p.workDir, e.layout.Home(r.AgentKey())} {
		if err := safefile.MkdirAll(d); err != nil {
			return RunState{}, fmt.Errorf("run directories: %w", err)
		}
	}
	st := RunState{
		Phase: PhaseStarting, RunID: r.RunID, Company: r.Company.Slug(), Agent: r.Agent.Name,
		Adapter: string(r.Agent.Adapter), StartedAt: time.Now().UTC(),
		TimeoutSec: int(r.Timeout / time.Second), TimeoutSource: r.TimeoutSource, GraceSec: int(r.Grace / time.Second),
		SessionResumed: r.Request.SessionID != "",
	}
	if p.stdin != nil {
		if err := writeNew(files.stdin(), p.stdin); err != nil {
			return RunState{}, fmt.Errorf("write stdin: %w", err)
		}
	}
	// The run directory's entry must be durable too.
	if err := safefile.SyncDir(filepath.Dir(files.dir)); err != nil {
		return RunState{}, err
	}
	if err := writeRunState(files.state(), st, true); err != nil {
		return RunState{}, err
	}
	return st, nil
}

// runStdio is the run's standard streams: its stdin file (or /dev/null) and
// its new stdout and stderr files.
type runStdio struct{ in, out, err *os.File }

// openStdio opens the run's standard streams; hasStdin says whether the run
// has a stdin file.
func openStdio(files localFiles, hasStdin bool) (*runStdio, error) {
	s := &runStdio{}
	var err error
	if hasStdin {
		s.in, _, err = safefile.Open(files.stdin())
	} else {
		s.in, err = os.Open(os.DevNull)
	}
	if err != nil {
		return nil, fmt.Errorf("open stdin: %w", err)
	}
	if s.out, err = safefile.OpenWrite(files.stdout(), safefile.Exclusive, 0o600); err != nil {
		s.close()
		return nil, fmt.Errorf("open stdout: %w", err)
	}
	if s.err, err = safefile.OpenWrite(files.stderr(), safefile.Exclusive, 0o600); err != nil {
		s.close()
		return nil, fmt.Errorf("open stderr: %w", err)
	}
	return s, nil
}

// close closes the streams that are open (the process has its own copies).
func (s *runStdio) close() {
	for _, f := range []*os.File{s.in, s.out, s.err} {
		if f != nil {
			f.Close()
		}
	}
}

// writeNew writes data to a new file of mode 0600 (O_EXCL: never through a
// link or into an existing file).
func writeNew(path string, data []byte) error {
	f, err := safefile.OpenWrite(path, safefile.Exclusive, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parserOptions are the adapter parser's options for r.
func parserOptions(r *runs.Run, secrets []string) adapters.ParserOptions {
	return adapters.ParserOptions{
		ResumedSessionID: r.Request.SessionID,
		PreviousUsage:    r.PreviousUsage,
		Model:            r.Agent.Model,
		Secrets:          secrets,
	}
}

// fileDir is the directory of a config file, or dir when the file is not
// known (a defaulted document).
func fileDir(file, dir string) string {
	if file == "" {
		return dir
	}
	return filepath.Dir(file)
}
