package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/daemon/manager"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// runDeadline bounds how long a daemon the tests stop, or that fails, may
// take to return: far more than it needs.
const runDeadline = time.Minute

// events records what the test's controllers did, in order.
type events struct {
	mu   sync.Mutex
	list []string
	// up receives each controller's name once it has started.
	up chan string
}

func newEvents() *events { return &events{up: make(chan string, 16)} }

func (e *events) add(s string) {
	e.mu.Lock()
	e.list = append(e.list, s)
	e.mu.Unlock()
}

func (e *events) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.list...)
}

// controller records its start and its stop; fail, when it receives,
// fails it.
func (e *events) controller(name string, leading bool, fail <-chan error) manager.Controller {
	return manager.Controller{Name: name, Leading: leading, Run: func(ctx context.Context, started func()) error {
		e.add(name + " up")
		started()
		e.up <- name
		select {
		case <-ctx.Done():
			e.add(name + " down")
			return nil
		case err := <-fail:
			return err
		}
	}}
}

// waitUp waits until the controllers of names have started.
func (e *events) waitUp(t *testing.T, names ...string) {
	t.Helper()
	for range names {
		select {
		case <-e.up:
		case <-time.After(runDeadline):
			t.Fatalf("the controllers %v did not all start; events %v", names, e.get())
		}
	}
}

// testOptions are a daemon's options on examples/demo that apply nothing.
func testOptions(cs ...manager.Controller) Options {
	o := DefaultOptions("../../examples/demo")
	o.Logger = slog.New(slog.DiscardHandler)
	o.Controllers = cs
	return o
}

// start runs the daemon of o; wait returns its result, failing the test
// when it has not returned within runDeadline.
func start(t *testing.T, ctx context.Context, o Options) (wait func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	return func() error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(runDeadline):
			t.Fatalf("the daemon did not return within %s", runDeadline)
			return nil
		}
	}
}

// TestDaemonStartsAndJoinsItsControllers: the controllers every replica
// runs start in their order before the leading ones; at the stop, each is
// stopped and has returned, in the reverse order, before Run returns.
func TestDaemonStartsAndJoinsItsControllers(t *testing.T) {
	ev := newEvents()
	o := testOptions(ev.controller("pods", false, nil), ev.controller("leading", true, nil), ev.controller("tokens", false, nil))
	ctx, cancel := context.WithCancel(context.Background())
	wait := start(t, ctx, o)
	ev.waitUp(t, "pods", "tokens", "leading")
	cancel()
	if err := wait(); err != nil {
		t.Errorf("Run: %v", err)
	}
	want := []string{"pods up", "tokens up", "leading up", "leading down", "tokens down", "pods down"}
	if diff := cmp.Diff(want, ev.get()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestDaemonEndsWithTheFailure: a controller or loop that fails, at its
// start or later, ends the daemon at once with its name and reason, and
// the controllers that ran are joined first.
func TestDaemonEndsWithTheFailure(t *testing.T) {
	boom := errors.New("boom")
	failing := func(leading bool) func(*events) manager.Controller {
		return func(*events) manager.Controller {
			return manager.Controller{Name: "broken", Leading: leading, Run: func(context.Context, func()) error { return boom }}
		}
	}
	later := func(leading bool) func(*events) manager.Controller {
		return func(ev *events) manager.Controller {
			fail := make(chan error, 1)
			fail <- boom
			return ev.controller("broken", leading, fail)
		}
	}
	tests := []struct {
		name    string
		broken  func(*events) manager.Controller
		runs    bool
		wantErr string
		want    []string
	}{
		{"fails to start", failing(false), false, "broken: boom", []string{"pods up", "pods down"}},
		{"fails later", later(false), false, "broken: boom", []string{"pods up", "broken up", "pods down"}},
		{"leading, fails to start", failing(true), false, "broken: boom", []string{"pods up", "pods down"}},
		{"leading, fails later", later(true), false, "broken: boom", []string{"pods up", "broken up", "pods down"}},
		{"the runs loop fails", func(ev *events) manager.Controller { return ev.controller("other", false, nil) }, true,
			"runs: no executor: boom", []string{"pods up", "other up", "other down", "pods down"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := newEvents()
			o := testOptions(ev.controller("pods", false, nil), tt.broken(ev))
			if tt.runs {
				ro := spool.DefaultOptions(t.TempDir())
				o.Runs = &ro
				o.NewExecutor = func(context.Context) (runs.Executor, error) { return nil, fmt.Errorf("no executor: %w", boom) }
			}
			err := start(t, context.Background(), o)()
			got := []any{errString(err), errors.Is(err, boom), ev.get()}
			if diff := cmp.Diff([]any{tt.wantErr, true, tt.want}, got); diff != "" {
				t.Errorf("Run's error, its cause, events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadyzWhileControllersStart: /readyz is 503 naming the controller
// that starts (a first list can take minutes), and 200 once all run.
func TestReadyzWhileControllersStart(t *testing.T) {
	ev := newEvents()
	release := make(chan struct{})
	slow := manager.Controller{Name: "slow", Run: func(ctx context.Context, started func()) error {
		select {
		case <-release:
		case <-ctx.Done():
			return nil
		}
		started()
		<-ctx.Done()
		return nil
	}}
	o := testOptions(ev.controller("pods", false, nil), slow, ev.controller("tokens", false, nil))
	o.MetricsAddress = "127.0.0.1:0"
	addr := make(chan string, 1)
	o.OnListen = func(a net.Addr) { addr <- a.String() }
	ctx, cancel := context.WithCancel(context.Background())
	wait := start(t, ctx, o)
	defer func() { cancel(); _ = wait() }()
	url := "http://" + <-addr + "/readyz"
	ev.waitUp(t, "pods")
	starting := readyz(t, url)
	close(release)
	ev.waitUp(t, "tokens")
	running := readyz(t, url)
	// Once they run, the reconcile loop's conditions alone say ready or
	// not: its first load may still be going on.
	_, running, _ = strings.Cut(running, " ")
	want := []string{"503 False Starting starting slow (2 of 3)", "True Running pods, slow, tokens running"}
	if diff := cmp.Diff(want, []string{starting, running}); diff != "" {
		t.Errorf("/readyz's status and condition %s (-want +got):\n%s", CondControllers, diff)
	}
}

// readyz is /readyz's status code and the condition Controllers, as
// "code Status Reason Message".
func readyz(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var rep health.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatalf("/readyz: %v\n%s", err, body)
	}
	for _, c := range rep.Conditions {
		if c.Type == CondControllers {
			return fmt.Sprintf("%d %s %s %s", resp.StatusCode, c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("%d without %s", resp.StatusCode, CondControllers)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
