//go:build integration

package realnode

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testimages"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/sandbox"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

var (
	codexOnce sync.Once
	codexErr  error
)

// pushCodexImage builds pcsync's Codex image as make images does (cached
// by internal/imagebuild) and pushes it beside the real Claude Code image
// (pushed.RealRegistry), once per test binary: only this file's tests
// need it.
func pushCodexImage(t testing.TB, p pushed) {
	t.Helper()
	codexOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		built, err := testimages.Build(ctx, []string{images.Agent("codex")}, imageTag)
		if err != nil {
			codexErr = err
			return
		}
		codexErr = testimages.Push(ctx, testcluster.Get(t).RealNode().Registry(), p.RealRegistry, imageTag, built)
	})
	if codexErr != nil {
		t.Fatal(codexErr)
	}
}

// acpAnswer is what an ACP initialize result says of its server.
type acpAnswer struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id"`
	Result  struct {
		ProtocolVersion int `json:"protocolVersion"`
		AgentInfo       struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"agentInfo"`
	} `json:"result"`
}

// checkACPAnswer fails the test unless r exited 0 and its stdout's first
// line answers the initialize request (id 1, protocol 1) as acp's release.
func checkACPAnswer(t *testing.T, what string, r sandbox.ExecResult, acp images.NPMPackage) {
	t.Helper()
	line, _, _ := strings.Cut(r.Stdout, "\n")
	var got acpAnswer
	if err := json.Unmarshal([]byte(line), &got); err != nil || code(r) != 0 {
		t.Fatalf("%s: exit %d, first line %q (%v); stderr:\n%s", what, code(r), line, err, r.Stderr)
	}
	want := acpAnswer{JSONRPC: "2.0", ID: 1}
	want.Result.ProtocolVersion = 1
	want.Result.AgentInfo.Name, want.Result.AgentInfo.Version = acp.Name, acp.Version
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: initialize answer (-want +got):\n%s\nline: %s", what, diff, line)
	}
}

// Paperclip's default engine for claude_local and codex_local is ACP: in a
// sandbox it runs the bare command claude-agent-acp or codex-acp. In a lease
// pod of pcsync's real claude and codex images, as make images builds them
// (the image's user, a read-only root, HOME on the lease's own volume, no
// key), each server answers the ACP initialize request with its own name
// and the catalog's release. Claude's answers the request and stdin's EOF
// as Paperclip's brief puts it; codex-acp quits at EOF before it answers
// (it starts its bundled Codex app-server first), so both are also sent it
// by images.Spec.ACPProbe, which keeps stdin open as an ACP client does.
// Without the servers in the images (or off the image's PATH) the commands
// are not found and the test fails.
func TestACPServersInRealImages(t *testing.T) {
	p := pushImages(t)
	pushCodexImage(t, p)
	e := newLeaseEnv(t, pushed{Registry: p.RealRegistry})
	for _, typ := range []adapters.Type{adapters.ClaudeLocal, adapters.CodexLocal} {
		t.Run(string(typ), func(t *testing.T) {
			s, err := images.Lookup(images.AgentImage(typ))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			info, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slug},
				AdapterType: string(typ), RunID: "run-acp-" + string(typ), AgentID: pinnedAgentID})
			if err != nil {
				t.Fatalf("acquire: %v", err)
			}
			defer func() {
				if _, err := e.m.Release(context.Background(), sandbox.ReleaseParams{ID: info.ID, Cancel: true}); err != nil {
					t.Errorf("release: %v", err)
				}
			}()
			pod, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := images.Ref(p.RealRegistry, s.Name, imageTag); pod.Spec.Containers[0].Image != want || pod.Spec.NodeName != e.c.RealNode().Name() {
				t.Fatalf("lease pod of image %s on %s; want %s on the real node", pod.Spec.Containers[0].Image, pod.Spec.NodeName, want)
			}

			r := e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c",
				`id -u; echo "$HOME"; command -v ` + s.ACP.Binary + `; if touch /.w 2>/dev/null; then echo / rw; else echo / ro; fi`}})
			if want := "1000\n" + leasepod.PodHome + "\n/usr/local/bin/" + s.ACP.Binary + "\n/ ro\n"; r.Stdout != want {
				t.Errorf("user, HOME, %s, root:\n%s\nwant:\n%s(stderr %q)", s.ACP.Binary, r.Stdout, want, r.Stderr)
			}

			probe := s.ACPProbe()
			checkACPAnswer(t, "ACPProbe", e.exec(t, info.ID, sandbox.ExecParams{Command: probe[0], Args: probe[1:]}), s.ACP)
			if typ == adapters.ClaudeLocal {
				stdin := images.ACPInitializeRequest + "\n"
				checkACPAnswer(t, s.ACP.Binary+" <request", e.exec(t, info.ID, sandbox.ExecParams{Command: s.ACP.Binary, Stdin: &stdin}), s.ACP)
			}
		})
	}
}
