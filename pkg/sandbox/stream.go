package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// opener returns how the lease's command stream is opened: one pod exec
// (by Options.ExecProtocol; by default WebSocket, SPDY as fallback) of
// `pcsync sandbox-server attach`, whose stdin and stdout carry the framed
// commands and their output. The exec's
// URL holds only that command line; env values and stdin travel inside the
// stream, so the API server's audit log never sees them.
func (m *Manager) opener(l *lease) cmdclient.Opener {
	argv := []string{cmp.Or(l.Server, m.opts.ServerPath), "sandbox-server", "attach", "--socket", l.Socket}
	if m.opts.HostRoot != "" {
		// No PID 1 server where pods share the host: the first attach
		// starts it.
		argv = append(argv, "--spawn")
	}
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		req := m.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(l.Namespace).Name(l.ID).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{
				Container: leasepod.ContainerName, Command: argv, Stdin: true, Stdout: true, Stderr: true,
			}, scheme.ParameterCodec)
		exec, err := m.opts.ExecProtocol.executor(m.rest, req.URL(), m.log)
		if err != nil {
			return nil, fmt.Errorf("Pod/%s/%s: exec: %w", l.Namespace, l.ID, err)
		}
		// The stream outlives the open's ctx: it lives until Close.
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		s := &execStream{r: outR, w: inW, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(s.done)
			err := exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: discardOnClose{outW}, Stderr: &s.stderr})
			switch {
			case err == nil:
				err = io.EOF
			case s.stderr.String() != "":
				err = fmt.Errorf("%w (stderr: %s)", err, lastLine(s.stderr.String()))
			default:
				err = m.opts.ExecProtocol.explain(err)
			}
			end := fmt.Errorf("Pod/%s/%s: exec stream ended: %w", l.Namespace, l.ID, err)
			s.ended.Store(&end)
			_ = outW.CloseWithError(end)
			// client-go's stdin copier may still read: it gets EOF, which
			// ends it quietly (a read error it would log as "Unhandled
			// Error"); a Write of ours gets end (see Write).
			_ = inW.Close()
		}()
		return s, nil
	}
}

// execStream is an exec's stdout (read) and stdin (write) as one stream.
type execStream struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	cancel context.CancelFunc
	done   chan struct{}
	stderr lockedBuffer
	once   sync.Once
	// ended is why the exec ended, once it has.
	ended atomic.Pointer[error]
}

func (s *execStream) Read(p []byte) (int, error) { return s.r.Read(p) }

// Write writes to the exec's stdin; once the exec has ended it fails with
// why it ended (a refused upgrade, the pod's end), not io.ErrClosedPipe.
func (s *execStream) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		if end := s.ended.Load(); end != nil {
			return n, *end
		}
	}
	return n, err
}

// Close ends the exec: it closes the exec's stdin and gives the stream a
// moment to end by itself (the relay ends when its server has shut down)
// before it cuts the connection, and waits for the exec to end, at most
// streamAbandon: an exec whose upgrade the API server (or a proxy before
// it) never answers does not see its context end (client-go's handshake
// has no deadline), and is left to end when that connection does.
func (s *execStream) Close() error {
	s.once.Do(func() {
		_ = s.w.Close()
		select {
		case <-s.done:
		case <-time.After(500 * time.Millisecond):
		}
		s.cancel()
		_ = s.r.CloseWithError(errors.New("stream closed"))
	})
	select {
	case <-s.done:
	case <-time.After(streamAbandon):
	}
	return nil
}

// streamAbandon bounds how long Close waits for a cut exec to end.
const streamAbandon = 5 * time.Second

// discardOnClose is the exec's stdout once the stream's reader is closed:
// what still arrives is dropped rather than failed, which client-go would
// log as an "Unhandled Error" although the stream's end is known and
// reported once, by the stream's reader.
type discardOnClose struct{ w *io.PipeWriter }

func (d discardOnClose) Write(p []byte) (int, error) {
	_, _ = d.w.Write(p) // blocks until read, or fails once the reader is closed
	return len(p), nil
}

// lockedBuffer keeps the last 4 KiB of the exec's stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if b.buf.Len() > 4096 {
		tail := append([]byte(nil), b.buf.Bytes()[b.buf.Len()-4096:]...)
		b.buf.Reset()
		b.buf.Write(tail)
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}
