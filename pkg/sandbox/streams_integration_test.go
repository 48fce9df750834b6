//go:build integration

package sandbox

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// streamsEnv is a lease of a kwok node (its workspace on this host) and
// the daemon's API on a Unix socket.
type streamsEnv struct {
	api       *apiClient
	lease     map[string]any
	workspace string
}

func newStreamsEnv(t *testing.T) *streamsEnv {
	e := newEnv(t, envOptions{NoPools: true})
	info := e.acquire(t, EnvironmentConfig{})
	sock := filepath.Join(e.hostDir, "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = ServeAPI(ctx, e.m, sock) }()
	waitSocket(t, sock)
	ws, err := e.m.Workspace(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	return &streamsEnv{api: newAPIClient(sock), lease: map[string]any{"providerLeaseId": info.ID}, workspace: ws}
}

// put posts a put of data to target; it returns the answer's status and
// body.
func (s *streamsEnv) put(t *testing.T, target string, kind SyncKind, mode *uint32, data []byte) (int, []byte) {
	t.Helper()
	head, _ := json.Marshal(map[string]any{"lease": s.lease, "targetPath": target, "kind": kind, "mode": mode})
	resp, err := s.api.hc.Post("http://pcsync/v1/sync/put", "application/octet-stream", io.MultiReader(bytes.NewReader(append(head, '\n')), bytes.NewReader(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// get posts a get of source; it returns the answer's status and body, and
// the error reading the body (a cut answer).
func (s *streamsEnv) get(t *testing.T, source string, kind SyncKind, follow bool) (int, []byte, error) {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"lease": s.lease, "sourcePath": source, "kind": kind, "followSymlinks": follow})
	resp, err := s.api.hc.Post("http://pcsync/v1/sync/get", "application/json", bytes.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// TestSyncStreams moves files and trees through the API into and out of a
// lease: the bytes arrive whole; a get that fails before any byte is
// refused with the command's stderr, and one that fails after its first
// bytes is cut off (never whole).
func TestSyncStreams(t *testing.T) {
	s := newStreamsEnv(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB: several frames
	mode := uint32(0o640)
	target := s.workspace + "/in/data.bin"
	if status, body := s.put(t, target, SyncFile, &mode, data); status != http.StatusOK || !strings.Contains(string(body), `"bytes":4800000`) {
		t.Fatalf("put file: %d %s", status, body)
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the put file: %v, %v; want mode 0640", fi, err)
	}
	// A put whose command fails at once, its body still coming: the
	// refusal, not a reset.
	big := bytes.Repeat([]byte("x"), 20<<20)
	if status, body := s.put(t, target+"/under-a-file", SyncFile, nil, big); status != http.StatusUnprocessableEntity || !strings.Contains(string(body), string(CodeSyncFailed)) {
		t.Errorf("put under a file: %d %s; want a sync_failed refusal", status, body)
	}
	status, got, err := s.get(t, target, SyncFile, false)
	if status != http.StatusOK || err != nil || !bytes.Equal(got, data) {
		t.Errorf("get file: %d, %d bytes, %v; want the %d bytes put", status, len(got), err, len(data))
	}

	tree := tarFiles(t, map[string]string{"a.txt": "alpha", "sub/b.txt": strings.Repeat("b", 200_000)})
	if status, body := s.put(t, s.workspace+"/tree", SyncDirectory, nil, tree); status != http.StatusOK {
		t.Fatalf("put tree: %d %s", status, body)
	}
	status, got, err = s.get(t, s.workspace+"/tree", SyncDirectory, false)
	if status != http.StatusOK || err != nil {
		t.Fatalf("get tree: %d, %v", status, err)
	}
	want := map[string]int64{"a.txt": 5, "sub/": 0, "sub/b.txt": 200_000}
	if diff := cmp.Diff(want, tarSizes(t, got)); diff != "" {
		t.Errorf("get tree (-want +got):\n%s", diff)
	}

	status, got, _ = s.get(t, s.workspace+"/missing", SyncFile, false)
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(got), "No such file") || !strings.Contains(string(got), string(CodeSyncFailed)) {
		t.Errorf("get of a missing file: %d %s; want a sync_failed refusal naming it", status, got)
	}

	// A tree whose last entry is a dangling symlink, followed: tar sends
	// the first entries, then fails.
	if err := os.Symlink("/nonexistent", filepath.Join(s.workspace, "tree", "zz")); err != nil {
		t.Fatal(err)
	}
	status, got, err = s.get(t, s.workspace+"/tree", SyncDirectory, true)
	if status != http.StatusOK || err == nil {
		t.Errorf("get of a tree that fails midway: %d, %d bytes, %v; want 200 and a cut answer", status, len(got), err)
	}
}

// TestExecuteStreams: the execute hook's answer is the output in chunk
// lines, then the exit without the output.
func TestExecuteStreams(t *testing.T) {
	s := newStreamsEnv(t)
	stdin := strings.Repeat("é", 1_000_000) // 2 MB of 2-byte characters
	resp, err := s.api.post("execute", map[string]any{"lease": s.lease, "command": "sh",
		"args": []string{"-c", "cat; echo done >&2; exit 3"}, "stdin": stdin})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stdout, stderr strings.Builder
	var last map[string]json.RawMessage
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct{ Stdout, Stderr string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Bytes(), err)
		}
		stdout.WriteString(l.Stdout)
		stderr.WriteString(l.Stderr)
		last = nil
		_ = json.Unmarshal(sc.Bytes(), &last)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if stdout.String() != stdin || stderr.String() != "done\n" {
		t.Errorf("chunks: stdout %d bytes (equal to stdin: %v), stderr %q", stdout.Len(), stdout.String() == stdin, stderr.String())
	}
	if diff := cmp.Diff(`{"exitCode":3,"signal":null,"timedOut":false}`, string(last["result"])); diff != "" {
		t.Errorf("result line (-want +got):\n%s", diff)
	}
}

func tarFiles(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, name := range []string{"a.txt", "sub/", "sub/b.txt"} {
		if name == "sub/" {
			_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeDir})
			continue
		}
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(files[name]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func tarSizes(t *testing.T, data []byte) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		got[h.Name] = h.Size
	}
}
