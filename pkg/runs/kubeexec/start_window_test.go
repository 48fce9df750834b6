package kubeexec

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestStartWindow: places are handed out up to the limit, then as they are
// given back; pushback halves the limit (once per cutEvery, never below the
// floor) and answered creates grow it back. It runs in a synctest bubble:
// synctest.Wait returns once every goroutine of the test is blocked, so
// "the ninth waits" is proved without sleeping.
func TestStartWindow(t *testing.T) {
	synctest.Test(t, testStartWindow)
}

func testStartWindow(t *testing.T) {
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
	synctest.Wait() // the ninth is blocked in acquire
	select {
	case <-got:
		t.Fatal("a ninth place was handed out at a limit of 8")
	default:
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
	// Additive increase: one more place per limit answered creates.
	for _, want := range []int{5, 6, 7, 8} {
		for range want - 2 {
			w.observe(nil, time.Millisecond)
		}
		if limit, _ := w.state(); limit != want-1 {
			t.Fatalf("limit %d one answered create before growing, want %d", limit, want-1)
		}
		w.observe(nil, time.Millisecond)
		if limit, _ := w.state(); limit != want {
			t.Fatalf("limit %d after %d answered creates, want %d", limit, want-1, want)
		}
	}
	// A minute without pushback puts a cut window back at its ceiling.
	w.pushedBack(now.Add(time.Hour))
	w.mu.Lock()
	w.recoverLocked(now.Add(time.Hour + 59*time.Second))
	early := w.limit
	w.recoverLocked(now.Add(time.Hour + time.Minute))
	late := w.limit
	w.mu.Unlock()
	if early != 4 || late != 8 {
		t.Errorf("limit 59 s after a cut %d (want 4), a minute after %d (want the ceiling 8)", early, late)
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

// TestStartWindowFIFO: runs past the limit get in in the order they came,
// one per place given back; one that gives up while queued leaves the
// queue without costing anyone behind it their turn.
func TestStartWindowFIFO(t *testing.T) {
	for _, tc := range []struct {
		name string
		// gaveUp is the waiter (by arrival) that gives up while queued, or
		// -1.
		gaveUp int
		want   [][]int
	}{
		{"five waiters", -1, [][]int{{0}, {1}, {2}, {3}, {4}}},
		{"the third gives up", 2, [][]int{{0}, {1}, {3}, {4}, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const limit, waiters = 4, 5
				w := newStartWindow(limit)
				var held []func()
				for range limit {
					release, err := w.acquire(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					held = append(held, release)
				}
				// Waiter i queues only once waiter i-1 is blocked in
				// acquire: the arrival order is 0, 1, 2, 3, 4.
				in := make(chan int, waiters)
				releases := make([]func(), waiters)
				var giveUp context.CancelFunc
				for i := range waiters {
					ctx := context.Background()
					if i == tc.gaveUp {
						ctx, giveUp = context.WithCancel(ctx)
					}
					go func() {
						release, err := w.acquire(ctx)
						if err != nil {
							return
						}
						releases[i] = release
						in <- i
					}()
					synctest.Wait()
				}
				if giveUp != nil {
					giveUp()
					synctest.Wait()
				}
				// Give the places back one by one; after each, the
				// waiters that got in.
				var got [][]int
				for _, release := range held {
					release()
					synctest.Wait()
					got = append(got, drain(in))
				}
				// The last one gets the place that the first one in (the
				// first waiter that got in) gives back.
				for _, release := range releases {
					if release != nil {
						release()
						break
					}
				}
				synctest.Wait()
				got = append(got, drain(in))
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("waiters in, per place given back (-want +got):\n%s", diff)
				}
				for _, release := range releases {
					if release != nil {
						release() // the first one's second release gives nothing back
					}
				}
				w.mu.Lock()
				defer w.mu.Unlock()
				if w.inflight != 0 || len(w.waiters) != 0 {
					t.Errorf("after every release: %d in flight, %d waiting; want none", w.inflight, len(w.waiters))
				}
			})
		})
	}
}

// drain returns what ch holds now, in order (nil when nothing).
func drain(ch chan int) []int {
	var got []int
	for {
		select {
		case i := <-ch:
			got = append(got, i)
		default:
			return got
		}
	}
}

// recordedWindow is a WindowMetrics that keeps what it is told.
type recordedWindow struct {
	limits []int
	cuts   int
}

func (r *recordedWindow) SetStartWindow(limit int) { r.limits = append(r.limits, limit) }
func (r *recordedWindow) StartWindowCut()          { r.cuts++ }

// TestStartWindowSlowCreate: a create that succeeds but takes longer than
// slow is pushback; faster ones grow the window back. The metrics see each
// change of the limit.
func TestStartWindowSlowCreate(t *testing.T) {
	m := &recordedWindow{}
	w := newStartWindow(8).withMetrics(m)
	w.slow = time.Second
	w.observe(nil, 500*time.Millisecond) // at the ceiling: no change
	w.observe(nil, 2*time.Second)
	for range 4 { // four answered creates grow the cut window (4) by one
		w.observe(nil, 10*time.Millisecond)
	}
	w.observe(errors.New("connection reset"), time.Millisecond)
	limit, cuts := w.state()
	if diff := cmp.Diff([2]int{5, 1}, [2]int{limit, cuts}); diff != "" {
		t.Errorf("(limit, cuts) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&recordedWindow{limits: []int{8, 4, 5}, cuts: 1}, m, cmp.AllowUnexported(recordedWindow{})); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
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
