//go:build integration

package sandbox

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/pcsync/pcsync/pkg/config"
)

// BenchmarkStreams measures what the daemon holds while bytes cross a
// lease's command stream, on the project's control plane (kwok runs the
// lease's exec as a local process, --sandbox-host-root mode; the test
// process is the daemon, and its API client only streams):
//
//   - sync-1GiB: one put of a 1 GiB tree (a tar of 16 files of 64 MiB) into
//     a lease through /v1/sync/put: the daemon's peak RSS over its RSS
//     before, and the whole time;
//   - execute-100MB: one execute of a command printing 100 MB through the
//     execute hook, its NDJSON answer read and dropped as it comes: the
//     whole time and the daemon's peak RSS over its RSS before.
//
// Run one at a time (each in its own process, so that one's heap is not
// the other's baseline):
//
//	go test -tags integration -run '^$' -bench 'BenchmarkStreams/sync' -benchtime 1x ./pkg/sandbox
//	go test -tags integration -run '^$' -bench 'BenchmarkStreams/execute' -benchtime 3x ./pkg/sandbox
func BenchmarkStreams(b *testing.B) {
	s := newStreamBench(b)
	b.Run("sync-1GiB", func(b *testing.B) {
		// 16 files of 64 MiB less 1 KiB: with the tar's headers, just under
		// MaxSyncBytes (1 GiB).
		const files, size = 16, 64<<20 - 1024
		var peak float64
		var took time.Duration
		for range b.N {
			begin := time.Now()
			d := s.peakRSS(b, func() error { return s.put(tarOf(files, size)) })
			took += time.Since(begin)
			peak = max(peak, d)
		}
		b.ReportMetric(peak, "rss-delta-MiB")
		b.ReportMetric(ms(took)/float64(b.N), "whole-ms")
		fmt.Fprintf(os.Stderr, "BenchmarkStreams/sync-1GiB: %d files, %.2f MiB: whole %.0f ms, daemon RSS +%.1f MiB\n", files, float64(files*size)/(1<<20), ms(took)/float64(b.N), peak)
	})
	b.Run("execute-100MB", func(b *testing.B) {
		const n = 100_000_000
		var peak float64
		var took time.Duration
		for range b.N {
			begin := time.Now()
			d := s.peakRSS(b, func() error { return s.executePrinting(n) })
			took += time.Since(begin)
			peak = max(peak, d)
		}
		b.ReportMetric(peak, "rss-delta-MiB")
		b.ReportMetric(ms(took)/float64(b.N), "whole-ms")
		fmt.Fprintf(os.Stderr, "BenchmarkStreams/execute-100MB: whole %.0f ms, daemon RSS +%.1f MiB\n", ms(took)/float64(b.N), peak)
	})
}

// streamBench is a daemon (its Manager and API on a Unix socket) with one
// lease.
type streamBench struct {
	api       *apiClient
	envCfg    map[string]any
	lease     map[string]any
	workspace string
}

func newStreamBench(b *testing.B) *streamBench {
	e := newEnv(b, envOptions{NoPools: true})
	o := e.m.opts
	e.m.Close()
	o.Logger = quietLogger()
	m, err := New(context.Background(), e.c.RESTConfig(), func() *config.Model { return e.model }, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	sock := filepath.Join(e.hostDir, "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go func() { _ = ServeAPI(ctx, m, sock) }()
	waitSocket(b, sock)
	s := &streamBench{api: newAPIClient(sock), envCfg: map[string]any{"provider": "pcsync", "company": e.slug()}}
	var lease map[string]any
	if err := s.api.call("acquireLease", map[string]any{"config": s.envCfg, "runId": "bench", "adapterType": "claude_local"}, &lease); err != nil {
		b.Fatal(err)
	}
	s.lease = map[string]any{"providerLeaseId": lease["providerLeaseId"]}
	var ws struct{ Cwd string }
	if err := s.api.call("realizeWorkspace", map[string]any{"config": s.envCfg, "lease": s.lease}, &ws); err != nil {
		b.Fatal(err)
	}
	s.workspace = ws.Cwd
	b.Cleanup(func() {
		var receipt map[string]any
		_ = s.api.call("releaseLease", map[string]any{"providerLeaseId": s.lease["providerLeaseId"], "config": s.envCfg}, &receipt)
	})
	return s
}

// peakRSS runs op and returns the process's peak RSS while it ran over
// its RSS before (MiB), sampled every 5 ms.
func (s *streamBench) peakRSS(b *testing.B, op func() error) float64 {
	b.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	base := rssMiB(b)
	peak := base
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				peak = max(peak, rssMiB(b))
			}
		}
	}()
	err := op()
	close(stop)
	wg.Wait()
	peak = max(peak, rssMiB(b))
	if err != nil {
		b.Fatal(err)
	}
	return peak - base
}

// put sends tree (a tar stream) to the lease's workspace/tree.
func (s *streamBench) put(tree io.Reader) error {
	head, _ := json.Marshal(map[string]any{"lease": s.lease,
		"targetPath": s.workspace + "/tree", "kind": SyncDirectory, "timeoutMs": (10 * time.Minute).Milliseconds()})
	body := io.MultiReader(bytes.NewReader(append(head, '\n')), tree)
	resp, err := s.api.hc.Post("http://pcsync/v1/sync/put", "application/octet-stream", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sync put: %s: %s", resp.Status, answer)
	}
	return nil
}

// executePrinting runs a command that prints n bytes (lines of 64) and
// reads the answer as it comes, keeping only each line's first bytes.
func (s *streamBench) executePrinting(n int) error {
	resp, err := s.api.post("execute", map[string]any{"config": s.envCfg, "lease": s.lease, "command": "sh",
		"args": []string{"-c", fmt.Sprintf("yes %s | head -c %d", bytes.Repeat([]byte("x"), 63), n)}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var last []byte
	for {
		line, err := r.ReadSlice('\n')
		if len(last) == 0 || len(line) > 0 {
			last = append(last[:0], line[:min(len(line), 64)]...)
		}
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = r.ReadSlice('\n')
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if !bytes.HasPrefix(last, []byte(`{"result":{"exitCode":0`)) {
		return fmt.Errorf("execute: last line %q", last)
	}
	return nil
}

// tarOf streams a tar of files regular files of size bytes each.
func tarOf(files, size int) io.Reader {
	r, w := io.Pipe()
	go func() {
		tw := tar.NewWriter(w)
		chunk := bytes.Repeat([]byte("pcsync-"), (1<<20)/7+1)[:1<<20]
		for i := range files {
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%02d", i), Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}); err != nil {
				w.CloseWithError(err)
				return
			}
			for left := size; left > 0; left -= len(chunk) {
				if _, err := tw.Write(chunk[:min(left, len(chunk))]); err != nil {
					w.CloseWithError(err)
					return
				}
			}
		}
		w.CloseWithError(tw.Close())
	}()
	return r
}
