package daemon

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// daemonGCPercent is the daemon's garbage collection target when GOGC is not
// set, once its live heap is large: a long-lived process that holds a log
// stream, a handle and informer entries per run in flight keeps its heap at
// 1.5× what is live instead of Go's 2× (1,000 runs in flight: 142 MiB RSS
// instead of 156 MiB).
const daemonGCPercent = 50

// daemonHeapFloor is the heap the collector lets the daemon reach before it
// collects, however little is live. At GOGC=50 a daemon with little live
// (8–15 MiB, a burst of 200 requests arriving at an idle daemon) collected
// every few MiB it allocated: eight collections in the burst's first second,
// 28 % of the daemon's CPU while it read the requests and created their Jobs.
// From 21.3 MiB live on, 1.5× what is live is above the floor and the target
// is daemonGCPercent, as before: 1,000 runs in flight (43.5 MiB of heap) keep
// their RSS.
const daemonHeapFloor = 32 << 20

// maxDaemonGCPercent bounds the target when almost nothing is live.
const maxDaemonGCPercent = 1000

// gcPercentFor is the target whose heap goal is the larger of 1.5× live
// (daemonGCPercent) and daemonHeapFloor.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return maxDaemonGCPercent
	}
	p := int((daemonHeapFloor*100+live-1)/live) - 100
	return min(max(p, daemonGCPercent), maxDaemonGCPercent)
}

// SetGC applies gcPercentFor the live heap now and after every collection,
// unless the GOGC environment variable says otherwise: the daemon's
// process calls it once, at start.
func SetGC(log *slog.Logger) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	tuneGC()
	log.Debug("garbage collection target set", slog.Int("gcPercent", daemonGCPercent), slog.Int("heapFloorBytes", daemonHeapFloor))
}

// gcSentinel is what tuneGC hangs its callback on: an object of its own (a
// pointer field keeps it out of the allocator's tiny blocks, whose
// finalizers may never run).
type gcSentinel struct {
	_ *int
	_ [8]byte
}

// tuneGC sets the target to gcPercentFor the live heap, and again at the end
// of every collection (a finalizer on an unreachable sentinel runs after
// the collection that found it, and hangs the next one), until stop is
// called. It returns stop.
func tuneGC() (stop func()) {
	var stopped atomic.Bool
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := func() {
		metrics.Read(sample)
		live := uint64(0)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live = sample[0].Value.Uint64()
		}
		debug.SetGCPercent(gcPercentFor(live))
	}
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
			if stopped.Load() {
				return
			}
			set()
			arm()
		})
	}
	set()
	arm()
	return func() { stopped.Store(true) }
}
