package pool

import (
	"sync"
	"time"
)

// nsHolds are the reasons, per namespace, not to create members there now:
// a recent quota refusal, acquires in flight (most of them starting a pod
// of their own once the members are claimed: their pods and a refill's
// would compete for the node), and a recent claim whose company asks its
// refills to wait (Company spec.sandbox.refillDelaySec). Each namespace
// has its own lock: an acquire takes no lock of the controller's.
type nsHolds struct {
	quotaBackoff, coldHold time.Duration
	byNS                   sync.Map // namespace → *nsHold
}

// nsHold is one namespace's holds.
type nsHold struct {
	mu sync.Mutex
	// until is the time before which no member is created: the end of
	// the latest quota backoff or claim's hold.
	until time.Time
	// inflight counts the acquires in flight, since when the first began.
	inflight int
	since    time.Time
}

func (h *nsHolds) of(ns string) *nsHold {
	v, _ := h.byNS.LoadOrStore(ns, &nsHold{})
	return v.(*nsHold)
}

// quotaRefused holds namespace ns's refills for QuotaBackoff from now.
func (h *nsHolds) quotaRefused(ns string, now time.Time) {
	h.holdUntil(ns, now.Add(h.quotaBackoff))
}

// claimed holds namespace ns's refills for d from now (d > 0): a member
// there is being claimed, and its run starts on the node the refill's pod
// would start on too.
func (h *nsHolds) claimed(ns string, now time.Time, d time.Duration) {
	if d > 0 {
		h.holdUntil(ns, now.Add(d))
	}
}

// holdUntil holds namespace ns's refills until end, or longer if another
// hold ends later.
func (h *nsHolds) holdUntil(ns string, end time.Time) {
	x := h.of(ns)
	x.mu.Lock()
	if end.After(x.until) {
		x.until = end
	}
	x.mu.Unlock()
}

// held is how long, from now, no member may be created in namespace ns:
// until a recent quota refusal there is QuotaBackoff old, until the
// newest claim's hold ends, and while acquires of ns are in flight, at
// most ColdHold from the first one; 0 when members may be created.
func (h *nsHolds) held(ns string, now time.Time) time.Duration {
	v, ok := h.byNS.Load(ns)
	if !ok {
		return 0
	}
	x := v.(*nsHold)
	x.mu.Lock()
	defer x.mu.Unlock()
	var d time.Duration
	if x.inflight > 0 {
		d = x.since.Add(h.coldHold).Sub(now)
	}
	return max(d, x.until.Sub(now), 0)
}

// acquiring counts an acquire of namespace ns in flight until the returned
// func is called (once its pod runs, or it failed; later calls do
// nothing). The last one's end calls ended: its pools refill. A claim is
// done in milliseconds; a cold start holds the refills until its pod runs.
func (h *nsHolds) acquiring(ns string, now time.Time, ended func()) func() {
	x := h.of(ns)
	x.mu.Lock()
	if x.inflight == 0 {
		x.since = now
	}
	x.inflight++
	x.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			x.mu.Lock()
			x.inflight--
			last := x.inflight == 0
			x.mu.Unlock()
			if last {
				ended()
			}
		})
	}
}
