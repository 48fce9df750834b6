package daemon

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestGCPercentFor: the heap goal is the floor while little is live, and
// 1.5× what is live once that is more.
func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		live uint64
		want int
	}{
		{0, maxDaemonGCPercent},
		{1 * mib, maxDaemonGCPercent}, // 3,100 %: bounded
		{4 * mib, 700},                // goal 32 MiB
		{8 * mib, 300},
		{16 * mib, 100},
		{20 * mib, 60},
		{22 * mib, daemonGCPercent}, // 1.5× is above the floor
		{29 * mib, daemonGCPercent}, // 1,000 runs in flight
		{200 * mib, daemonGCPercent},
	}
	for _, tt := range tests {
		if got := gcPercentFor(tt.live); got != tt.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", tt.live/mib, got, tt.want)
		}
		// Unless bounded, the heap goal is at least the floor (to the
		// percent's rounding).
		if p := gcPercentFor(tt.live); p < maxDaemonGCPercent {
			if goal := tt.live + tt.live*uint64(p)/100; goal+tt.live/100 < daemonHeapFloor {
				t.Errorf("gcPercentFor(%d MiB) = %d: heap goal %d MiB is below the floor", tt.live/mib, p, goal/mib)
			}
		}
	}
}

// TestTuneGCAfterEveryCollection: the target is set when the tuner starts
// and again after a collection, until it is stopped.
func TestTuneGCAfterEveryCollection(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	stop := tuneGC()
	if got := debug.SetGCPercent(77); got < daemonGCPercent || got > maxDaemonGCPercent {
		t.Fatalf("target when the tuner starts = %d, want %d–%d", got, daemonGCPercent, maxDaemonGCPercent)
	}
	// 77 is nothing gcPercentFor gives for this test's small heap: a
	// collection must replace it.
	got := 77
	for deadline := time.Now().Add(30 * time.Second); got == 77 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		got = debug.SetGCPercent(77)
	}
	if got == 77 {
		t.Fatal("the target was not set again after a collection")
	}
	stop()
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	debug.SetGCPercent(77)
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if got := debug.SetGCPercent(orig); got != 77 {
		t.Errorf("after stop the target changed to %d", got)
	}
}
