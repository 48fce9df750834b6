package manager

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/health"
)

// journal records what the test's controllers did, in order.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(e string) {
	j.mu.Lock()
	j.events = append(j.events, e)
	j.mu.Unlock()
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.events...)
}

// fake is a controller that records its start and its stop, and, as
// asked, fails to start or fails once fail is closed.
func fake(j *journal, name string, startErr error, fail <-chan error) Controller {
	return Controller{Name: name, Run: func(ctx context.Context, started func()) error {
		if startErr != nil {
			j.add(name + " failed to start")
			return startErr
		}
		j.add(name + " up")
		started()
		select {
		case <-ctx.Done():
			j.add(name + " down")
			return nil
		case err := <-fail:
			j.add(name + " failed")
			return err
		}
	}}
}

func newManager(t *testing.T, h *health.Checker, cs ...Controller) *Manager {
	t.Helper()
	m := New(Options{Logger: slog.New(slog.DiscardHandler), Health: h})
	for _, c := range cs {
		if err := m.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestStartsInOrderStopsInReverse: each controller starts once the one
// before it has, and stops only once the one after it has returned.
func TestStartsInOrderStopsInReverse(t *testing.T) {
	j := &journal{}
	m := newManager(t, nil, fake(j, "a", nil, nil), fake(j, "b", nil, nil), fake(j, "c", nil, nil))
	ctx, err := m.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if ctx.Err() == nil {
		t.Error("the manager's context did not end with Stop")
	}
	want := []string{"a up", "b up", "c up", "c down", "b down", "a down"}
	if diff := cmp.Diff(want, j.get()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestAControllerThatFailsNamesItself: a controller that fails to start,
// or returns before it is stopped, fails the manager with its name; the
// controllers started before it are stopped and joined, those after it
// never start.
func TestAControllerThatFailsNamesItself(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string
		b        func(j *journal) Controller
		wantErr  string
		wantEvts []string
	}{
		{"fails to start", func(j *journal) Controller { return fake(j, "b", boom, nil) },
			"b: boom", []string{"a up", "b failed to start", "a down"}},
		{"returns before it starts", func(j *journal) Controller {
			return Controller{Name: "b", Run: func(context.Context, func()) error { j.add("b returned"); return nil }}
		}, "b: stopped on its own", []string{"a up", "b returned", "a down"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &journal{}
			h := health.NewChecker()
			m := newManager(t, h, fake(j, "a", nil, nil), tt.b(j), fake(j, "c", nil, nil))
			_, err := m.Start(context.Background())
			got := []any{errString(err), j.get(), condition(h)}
			want := []any{tt.wantErr, tt.wantEvts, "False Failed " + tt.wantErr}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Start's error, events, condition (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAFailureAfterTheStartEndsTheManager: a running controller that
// fails ends the context Start returned, with its failure as the cause;
// Stop joins every controller and returns the failure.
func TestAFailureAfterTheStartEndsTheManager(t *testing.T) {
	j := &journal{}
	fail := make(chan error, 1)
	h := health.NewChecker()
	m := newManager(t, h, fake(j, "a", nil, nil), fake(j, "b", nil, fail), fake(j, "c", nil, nil))
	ctx, err := m.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := condition(h); got != "True Running a, b, c running" {
		t.Errorf("condition once started: %q", got)
	}
	fail <- errors.New("lost its watch")
	<-ctx.Done()
	cause := context.Cause(ctx)
	err = m.Stop()
	got := []any{errString(cause), errString(err), j.get(), condition(h)}
	want := []any{"b: lost its watch", "b: lost its watch", []string{"a up", "b up", "c up", "b failed", "c down", "a down"},
		"False Failed b: lost its watch"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cause, Stop's error, events, condition (-want +got):\n%s", diff)
	}
}

// TestStartingShowsOnReadyz: while a controller starts, the gating
// condition says which; a context that ends meanwhile ends the start,
// with no error, and Stop joins what started.
func TestStartingShowsOnReadyz(t *testing.T) {
	j := &journal{}
	h := health.NewChecker()
	seen := make(chan string, 1)
	slow := Controller{Name: "b", Run: func(ctx context.Context, _ func()) error {
		seen <- condition(h)
		<-ctx.Done()
		j.add("b down")
		return ctx.Err()
	}}
	m := newManager(t, h, fake(j, "a", nil, nil), slow, fake(j, "c", nil, nil))
	ctx, cancel := context.WithCancel(context.Background())
	during := make(chan string, 1)
	go func() { during <- <-seen; cancel() }()
	_, startErr := m.Start(ctx)
	stopErr := m.Stop()
	got := []any{<-during, errString(startErr), errString(stopErr), j.get()}
	want := []any{"False Starting starting b (2 of 3)", "", "", []string{"a up", "b down", "a down"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("condition while b starts, Start's and Stop's errors, events (-want +got):\n%s", diff)
	}
}

// TestRegister: a controller is registered once, with a name and a Run.
func TestRegister(t *testing.T) {
	run := func(context.Context, func()) error { return nil }
	m := New(DefaultOptions())
	if err := m.Register(Controller{Name: "a", Run: run}); err != nil {
		t.Fatal(err)
	}
	got := []string{
		errString(m.Register(Controller{Name: "a", Run: run})),
		errString(m.Register(Controller{Run: run})),
		errString(m.Register(Controller{Name: "b"})),
	}
	want := []string{"controller a: registered twice", "controller manager: a controller without a name", "controller b: no Run"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Register's errors (-want +got):\n%s", diff)
	}
}

// TestBackground: a Background controller says it started once its
// start returned, and is waited for once its context ends; one whose
// start fails is waited for too, and never says it started.
func TestBackground(t *testing.T) {
	tests := []struct {
		name     string
		startErr error
		want     []string
	}{
		{"starts", nil, []string{"start", "started", "wait, its context ended"}},
		{"fails", errors.New("no list"), []string{"start", "wait, its context ended"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &journal{}
			var its context.Context
			c := Background("x", func(ctx context.Context) error {
				j.add("start")
				its = ctx
				return tt.startErr
			}, func() {
				if its.Err() != nil {
					j.add("wait, its context ended")
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := c.Run(ctx, func() { j.add("started"); cancel() })
			got := []any{errString(err), j.get()}
			want := []any{errString(tt.startErr), tt.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("error, events (-want +got):\n%s", diff)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// condition is the manager's condition on h, as "Status Reason Message".
func condition(h *health.Checker) string {
	for _, c := range h.Report().Conditions {
		if c.Type == "Controllers" {
			return string(c.Status) + " " + c.Reason + " " + c.Message
		}
	}
	return ""
}
