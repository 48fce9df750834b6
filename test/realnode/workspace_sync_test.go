//go:build integration

package realnode

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/testing/paperclipserver"
	"github.com/pcsync/pcsync/pkg/sandbox"
	"github.com/pcsync/pcsync/pkg/sandbox/hookapi"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// syncEnv is a lease on the real node with the daemon's API on a socket,
// driven by testdata/workspace-sync.mjs through the plugin's own hooks.
type syncEnv struct {
	*leaseEnv
	socket  string
	leaseID string
	node    string // the directory of Node >= 24.11
}

func newSyncEnv(t testing.TB) *syncEnv {
	t.Helper()
	e := newLeaseEnv(t, pushImages(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slug},
		AdapterType: "claude_local", AgentID: pinnedAgentID})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	t.Cleanup(func() { _, _ = e.m.Release(context.Background(), sandbox.ReleaseParams{ID: info.ID, Cancel: true}) })
	dir, err := os.MkdirTemp("", "pcsync-sync-api-") // short: a socket path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "s.sock")
	actx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = hookapi.New(e.m, socket).Serve(actx) }()
	t.Cleanup(func() { stop(); <-served })
	for i := 0; ; i++ {
		if _, err := os.Stat(socket); err == nil {
			break
		} else if i > 100 {
			t.Fatalf("the API's socket: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, err := exec.Command("bash", "../../hack/node/install.sh").Output()
	if err != nil {
		t.Fatalf("hack/node/install.sh: %v", err)
	}
	return &syncEnv{leaseEnv: e, socket: socket, leaseID: info.ID, node: strings.TrimSpace(string(out))}
}

// script runs testdata/workspace-sync.mjs with req (plugin, socket and
// lease added) and returns its JSON lines.
func (s *syncEnv) script(t testing.TB, req map[string]any) []map[string]any {
	t.Helper()
	plugin, _ := filepath.Abs("../../integrations/paperclip-sandbox/src")
	req["plugin"], req["socket"], req["leaseId"] = plugin, s.socket, s.leaseID
	arg, _ := json.Marshal(req)
	cmd := exec.Command(filepath.Join(s.node, "node"), "testdata/workspace-sync.mjs", string(arg))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("workspace-sync.mjs: %v\n%s", err, stderr.String())
	}
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("workspace-sync.mjs: %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

// call is one hook call of the script: its verb and params.
type call struct {
	Verb   string         `json:"verb"`
	Params map[string]any `json:"params"`
}

func syncCall(verb string, ops ...map[string]any) call {
	return call{Verb: verb, Params: map[string]any{"operations": ops}}
}

func op(id string, files []map[string]any, post ...map[string]any) map[string]any {
	o := map[string]any{"operationId": id, "files": files}
	if len(post) > 0 {
		o["postUploadCommands"] = post
	}
	return o
}

// sh runs script in the lease's pod and returns its stdout.
func (s *syncEnv) sh(t testing.TB, script string) string {
	t.Helper()
	r := s.exec(t, s.leaseID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", script}})
	if code(r) != 0 {
		t.Fatalf("%s: exit %d: %s", script, code(r), r.Stderr)
	}
	return r.Stdout
}

// makeWorkspace writes a repository-shaped tree of n files and about size
// bytes under dir: nested directories, mostly small text files, a few
// large ones, some executable, a symlink. The same seed makes the same tree.
func makeWorkspace(t testing.TB, dir string, n, size int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(30, 2026))
	large := n / 40
	smallSize := (size - large*128<<10) / (n - large)
	words := strings.Fields("func return if else for range package import type struct error nil err ctx string int map slice")
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%23), fmt.Sprintf("sub%d", i%7))
		if i%3 == 0 {
			d = filepath.Join(d, fmt.Sprintf("deep%d", i%5))
		}
		want := smallSize/2 + rng.IntN(smallSize)
		if i < large {
			want = 128 << 10
		}
		var b strings.Builder
		for b.Len() < want {
			b.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(9) == 0 {
				b.WriteString("\n")
			} else {
				b.WriteString(" ")
			}
		}
		mode := os.FileMode(0o644)
		if i%50 == 0 {
			mode = 0o755
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("file%04d.go", i)), []byte(b.String()[:want]), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("pkg00/sub0/deep0/file0000.go", filepath.Join(dir, "link.go")); err != nil {
		t.Fatal(err)
	}
}

// tree is every entry under dir: a file's mode and sha256, a link's
// target, a directory's mode.
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			m[rel] = "link " + target
			return err
		case d.IsDir():
			m[rel] = fmt.Sprintf("dir %o", info.Mode().Perm())
		default:
			b, err := os.ReadFile(p)
			sum := sha256.Sum256(b)
			m[rel] = fmt.Sprintf("file %o %s", info.Mode().Perm(), hex.EncodeToString(sum[:8]))
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Paperclip's native workspace sync through the plugin's hooks, the daemon
// and the lease's stream on a real kubelet: a file lands with its mode, a
// tree without its excludes and with its symlinks as links (or their bytes
// with followSymlinks), post-upload commands run in order in a confined
// cwd; a 10 MB, 2,000-file tree goes in and comes back byte for byte; host
// targets get their mode and nothing is left behind by a failure; a
// failing post-upload command stops its operation and the rest.
func TestWorkspaceSyncOnRealNode(t *testing.T) {
	s := newSyncEnv(t)
	host := t.TempDir()
	src := filepath.Join(host, "src")
	for name, text := range map[string]string{"keep.txt": "kept\n", "drop.log": "dropped\n", "skip/inner.txt": "skipped\n", "sub/a.txt": "a\n", "._meta": "apple\n"} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("sub/a.txt", filepath.Join(src, "alias")); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(host, "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(host, "big")
	makeWorkspace(t, big, 2000, 10<<20)

	res := s.script(t, map[string]any{"calls": []call{
		syncCall("syncIn",
			op("op-1", []map[string]any{
				{"sourcePath": secret, "targetPath": "/workspace/sub/secret.txt", "kind": "file", "mode": 0o600},
				{"sourcePath": src, "targetPath": "/workspace/tree", "kind": "directory", "exclude": []string{"*.log", "skip"}},
			}, map[string]any{"command": "cat keep.txt > /workspace/post1 && pwd >> /workspace/post1", "cwd": "/workspace/tree"},
				map[string]any{"command": "cat /workspace/post1 > /workspace/post2"}),
			op("op-2", []map[string]any{{"sourcePath": big, "targetPath": "/workspace/big", "kind": "directory"}})),
		syncCall("syncOut",
			op("out-1", []map[string]any{
				{"sourcePath": "/workspace/big", "targetPath": filepath.Join(host, "back"), "kind": "directory"},
				{"sourcePath": "/workspace/sub/secret.txt", "targetPath": filepath.Join(host, "out", "secret.txt"), "kind": "file", "mode": 0o600},
				{"sourcePath": "/workspace/tree", "targetPath": filepath.Join(host, "deref"), "kind": "directory", "followSymlinks": true, "mode": 0o700, "exclude": []string{"sub"}},
			})),
		// A failing post-upload command stops its operation and the rest.
		syncCall("syncIn",
			op("op-ok", []map[string]any{{"sourcePath": secret, "targetPath": "/workspace/f/ok", "kind": "file"}}),
			op("op-fail", []map[string]any{{"sourcePath": secret, "targetPath": "/workspace/f/fail", "kind": "file"}},
				map[string]any{"command": "echo broken >&2; exit 7"}, map[string]any{"command": "touch /workspace/f/after"}),
			op("op-never", []map[string]any{{"sourcePath": secret, "targetPath": "/workspace/f/never", "kind": "file"}})),
		// A cwd outside the operation's targets is refused before any byte moves.
		syncCall("syncIn", op("op-escape", []map[string]any{{"sourcePath": secret, "targetPath": "/workspace/e/x", "kind": "file"}},
			map[string]any{"command": "true", "cwd": "/etc"})),
		// A missing source names the operation and the path; nothing lands.
		syncCall("syncOut", op("out-missing", []map[string]any{{"sourcePath": "/workspace/nope", "targetPath": filepath.Join(host, "missing", "nope"), "kind": "file", "mode": 0o600}})),
	}})
	if len(res) != 5 {
		t.Fatalf("%d answers, want 5: %v", len(res), res)
	}
	for i, want := range []string{"", "", "op-fail: post-upload command 1 (cwd /) exited 7: broken", "op-escape: post-upload command 1: cwd \"/etc\" is not confined", "out-missing: /workspace/nope →"} {
		got, _ := res[i]["error"].(string)
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("call %d: error %q, want one with %q", i+1, got, want)
		}
	}
	var gotIn []string
	ops, _ := res[0]["result"].(map[string]any)["operations"].([]any)
	for _, o := range ops {
		o := o.(map[string]any)
		gotIn = append(gotIn, fmt.Sprintf("%v %v files", o["operationId"], o["filesTransferred"]))
		if b, _ := o["bytesTransferred"].(float64); o["operationId"] == "op-2" && b < 10<<20 {
			t.Errorf("op-2 moved %v bytes, want the 10 MB tree's tar", b)
		}
	}
	if diff := cmp.Diff([]string{"op-1 2 files", "op-2 1 files"}, gotIn); diff != "" {
		t.Errorf("syncIn accounting (-want +got):\n%s", diff)
	}

	// In the pod.
	got := s.sh(t, `cd /workspace && stat -c '%a %s' sub/secret.txt && find tree | sort && readlink tree/alias && cat post2 && ls f && ls -a e 2>&1 | head -1; find /workspace /tmp -name '*.pcsync-sync*'`)
	want := "600 7\ntree\ntree/alias\ntree/keep.txt\ntree/sub\ntree/sub/a.txt\nsub/a.txt\nkept\n/workspace/tree\nfail\nok\nls: cannot access 'e': No such file or directory\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the pod's workspace (-want +got):\n%s", diff)
	}

	// Back on the host.
	if diff := cmp.Diff(tree(t, big), tree(t, filepath.Join(host, "back"))); diff != "" {
		t.Errorf("the 10 MB tree after a round trip (-in +back):\n%s", diff)
	}
	if fi, err := os.Stat(filepath.Join(host, "out", "secret.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("host file: %v %v, want mode 600", fi, err)
	}
	wantDeref := map[string]string{"alias": tree(t, src)["sub/a.txt"], "keep.txt": tree(t, src)["keep.txt"]}
	if diff := cmp.Diff(wantDeref, tree(t, filepath.Join(host, "deref"))); diff != "" {
		t.Errorf("syncOut with followSymlinks and exclude (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(filepath.Join(host, "deref")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("host tree: %v %v, want mode 700", fi, err)
	}
	for _, dir := range []string{host, filepath.Join(host, "out"), filepath.Join(host, "missing")} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.Contains(e.Name(), "pcsync") {
				t.Errorf("%s: a temporary %s was left behind", dir, e.Name())
			}
		}
	}
	if _, err := os.Stat(filepath.Join(host, "missing", "nope")); err == nil {
		t.Errorf("a failed syncOut left its target on the host")
	}
}

// BenchmarkWorkspaceSync: a repository-shaped workspace of 10 MB in 2,000
// files staged into a lease pod on the real node and read back, as
// Paperclip's own adapter-utils does it (prepareCommandManagedRuntime,
// restoreWorkspace), through the plugin's native syncIn/syncOut against
// adapter-utils' base64 fallback through execute (4 MB chunks), the two
// interleaved, samples each.
func BenchmarkWorkspaceSync(b *testing.B) {
	s := newSyncEnv(b)
	ws := filepath.Join(b.TempDir(), "workspace")
	makeWorkspace(b, ws, 2000, 10<<20)
	utils := filepath.Join(paperclipserver.DefaultInstall(), "node_modules", "@paperclipai", "adapter-utils")
	run := func(mode string) map[string]any {
		lines := s.script(b, map[string]any{"bench": map[string]any{"adapterUtils": utils, "workspace": ws,
			"remoteCwd": leasepod.PodWorkspace, "mode": mode, "samples": 1}})
		if len(lines) != 1 {
			b.Fatalf("%s: %v", mode, lines)
		}
		return lines[0]
	}
	ms := func(v any) time.Duration { return time.Duration(v.(float64) * float64(time.Millisecond)) }
	for range b.N {
		// Per figure: native's samples, then the fallback's.
		figures := map[string]*[2][]time.Duration{}
		keys := []string{"inMs", "outMs", "transferInMs", "transferOutMs"}
		for _, k := range keys {
			figures[k] = &[2][]time.Duration{}
		}
		var native, fallback map[string]any
		for range samples {
			fallback, native = run("fallback"), run("native")
			for _, k := range keys {
				figures[k][0] = append(figures[k][0], ms(native[k]))
				figures[k][1] = append(figures[k][1], ms(fallback[k]))
			}
		}
		const what = ", 10 MB / 2,000 files: native vs base64 fallback"
		report(b, "in", "workspace sync in (host → pod; Paperclip's whole staging)"+what, figures["inMs"][0], figures["inMs"][1])
		report(b, "out", "workspace sync out (pod → host; Paperclip's whole restore)"+what, figures["outMs"][0], figures["outMs"][1])
		report(b, "in-transfer", "the same in, time inside execute and the sync hooks only"+what, figures["transferInMs"][0], figures["transferInMs"][1])
		report(b, "out-transfer", "the same out, time inside execute and the sync hooks only"+what, figures["transferOutMs"][0], figures["transferOutMs"][1])
		b.Run("executes", func(b *testing.B) {
			b.ReportMetric(native["executesIn"].(float64)+native["executesOut"].(float64)+native["syncCalls"].(float64), "native-calls")
			b.ReportMetric(fallback["executesIn"].(float64)+fallback["executesOut"].(float64), "fallback-calls")
			b.Logf("plugin calls in/out: native %v/%v executes + %v sync hook calls, fallback %v/%v executes",
				native["executesIn"], native["executesOut"], native["syncCalls"], fallback["executesIn"], fallback["executesOut"])
		})
	}
}
