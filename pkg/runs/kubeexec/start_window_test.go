package kubeexec

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestStartWindow: places are handed out up to the limit, then in arrival
// order as they are given back; pushback halves the limit (once per
// cutEvery, never below the floor) and answered creates grow it back.
func TestStartWindow(t *testing.T) {
	w := newStartWindow(8)
	var held []func()
	for range 8 {
		release, err := w.acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, release)
	}
	// The ninth waits; one that gives up leaves the queue.
	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.acquire(gaveUp); err == nil {
		t.Fatal("acquire past the limit with a cancelled context succeeded")
	}
	got := make(chan func(), 1)
	go func() {
		release, err := w.acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- release
	}()
	select {
	case <-got:
		t.Fatal("a ninth place was handed out at a limit of 8")
	case <-time.After(50 * time.Millisecond):
	}
	held[0]()
	held[0]() // releasing twice gives back one place
	ninth := <-got

	now := time.Now()
	w.pushedBack(now)
	w.pushedBack(now.Add(100 * time.Millisecond)) // the same episode: no second cut
	limit, cuts := w.state()
	if diff := cmp.Diff([2]int{4, 1}, [2]int{limit, cuts}); diff != "" {
		t.Errorf("after pushback (limit, cuts) (-want +got):\n%s", diff)
	}
	for i := range 5 {
		w.pushedBack(now.Add(time.Duration(i+1) * 2 * time.Second))
	}
	if limit, _ := w.state(); limit != 4 {
		t.Errorf("limit after many cuts %d, want the floor 4", limit)
	}
	for range 10 {
		w.observe(nil)
	}
	if limit, _ := w.state(); limit != 8 {
		t.Errorf("limit after 10 answered creates %d, want the ceiling 8", limit)
	}
	ninth()
	for _, release := range held[1:] {
		release()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inflight != 0 || len(w.waiters) != 0 {
		t.Errorf("after every release: %d in flight, %d waiting; want none", w.inflight, len(w.waiters))
	}
}

// TestPushbackTransport: a 429 answer (which client-go retries by itself)
// cuts the window; other answers do not.
func TestPushbackTransport(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	defer srv.Close()
	w := newStartWindow(64)
	c := &http.Client{Transport: pushbackTransport{next: http.DefaultTransport, window: w}}
	get := func() {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get()
	if limit, _ := w.state(); limit != 64 {
		t.Fatalf("limit after a 200: %d, want 64", limit)
	}
	status = http.StatusTooManyRequests
	get()
	if limit, cuts := w.state(); limit != 32 || cuts != 1 {
		t.Errorf("after a 429: limit %d, cuts %d; want 32, 1", limit, cuts)
	}
}
