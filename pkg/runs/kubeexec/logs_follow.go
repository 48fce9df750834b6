package kubeexec

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/procinit"
)

const (
	// maxLineBytes is the longest log line kept whole; the rest of a
	// longer line is dropped (from the log file and the parser alike) and
	// a marker says so.
	maxLineBytes = adapters.MaxLineBytes
	// tailBytes is how much of the end of the non-JSON output (the CLI's
	// stderr, mixed into the container log) the parser's error
	// classification sees.
	tailBytes = 16 << 10
)

// keepBufBytes is the largest line buffer a follower keeps between lines;
// with a thousand runs in flight, buffers sized for one huge line each would
// add up.
const keepBufBytes = 64 << 10

// truncatedMarker ends a line cut at maxLineBytes.
const truncatedMarker = " …[line truncated by pcsync]"

// logSource opens the agent container's log through the API server.
type logSource interface {
	// Open returns the log from its first line; with follow, the stream
	// goes on as the container writes.
	Open(ctx context.Context, follow bool) (io.ReadCloser, error)
}

// podLogs reads a pod container's log through pods/log.
type podLogs struct {
	pool                      *logPool
	namespace, pod, container string
}

// Open implements logSource.
func (s podLogs) Open(ctx context.Context, follow bool) (io.ReadCloser, error) {
	client, release := s.pool.acquire()
	rc, err := client.CoreV1().Pods(s.namespace).GetLogs(s.pod, &corev1.PodLogOptions{
		Container: s.container,
		Follow:    follow,
	}).Stream(ctx)
	if err != nil {
		release()
		return nil, fmt.Errorf("Pod/%s/%s log: %w", s.namespace, s.pod, err)
	}
	return &releasingReader{ReadCloser: rc, release: release}, nil
}

// releasingReader gives its stream slot back when closed.
type releasingReader struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

// Close closes the stream and frees its slot.
func (r *releasingReader) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}

// logPool spreads log streams over HTTP/2 connections of their own. An API
// server allows a limited number of concurrent streams per connection (Go's
// default is 250, often configured to 100), and Go's HTTP/2 client waits
// for a free stream rather than opening another connection: a thousand
// follows on the executor's one connection would stall the Job creations
// and watches behind them. Each shard is a client with its own transport
// (its own TCP connection) carrying at most perConn streams.
type logPool struct {
	cfg     *rest.Config
	perConn int

	mu     sync.Mutex
	shards []*logShard
}

type logShard struct {
	client kubernetes.Interface
	active int
}

// newLogPool returns a pool with its first shard.
func newLogPool(cfg *rest.Config, perConn int) (*logPool, error) {
	p := &logPool{cfg: cfg, perConn: perConn}
	s, err := p.newShard()
	if err != nil {
		return nil, err
	}
	p.shards = []*logShard{s}
	return p, nil
}

func (p *logPool) newShard() (*logShard, error) {
	cfg := rest.CopyConfig(p.cfg)
	// A Dial function of its own makes client-go build a transport of its
	// own instead of sharing the cached one.
	cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("log client: %w", err)
	}
	return &logShard{client: client}, nil
}

// acquire returns the client of the least busy shard with room (a new shard
// when all are full) and the function that frees the slot.
func (p *logPool) acquire() (kubernetes.Interface, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *logShard
	for _, s := range p.shards {
		if s.active < p.perConn && (best == nil || s.active < best.active) {
			best = s
		}
	}
	if best == nil {
		if s, err := p.newShard(); err == nil {
			best = s
			p.shards = append(p.shards, s)
		} else {
			// The first shard was built from the same config, so this
			// does not happen; share the first connection if it does.
			best = p.shards[0]
		}
	}
	best.active++
	s := best
	return s.client, func() {
		p.mu.Lock()
		s.active--
		p.mu.Unlock()
	}
}

// follower copies a container's log into <name>.log and feeds every line to
// the adapter's parser. The parser reads the log from its first line, also
// after a reconnect or an adoption; the log file gets every line once: lines
// already in it (skip) and lines already handled on this follower (seen) are
// recognised by their position, since every stream starts at the first line.
type follower struct {
	src       logSource
	out       io.Writer
	parser    adapters.Parser
	log       *slog.Logger
	reconnect time.Duration

	// skip is how many lines the log file held when the run was adopted.
	skip int
	// seen is how many lines of the container log were handled.
	seen int
	// tail is the end of the non-JSON lines.
	tail []byte
	// wbuf is reused for writing a line and its newline at once.
	wbuf []byte
	// streams counts the log requests made, for tests.
	streams int
	// ended, when set, gets pcsync init's record, the container's last
	// line of output (package procinit), which is kept out of the log
	// file and the parser.
	ended func(procinit.Record)
	// complete is set by a record of a successful end: nothing follows
	// it, so the follower stops there instead of waiting for the kubelet
	// to end the stream (it notices the container's exit seconds later)
	// and reading the log once more.
	complete bool
}

// run follows the log until podDone ends and the rest of the log is read,
// or ctx ends. A real kubelet ends a follow stream when the container exits;
// kwok never does, so when the pod is done and the stream is still open, run
// closes it and reads the log once more without follow (skipping what it
// already has). A stream that breaks while the pod runs is opened again after
// the reconnect delay. The stream is read on the calling goroutine; the pod's
// end closes it through a context callback, with no goroutine of its own.
func (f *follower) run(ctx, podDone context.Context) error {
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if f.complete {
			return nil
		}
		if podDone.Err() != nil {
			return f.final(ctx)
		}
		sctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(podDone, cancel)
		f.streams++
		rc, err := f.src.Open(sctx, true)
		if err != nil {
			stop()
			cancel()
			f.log.Debug("cannot open the log stream; trying again", slog.Any("error", err))
			if err := f.pause(ctx, podDone); err != nil {
				return err
			}
			continue
		}
		complete := false
		err = f.consume(rc, func() bool {
			// At EOF: a stream that ends after the pod is done holds the
			// whole log.
			complete = podDone.Err() != nil
			return complete
		})
		rc.Close()
		stop()
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case f.complete, err == nil && complete:
			return nil
		case podDone.Err() != nil:
			// Closed because the pod is done (kwok), or ended or broke
			// just before: read what is missing.
			return f.final(ctx)
		}
		if err != nil {
			f.log.Debug("log stream broke", slog.Any("error", err))
		}
		// Ended early (a kubelet ends it at container exit, before the
		// pod's status says so) or broke: read again once the pod is done,
		// or reconnect.
		if err := f.pause(ctx, podDone); err != nil {
			return err
		}
	}
}

// pause waits for the reconnect delay; it returns early (nil) when the pod
// is done.
func (f *follower) pause(ctx, podDone context.Context) error {
	t := time.NewTimer(f.reconnect)
	defer t.Stop()
	select {
	case <-t.C:
	case <-podDone.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// final reads the whole log once, without follow, for the lines not handled
// yet.
func (f *follower) final(ctx context.Context) error {
	if f.complete {
		return nil
	}
	f.streams++
	rc, err := f.src.Open(ctx, false)
	if err != nil {
		return err
	}
	defer rc.Close()
	return f.consume(rc, func() bool { return true })
}

// consume handles every complete line of r; an unterminated last line is
// handled too when lastOK says the stream is complete (the container is
// gone), and left for the next stream otherwise. It returns nil at EOF, or
// at the record of a successful end.
func (f *follower) consume(r io.Reader, lastOK func() bool) error {
	// Only a staging buffer (each line is copied out): kept small, as a
	// thousand runs in flight each hold one while their agents think.
	br := bufio.NewReaderSize(r, 1<<10)
	idx := 0
	var line []byte
	truncated := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !truncated {
			if len(line)+len(chunk) > maxLineBytes {
				line = append(line, chunk[:maxLineBytes-len(line)]...)
				truncated = true
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			f.take(idx, line, truncated)
			if f.complete {
				return nil
			}
			idx++
			line, truncated = line[:0], false
			if cap(line) > keepBufBytes {
				line = nil // a huge line once is no reason to hold its buffer
			}
		case errors.Is(err, bufio.ErrBufferFull):
			// A long line: keep reading it.
		case errors.Is(err, io.EOF):
			if len(line) > 0 && lastOK() {
				f.take(idx, line, truncated)
			}
			return nil
		default:
			return err
		}
	}
}

// take handles line idx of the current stream.
func (f *follower) take(idx int, line []byte, truncated bool) {
	if idx < f.seen {
		return
	}
	f.seen++
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if f.ended != nil && !truncated {
		if rec, rest, ok := procinit.ParseRecord(string(line)); ok && rest == "" {
			// A failed end is not the end of the reading: the kubelet's
			// account of the container (OOMKilled, …) decides the
			// verdict, and the rest of stderr may still be in flight.
			f.complete = rec.ExitCode == 0
			f.ended(rec)
			return
		}
	}
	if truncated {
		line = append(line, truncatedMarker...)
	} else {
		f.parser.Feed(line)
	}
	if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '{' {
		f.tail = append(f.tail, t...)
		f.tail = append(f.tail, '\n')
		if len(f.tail) > tailBytes+tailBytes/4 {
			f.tail = append(f.tail[:0], f.tail[len(f.tail)-tailBytes:]...)
		}
	}
	if idx < f.skip {
		return
	}
	f.wbuf = append(append(f.wbuf[:0], line...), '\n')
	if _, err := f.out.Write(f.wbuf); err != nil {
		f.log.Warn("cannot write the run's log file", slog.Any("error", err))
	}
	if cap(f.wbuf) > keepBufBytes {
		f.wbuf = nil
	}
}

// stderrTail is the end of the non-JSON output, for the parser.
func (f *follower) stderrTail() string {
	t := f.tail
	if len(t) > tailBytes {
		t = t[len(t)-tailBytes:]
	}
	return string(t)
}

// openLog opens <name>.log for a run, mode 0600, through safefile: never a
// symbolic link, a hard link to another file or a FIFO. A fresh run starts
// it empty; an adopted one keeps it, cut back to its last complete line, and
// reports how many lines it holds, which the follower then skips.
func openLog(path string, adopted bool) (*os.File, int, error) {
	if !adopted {
		f, err := safefile.OpenWrite(path, safefile.Truncate, 0o600)
		return f, 0, err
	}
	f, err := safefile.OpenWrite(path, safefile.ReadWrite, 0o600)
	if err != nil {
		return nil, 0, err
	}
	lines, complete, err := countLines(f)
	if err == nil {
		err = f.Truncate(complete)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekEnd)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, lines, nil
}

// countLines counts the newline-terminated lines of f and the size they
// take.
func countLines(f *os.File) (lines int, size int64, err error) {
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, err := f.ReadAt(buf, off)
		for i := 0; i < n; i++ {
			if buf[i] == '\n' {
				lines++
				size = off + int64(i) + 1
			}
		}
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return lines, size, nil
		}
		if err != nil {
			return 0, 0, err
		}
	}
}
