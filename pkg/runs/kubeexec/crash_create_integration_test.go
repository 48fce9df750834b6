//go:build integration

package kubeexec

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/result"
)

// TestDaemonKilledDuringJobCreate: the daemon (the real binary) is
// SIGKILLed while its Job create is on the way to the API server (a proxy
// holds the request), after it recorded the run. The create either never
// arrives (the kill cut the connection first) or arrives late: while the
// next daemon runs the run, or after it finished the run and released it
// (as a proxy that buffers whole requests may deliver it). Either way the
// agent runs once: the run succeeds, with one Job stored (one create
// answered 201, a late one answered AlreadyExists) and one pod. This is the
// deterministic form of what TestSIGKILLedDaemonRuns500ExactlyOnce finds by
// chance.
func TestDaemonKilledDuringJobCreate(t *testing.T) {
	t.Parallel()
	bin := buildPcsync(t)
	for _, tc := range []struct {
		name string
		// late: the held create reaches the API server once the next
		// daemon has stored the run's Job, while it runs; afterEnd: once
		// the next daemon has written the run's result and released it
		// (deleted its Secret; before, it deleted the Job, and the late
		// create stored it again).
		late, afterEnd bool
	}{
		{"the create never arrives", false, false},
		{"the create arrives after the next daemon started", true, false},
		{"the create arrives after the next daemon finished the run", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The Job runs 3 s: the window in which the late create must
			// arrive to meet the next daemon's Job (see late).
			e := newEnv(t, benchOptions(1, testcluster.SucceedAfter(3*time.Second), transcript(t, claudeTranscript)))
			p := newHoldProxy(t, e)
			e.drop("held-1", nil)
			job := e.jobName("held-1")
			logPath := filepath.Join(t.TempDir(), "daemon.log")
			logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer logf.Close()
			k := &killLoop{t: t, e: e, bin: bin, logPath: logPath, kubeconfig: p.kubeconfig}
			first, _, exited := k.start(logf)
			var held *heldCreate
			select {
			case held = <-p.held:
			case err := <-exited:
				k.dumpLog()
				t.Fatalf("the first daemon exited (%v) before it created the Job", err)
			}
			if err := first.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-exited
			if !tc.late {
				held.forward <- false
			}

			k.kubeconfig = ""
			second, _, exited := k.start(logf)
			lateCode := 0
			if tc.afterEnd {
				e.waitUntil("the next daemon to finish the run and release it (its result written, its Secret gone)", func() bool {
					if _, err := os.Stat(filepath.Join(e.spool, "held-1"+result.Suffix)); err != nil {
						return false
					}
					_, err := e.cs.CoreV1().Secrets(e.ns).Get(context.Background(), job, metav1.GetOptions{})
					return apierrors.IsNotFound(err)
				})
				held.forward <- true
				lateCode = <-held.answered
			} else if tc.late {
				// Only the next daemon can have stored the Job (the first
				// one's create is held): a get, not a scan of the audit log,
				// which under load took longer than the Job lived.
				e.waitUntil("the next daemon to handle the run (its Job stored, or its result written)", func() bool {
					if !e.jobGone(job) {
						return true
					}
					_, err := os.Stat(filepath.Join(e.spool, "held-1"+result.Suffix))
					return err == nil
				})
				held.forward <- true
				lateCode = <-held.answered
			}
			e.waitUntil("the run's result", func() bool {
				_, err := os.Stat(filepath.Join(e.spool, "held-1"+result.Suffix))
				return err == nil
			})
			_ = second.Process.Signal(syscall.SIGTERM)
			<-exited
			res := e.result("held-1")
			if res.Status != result.StatusSucceeded {
				t.Errorf("result: %s %s %q; want succeeded", res.Status, deref(res.ErrorCode), deref(res.ErrorMessage))
			}
			type creates struct{ Stored, AlreadyExists, Other int }
			var got creates
			evs, err := e.c.AuditEvents(func(a testcluster.AuditEvent) bool {
				return a.Verb == "create" && a.ObjectRef != nil && a.ObjectRef.Resource == "jobs" && a.ObjectRef.Subresource == "" &&
					a.ObjectRef.Namespace == e.ns && a.ObjectRef.Name == job
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range evs {
				code := 0
				if a.ResponseStatus != nil {
					code = a.ResponseStatus.Code
				}
				switch code {
				case http.StatusCreated:
					got.Stored++
				case http.StatusConflict:
					got.AlreadyExists++
				default:
					got.Other++
				}
			}
			want := creates{Stored: 1}
			if tc.late {
				want.AlreadyExists = 1
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("creates of Job %s in the audit log (-want +got):\n%s", job, diff)
			}
			if tc.late && lateCode != http.StatusConflict {
				t.Errorf("the late create was answered %d, want %d (AlreadyExists): it stored the run's Job after the next daemon had handled the run", lateCode, http.StatusConflict)
			}
			if tc.afterEnd && lateCode == http.StatusCreated {
				// The Job controller makes the stored Job's pod: the agent
				// runs a second time.
				e.waitUntil("the late Job's pod", func() bool { return e.auditCount("create", "pods", "") > 1 })
			}
			if n := e.auditCount("create", "pods", ""); n != 1 {
				t.Errorf("%d pods created, want 1", n)
			}
			if t.Failed() {
				k.dumpLog()
			}
		})
	}
}

// holdProxy is a TLS proxy in front of the test cluster's API server (with
// the cluster's credentials) that holds the first Job create it sees.
type holdProxy struct {
	// kubeconfig points at the proxy.
	kubeconfig string
	held       chan *heldCreate
}

// heldCreate is a Job create the proxy holds: send true on forward to pass
// it on (answered then receives the API server's status code), false to
// drop it.
type heldCreate struct {
	forward  chan bool
	answered chan int
}

func newHoldProxy(t *testing.T, e *env) *holdProxy {
	t.Helper()
	cfg := e.c.RESTConfig()
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{held: make(chan *heldCreate, 1)}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(upstream) },
		Transport:     rt,
		FlushInterval: -1,
	}
	done := make(chan struct{})
	holding := make(chan struct{}, 1)
	holding <- struct{}{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/namespaces/"+e.ns+"/jobs") {
			rp.ServeHTTP(w, r)
			return
		}
		select {
		case <-holding:
		default:
			rp.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("hold proxy: %v", err)
			return
		}
		h := &heldCreate{forward: make(chan bool, 1), answered: make(chan int, 1)}
		p.held <- h
		select {
		case fwd := <-h.forward:
			if !fwd {
				return
			}
		case <-done:
			return
		}
		// The client is gone: the create goes on without it.
		out, err := http.NewRequestWithContext(context.Background(), r.Method, upstream.JoinPath(r.URL.Path).String()+"?"+r.URL.RawQuery, bytes.NewReader(body))
		if err != nil {
			t.Errorf("hold proxy: %v", err)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := (&http.Client{Transport: rt}).Do(out)
		if err != nil {
			t.Errorf("hold proxy: the late create: %v", err)
			h.answered <- 0
			return
		}
		resp.Body.Close()
		h.answered <- resp.StatusCode
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // first: a held create never blocks Close
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: proxy
  user: {}
contexts:
- name: proxy
  context: {cluster: proxy, user: proxy}
current-context: proxy
`, srv.URL)
	if err := os.WriteFile(p.kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
