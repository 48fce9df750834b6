package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// connect opens a ready lease's command stream in the background. The
// lease is Paperclip's once its pod runs: the first execute waits for the
// stream, and a command server that never answers (within wait) fails that
// execute and ends the lease. The pod's UID joins the journal meanwhile.
// ws, if not nil, is the stream the daemon opened to the pod while it was
// a warm pool member: the lease takes it (its first execute waits for it,
// not for an open of its own), or opens its own if it no longer answers.
func (m *Manager) connect(l *lease, wait time.Duration, ws *warmStream) {
	op := l.beginOpen(ws != nil)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		cctx, cancel := context.WithTimeout(m.base(), wait)
		defer cancel()
		if op != nil {
			c := ws.client(cctx)
			switch {
			case c == nil && ws.err != nil && refusedForGood(ws.err):
				// No open of the lease's own would do better.
				_, _ = l.settleOpen(op, nil, ws.err)
				m.log.Error("sandbox lease: the command server does not answer; ending the lease", slog.String("lease", l.ID), slog.Any("error", ws.err))
				m.releaseAsync(l, EndFailed)
				return
			case c == nil:
				_, _ = l.settleOpen(op, nil, nil) // its waiters open their own
			default:
				if _, err := l.settleOpen(op, c, nil); err != nil {
					return // the lease ended meanwhile
				}
			}
		}
		if _, err := m.client(cctx, l); err != nil {
			if m.base().Err() != nil {
				return // the daemon is stopping: the pod stays for the next one
			}
			m.log.Error("sandbox lease: the command server does not answer; ending the lease", slog.String("lease", l.ID), slog.Any("error", err))
			m.releaseAsync(l, EndFailed)
			return
		}
		if err := m.journalLease(l); err != nil {
			m.log.Warn("sandbox: lease journal", slog.Any("error", err))
		}
	}()
}

// client returns the lease's command client. The first call opens the
// command stream (see open); concurrent callers wait for that one open. A
// lease whose end has begun opens none.
func (m *Manager) client(ctx context.Context, l *lease) (*cmdclient.Client, error) {
	for {
		l.mu.Lock()
		c, opening, state := l.client, l.opening, l.state
		if c == nil && opening == nil && state != LeaseEnding && state != LeaseGone {
			l.opening = &openAttempt{done: make(chan struct{})}
		}
		l.mu.Unlock()
		switch {
		case c != nil:
			return c, nil
		case state == LeaseEnding || state == LeaseGone:
			return nil, fmt.Errorf("lease %s: state %s", l.ID, state)
		case opening != nil:
			select {
			case <-opening.done:
				// The open this caller waited on failed: its error is
				// this caller's too (not a wait until its own deadline),
				// unless the opener merely stopped waiting (its own
				// context ended): then this caller opens.
				if err := opening.err; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					return nil, err
				}
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("lease %s: waiting for its command stream: %w", l.ID, ctx.Err())
			}
		}
		return m.openShared(ctx, l)
	}
}

// openAttempt is one open of a lease's command stream that other callers
// may wait on: done is closed when it is over, err is then its failure.
type openAttempt struct {
	done chan struct{}
	err  error
}

// openShared opens the lease's command stream for client, which made
// l.opening, and keeps it unless the lease's end began meanwhile.
func (m *Manager) openShared(ctx context.Context, l *lease) (*cmdclient.Client, error) {
	c, err := m.open(ctx, l)
	l.mu.Lock()
	op := l.opening
	l.mu.Unlock()
	return l.settleOpen(op, c, err)
}

// beginOpen marks an open of l's stream under way (l.opening) and returns
// it, when want and no stream is open or opening; nil otherwise.
func (l *lease) beginOpen(want bool) *openAttempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !want || l.client != nil || l.opening != nil {
		return nil
	}
	l.opening = &openAttempt{done: make(chan struct{})}
	return l.opening
}

// settleOpen ends open op of l's stream with client c or err, and keeps c
// unless the lease's end or suspend began meanwhile (its pod goes). Neither c nor err: the open gave
// up, and those who waited on it open their own.
func (l *lease) settleOpen(op *openAttempt, c *cmdclient.Client, err error) (*cmdclient.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opening = nil
	if c != nil && (l.state == LeaseEnding || l.state == LeaseGone || l.state == LeaseSuspending || l.state == LeaseSuspended) {
		_ = c.Close()
		c, err = nil, fmt.Errorf("lease %s: state %s", l.ID, l.state)
	}
	op.err = err
	close(op.done)
	if c == nil {
		return nil, err
	}
	l.client = c
	return c, nil
}

// open opens a command stream to the lease's server, retrying with backoff
// while the pod's command server is not yet listening (until ctx ends), and
// checks that the server runs commands; with HostRoot it also makes the
// lease's directories.
func (m *Manager) open(ctx context.Context, l *lease) (*cmdclient.Client, error) {
	var c *cmdclient.Client
	var last error
	err := openBackoff.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		c, last = cmdclient.New(ctx, m.opener(l), m.clientOptions())
		if last != nil && refusedForGood(last) {
			return false, last // no open will do better until an operator acts
		}
		return last == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("Pod/%s/%s: the command server does not answer: %w", l.Namespace, l.ID, cmp.Or(last, err))
	}
	return m.runsCommands(ctx, l, c)
}

// dial is one try of open: a stream to the lease's server, which must run
// a command.
func (m *Manager) dial(ctx context.Context, l *lease) (*cmdclient.Client, error) {
	c, err := cmdclient.New(ctx, m.opener(l), m.clientOptions())
	if err != nil {
		return nil, fmt.Errorf("Pod/%s/%s: the command server does not answer: %w", l.Namespace, l.ID, err)
	}
	return m.runsCommands(ctx, l, c)
}

func (m *Manager) clientOptions() cmdclient.Options {
	o := cmdclient.DefaultOptions()
	o.Logger = m.log
	o.OnReopen = m.opts.Metrics.SandboxStreamReopen
	return o
}

// runsCommands checks that the server behind c runs a command (with
// HostRoot: makes the lease's directories); c is closed when it does not.
func (m *Manager) runsCommands(ctx context.Context, l *lease, c *cmdclient.Client) (*cmdclient.Client, error) {
	argv := []string{"true"}
	if m.opts.HostRoot != "" {
		argv = []string{"mkdir", "-p", l.Workspace, l.Home, l.Tmp}
	}
	var stderr lockedBuffer
	exit, err := c.Exec(ctx, cmdclient.Command{Argv: argv, BaseEnv: true, Stderr: &stderr})
	if err == nil && exit.Code != 0 {
		err = fmt.Errorf("%s: exit %d: %s %s", strings.Join(argv, " "), exit.Code, exit.Error, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("Pod/%s/%s: the command server does not run commands: %w", l.Namespace, l.ID, err)
	}
	return c, nil
}

// openBackoff paces the opens of a command stream while the pod's server
// is not yet listening: from 50 ms, doubling, then every second (the cap)
// until the open's context ends.
var openBackoff = wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 5, Cap: time.Second}
