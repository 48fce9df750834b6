package kubeexec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/procinit"
)

// recordingParser remembers the lines it is fed.
type recordingParser struct{ lines []string }

func (p *recordingParser) Feed(line []byte) { p.lines = append(p.lines, string(line)) }
func (p *recordingParser) Finish(adapters.ProcessOutcome) adapters.Outcome {
	return adapters.Outcome{}
}

// fakeLog is a container log that grows; follow streams deliver what is
// there and then, like kwok, stay open until their context ends — unless
// endFollow makes them end like a real kubelet's, or breakAfter makes the
// next follow stream fail after that many bytes.
type fakeLog struct {
	mu         sync.Mutex
	data       []byte
	grew       chan struct{}
	endFollow  bool
	breakAfter int
	opens      []bool // follow flag of each Open
}

func newFakeLog(lines ...string) *fakeLog {
	l := &fakeLog{grew: make(chan struct{})}
	l.append(lines...)
	return l
}

func (l *fakeLog) append(lines ...string) {
	l.mu.Lock()
	for _, s := range lines {
		l.data = append(l.data, s...)
		l.data = append(l.data, '\n')
	}
	close(l.grew)
	l.grew = make(chan struct{})
	l.mu.Unlock()
}

func (l *fakeLog) appendRaw(s string) {
	l.mu.Lock()
	l.data = append(l.data, s...)
	close(l.grew)
	l.grew = make(chan struct{})
	l.mu.Unlock()
}

func (l *fakeLog) Open(ctx context.Context, follow bool) (io.ReadCloser, error) {
	l.mu.Lock()
	l.opens = append(l.opens, follow)
	breakAfter := l.breakAfter
	l.breakAfter = 0
	l.mu.Unlock()
	if !follow {
		l.mu.Lock()
		defer l.mu.Unlock()
		return io.NopCloser(bytes.NewReader(bytes.Clone(l.data))), nil
	}
	pr, pw := io.Pipe()
	go func() {
		sent := 0
		for {
			l.mu.Lock()
			chunk := bytes.Clone(l.data[sent:])
			grew, end := l.grew, l.endFollow
			l.mu.Unlock()
			if breakAfter > 0 && sent+len(chunk) > breakAfter {
				chunk = chunk[:breakAfter-sent]
				_, _ = pw.Write(chunk)
				pw.CloseWithError(errors.New("stream reset"))
				return
			}
			if len(chunk) > 0 {
				if _, err := pw.Write(chunk); err != nil {
					return
				}
				sent += len(chunk)
			}
			if end {
				pw.Close()
				return
			}
			select {
			case <-grew:
			case <-ctx.Done():
				pw.CloseWithError(ctx.Err())
				return
			}
		}
	}()
	return pr, nil
}

func (l *fakeLog) openCount() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.opens...)
}

// waitFor waits (generously) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newTestFollower(src logSource, out io.Writer, skip int) (*follower, *recordingParser) {
	p := &recordingParser{}
	return &follower{src: src, out: out, parser: p, log: slog.New(slog.DiscardHandler), reconnect: 10 * time.Millisecond, skip: skip}, p
}

func lines(n int, prefix string) []string {
	var out []string
	for i := range n {
		out = append(out, prefix+string(rune('a'+i)))
	}
	return out
}

func TestFollowerKwokNeverEndsTheStream(t *testing.T) {
	src := newFakeLog(lines(3, "first-")...)
	out := &lockedbuf.Buffer{}
	f, p := newTestFollower(src, out, 0)
	podDone, podEnd := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- f.run(context.Background(), podDone) }()
	waitFor(t, "three lines", func() bool { return strings.Count(out.String(), "\n") == 3 })
	src.append("later-a", "later-b")
	src.appendRaw("last line without newline")
	podEnd()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want := append(append(lines(3, "first-"), "later-a", "later-b"), "last line without newline")
	if diff := cmp.Diff(strings.Join(want, "\n")+"\n", out.String()); diff != "" {
		t.Errorf("log file (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, p.lines); diff != "" {
		t.Errorf("parser lines (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{true, false}, src.openCount()); diff != "" {
		t.Errorf("log requests (follow flags) (-want +got):\n%s", diff)
	}
}

func TestFollowerKubeletEndsTheStream(t *testing.T) {
	src := newFakeLog(lines(2, "x-")...)
	src.endFollow = true
	out := &lockedbuf.Buffer{}
	f, p := newTestFollower(src, out, 0)
	// A stream ending after the pod is done holds the whole log: no second
	// request.
	rc, _ := src.Open(context.Background(), true)
	if err := f.consume(rc, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(lines(2, "x-"), p.lines); diff != "" {
		t.Errorf("parser lines (-want +got):\n%s", diff)
	}
	if got := out.String(); got != "x-a\nx-b\n" {
		t.Errorf("log file = %q", got)
	}
}

func TestFollowerEndedStreamBeforePodDoneReadsAgain(t *testing.T) {
	src := newFakeLog(lines(2, "y-")...)
	src.endFollow = true
	out := &lockedbuf.Buffer{}
	f, p := newTestFollower(src, out, 0)
	f.reconnect = time.Hour // only the pod's end makes it read again
	podDone, podEnd := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- f.run(context.Background(), podDone) }()
	waitFor(t, "two lines", func() bool { return strings.Count(out.String(), "\n") == 2 })
	src.append("y-after")
	podEnd()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want := append(lines(2, "y-"), "y-after")
	if diff := cmp.Diff(want, p.lines); diff != "" {
		t.Errorf("parser lines (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(strings.Join(want, "\n")+"\n", out.String()); diff != "" {
		t.Errorf("log file (-want +got):\n%s", diff)
	}
}

func TestFollowerReconnectsWithoutDuplicates(t *testing.T) {
	src := newFakeLog(lines(4, "z-")...)
	// The first stream breaks in the middle of the third line.
	src.breakAfter = len("z-a\nz-b\nz-")
	out := &lockedbuf.Buffer{}
	f, p := newTestFollower(src, out, 0)
	podDone, podEnd := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- f.run(context.Background(), podDone) }()
	waitFor(t, "four lines", func() bool { return strings.Count(out.String(), "\n") == 4 })
	src.append("z-e")
	waitFor(t, "five lines", func() bool { return strings.Count(out.String(), "\n") == 5 })
	podEnd()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want := lines(5, "z-")
	if diff := cmp.Diff(want, p.lines); diff != "" {
		t.Errorf("parser lines (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(strings.Join(want, "\n")+"\n", out.String()); diff != "" {
		t.Errorf("log file (-want +got):\n%s", diff)
	}
	if opens := src.openCount(); len(opens) != 3 || !opens[0] || !opens[1] || opens[2] {
		t.Errorf("log requests (follow flags) = %v, want [true true false]", opens)
	}
}

func TestFollowerAdoptedKeepsTheLogFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r1.log")
	// An earlier daemon copied two lines and half of a third.
	if err := os.WriteFile(path, []byte("a-a\na-b\na-c-half"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, skip, err := openLog(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if skip != 2 {
		t.Fatalf("openLog counted %d lines, want 2", skip)
	}
	src := newFakeLog(lines(4, "a-")...)
	fol, p := newTestFollower(src, f, skip)
	podDone, podEnd := context.WithCancel(context.Background())
	podEnd()
	if err := fol.run(context.Background(), podDone); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, _ := os.ReadFile(path)
	want := lines(4, "a-")
	if diff := cmp.Diff(strings.Join(want, "\n")+"\n", string(got)); diff != "" {
		t.Errorf("log file (-want +got):\n%s", diff)
	}
	// The parser reads the whole log again: the result needs the session
	// id of the first line.
	if diff := cmp.Diff(want, p.lines); diff != "" {
		t.Errorf("parser lines (-want +got):\n%s", diff)
	}
}

func TestFollowerStderrTail(t *testing.T) {
	src := newFakeLog(`{"type":"system"}`, "Error: Session not found", `{"type":"result"}`, "  ")
	out := &lockedbuf.Buffer{}
	f, _ := newTestFollower(src, out, 0)
	podDone, podEnd := context.WithCancel(context.Background())
	podEnd()
	if err := f.run(context.Background(), podDone); err != nil {
		t.Fatal(err)
	}
	if got := f.stderrTail(); got != "Error: Session not found\n" {
		t.Errorf("stderr tail = %q", got)
	}
}

func TestFollowerStopsWithContext(t *testing.T) {
	src := newFakeLog("only")
	out := &lockedbuf.Buffer{}
	f, _ := newTestFollower(src, out, 0)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- f.run(ctx, context.Background()) }()
	waitFor(t, "one line", func() bool { return out.String() == "only\n" })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("run = %v, want context.Canceled", err)
	}
}

// pcsync init's record, the container's last line, goes to the handle, not
// to the log file or the parser; a line that only looks like one stays.
func TestFollowerHandsOverInitRecord(t *testing.T) {
	rec := procinit.Record{StartedAt: time.Unix(100, 0).UTC(), FinishedAt: time.Unix(101, 5e8).UTC()}
	src := newFakeLog(`{"type":"result"}`, "echo pcsync-init "+rec.String(), rec.String())
	src.endFollow = true
	out := &lockedbuf.Buffer{}
	f, p := newTestFollower(src, out, 0)
	var got []procinit.Record
	f.ended = func(r procinit.Record) { got = append(got, r) }
	rc, _ := src.Open(context.Background(), true)
	if err := f.consume(rc, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]procinit.Record{rec}, got); diff != "" {
		t.Errorf("records handed over (-want +got):\n%s", diff)
	}
	want := []string{`{"type":"result"}`, "echo pcsync-init " + rec.String()}
	if diff := cmp.Diff(want, p.lines); diff != "" {
		t.Errorf("parser lines (-want +got):\n%s", diff)
	}
	if got := out.String(); got != strings.Join(want, "\n")+"\n" {
		t.Errorf("log file = %q", got)
	}
}

// The record of a successful end is the last line there is: the follower
// stops on it, on a stream the kubelet has not ended and with the pod not yet
// done, without reading the log again. A failed end's record does not stop
// it: the kubelet's account of the container decides, and the final read
// after the pod's end still takes what came late.
func TestFollowerStopsAtTheRecordOfASuccess(t *testing.T) {
	for _, tc := range []struct {
		name      string
		exitCode  int
		wantOpens []bool
		wantLines []string
	}{
		{name: "success", exitCode: 0, wantOpens: []bool{true}, wantLines: []string{"a", "b"}},
		{name: "failure", exitCode: 3, wantOpens: []bool{true, false}, wantLines: []string{"a", "b", "late stderr"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := procinit.Record{ExitCode: tc.exitCode, StartedAt: time.Unix(100, 0).UTC(), FinishedAt: time.Unix(101, 0).UTC()}
			src := newFakeLog("a", "b", rec.String())
			out := &lockedbuf.Buffer{}
			f, p := newTestFollower(src, out, 0)
			f.reconnect = time.Hour
			var got []procinit.Record
			f.ended = func(r procinit.Record) { got = append(got, r) }
			podDone, podEnd := context.WithCancel(context.Background())
			defer podEnd()
			errc := make(chan error, 1)
			go func() { errc <- f.run(context.Background(), podDone) }()
			if tc.exitCode != 0 {
				waitFor(t, "the record", func() bool { return len(src.openCount()) == 1 && strings.Count(out.String(), "\n") == 2 })
				src.append("late stderr")
				podEnd()
			}
			select {
			case err := <-errc:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the follower did not stop")
			}
			if diff := cmp.Diff([]procinit.Record{rec}, got); diff != "" {
				t.Errorf("records handed over (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLines, p.lines); diff != "" {
				t.Errorf("parser lines (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOpens, src.openCount()); diff != "" {
				t.Errorf("log requests (follow flags) (-want +got):\n%s", diff)
			}
		})
	}
}
