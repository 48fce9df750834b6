package cmdclient_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// endless is a stdin that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'y'
	}
	return len(p), nil
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("the reader left") }

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n > 0 {
		r.n--
		return copy(p, "z"), nil
	}
	return 0, errors.New("the body broke")
}

// TestStreams: stdin is read as it is sent and output written as it comes;
// the client stops reading a stdin whose command ended, and a reader or
// writer that fails fails its command (which is killed) but not the
// stream.
func TestStreams(t *testing.T) {
	s := startServer(t, nil)
	c, _ := clientFor(t, s)

	// 64 MiB through a pipe: the client holds a frame of it at a time.
	r, w := io.Pipe()
	go func() {
		chunk := bytes.Repeat([]byte("s"), 1<<20)
		for range 64 {
			w.Write(chunk)
		}
		w.Close()
	}()
	got, err := execOut(execCtx(t), c, cmdclient.Command{Argv: []string{"wc", "-c"}, Stdin: r}, nil)
	if err != nil || strings.TrimSpace(string(got.Stdout)) != "67108864" {
		t.Errorf("wc -c of 64 MiB of stdin: %q, %v", got.Stdout, err)
	}

	got, err = execOut(execCtx(t), c, cmdclient.Command{Argv: []string{"head", "-c", "3"}, Stdin: endless{}}, nil)
	if err != nil || string(got.Stdout) != "yyy" || got.Code != 0 {
		t.Errorf("head -c 3 of an endless stdin: %+v, %v", resultOf(got), err)
	}

	_, err = c.Exec(execCtx(t), cmdclient.Command{Argv: []string{"sh", "-c", "echo out; exec sleep 300"}, Stdout: failingWriter{}})
	if err == nil || !strings.Contains(err.Error(), "write stdout: the reader left") {
		t.Errorf("a failing Stdout: %v, want its error", err)
	}

	_, err = c.Exec(execCtx(t), cmdclient.Command{Argv: []string{"sh", "-c", "cat >/dev/null; sleep 300"}, Stdin: &failingReader{n: 2}})
	if err == nil || !strings.Contains(err.Error(), "read stdin: the body broke") {
		t.Errorf("a failing Stdin: %v, want its error", err)
	}

	got, err = execOut(execCtx(t), c, cmdclient.Command{Argv: []string{"echo", "still"}}, nil)
	if err != nil || string(got.Stdout) != "still\n" {
		t.Errorf("the stream after: %q, %v", got.Stdout, err)
	}
	if got := c.Stats(); got != (cmdclient.Stats{Opens: 1}) {
		t.Errorf("Stats = %+v, want one open and nothing running", got)
	}
}
