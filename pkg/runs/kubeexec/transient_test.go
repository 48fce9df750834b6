package kubeexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestTransient: what the API server's absence or overload looks like is
// repeated; the server's answers about the request itself, and the caller's
// own deadline, are not.
func TestTransient(t *testing.T) {
	jobs := schema.GroupResource{Group: "batch", Resource: "jobs"}
	urlErr := func(err error) error {
		return &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/apis/batch/v1/jobs", Err: err}
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", urlErr(syscall.ECONNREFUSED), true},
		{"connection reset", urlErr(syscall.ECONNRESET), true},
		{"unexpected EOF", urlErr(io.ErrUnexpectedEOF), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"503", apierrors.NewServiceUnavailable("starting"), true},
		{"504", apierrors.NewTimeoutError("etcd", 1), true},
		{"500", apierrors.NewInternalError(errors.New("webhook")), false},
		{"already exists", apierrors.NewAlreadyExists(jobs, "x"), false},
		{"forbidden", apierrors.NewForbidden(jobs, "x", errors.New("rbac")), false},
		{"invalid", apierrors.NewBadRequest("bad"), false},
		{"own deadline", urlErr(context.DeadlineExceeded), false},
		{"cancelled", fmt.Errorf("create: %w", context.Canceled), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := transient(tt.err); got != tt.want {
				t.Errorf("transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestUntilAnswered: transient failures are repeated until an answer, which
// is returned; a final answer ends at once; the context ends the wait.
func TestUntilAnswered(t *testing.T) {
	saved := retryBackoff
	retryBackoff.Duration, retryBackoff.Cap = time.Millisecond, 2*time.Millisecond
	t.Cleanup(func() { retryBackoff = saved })
	log := slog.New(slog.DiscardHandler)
	refused := &url.Error{Op: "Post", URL: "https://127.0.0.1:6443", Err: syscall.ECONNREFUSED}
	exists := apierrors.NewAlreadyExists(schema.GroupResource{Resource: "jobs"}, "x")

	calls := 0
	err := untilAnswered(context.Background(), log, "create", func() error {
		if calls++; calls < 4 {
			return refused
		}
		return exists
	})
	if !apierrors.IsAlreadyExists(err) || calls != 4 {
		t.Errorf("after 3 refusals: %v in %d calls, want the AlreadyExists answer in 4", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = untilAnswered(ctx, log, "create", func() error {
		if calls++; calls == 3 {
			cancel()
		}
		return refused
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("cancelled while refused: %v, want context.Canceled and the last failure", err)
	}
}
