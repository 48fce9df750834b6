package pool

import (
	"cmp"
	"time"
)

// Options configure the warm pools a Manager keeps (Company
// spec.sandbox.warmPool). Zero fields, and negative durations, take
// DefaultOptions' values.
type Options struct {
	// Disabled keeps no warm pool whatever the config declares, and leaves
	// the members of earlier daemons alone.
	Disabled bool
	// Owner names the deployment of pcsync this daemon is (the daemon gives
	// its ApplySet ID): the members it creates carry it (LabelOwner),
	// and it keeps, adopts and drains only the members that do, so that
	// two deployments on one cluster leave each other's pools alone. The
	// replicas of one deployment share it. It must be a label value.
	// Default "pcsync".
	Owner string
	// ReadyDeadline is how long a new member may take to be Ready; one
	// that is not by then is replaced. Default 3m.
	ReadyDeadline time.Duration
	// MemberMaxAge is how long a member waits for a claim before it is
	// replaced: its activeDeadlineSeconds covers this and MaxLeaseTTL.
	// Default 12h.
	MemberMaxAge time.Duration
	// Resync is how often the controller looks for a new config (the
	// Manager's model func returns another one) that was not pushed
	// (Manager.ConfigChanged), queues the pools it changed, and gives the
	// metrics the pools. A pool also syncs on every
	// change of a member, and when a member's age will matter. Default 2s.
	Resync time.Duration
	// QuotaBackoff is how long no member is created in a namespace after a
	// quota refusal there, a member's own or a lease's that shrank its
	// pool. Default 15s.
	QuotaBackoff time.Duration
	// ColdHold bounds how long a namespace's refills wait while leases
	// there start pods of their own (a burst larger than its pools): those
	// pods and the refill's would share the node, and each lease waits for
	// its own. Default 30s.
	ColdHold time.Duration
	// RoomWait bounds how long a lease that shrank its pool for room in the
	// quota retries its create while the quota's usage catches up with the
	// member's delete. Default 15s.
	RoomWait time.Duration
	// PendingTTL is how long a pool's sync waits for its creates and
	// deletes in flight to reach the daemon's cache (its expectations)
	// before it forgets them. Default 30s.
	PendingTTL time.Duration
	// Lease is the owner's Lease: of the pool controllers of one owner
	// (two daemons on one ApplySet), only its holder syncs the pools; the
	// others stand by and take over when it stops.
	Lease LeaseOptions
}

// DefaultOptions returns the warm pools' defaults.
func DefaultOptions() Options {
	return Options{
		Owner:         "pcsync",
		ReadyDeadline: 3 * time.Minute,
		MemberMaxAge:  12 * time.Hour,
		Resync:        2 * time.Second,
		QuotaBackoff:  15 * time.Second,
		ColdHold:      30 * time.Second,
		RoomWait:      15 * time.Second,
		PendingTTL:    30 * time.Second,
		Lease:         DefaultLeaseOptions(),
	}
}

func (o *Options) complete() {
	d := DefaultOptions()
	o.Owner = cmp.Or(o.Owner, d.Owner)
	o.ReadyDeadline = cmp.Or(max(o.ReadyDeadline, 0), d.ReadyDeadline)
	o.MemberMaxAge = cmp.Or(max(o.MemberMaxAge, 0), d.MemberMaxAge)
	o.Resync = cmp.Or(max(o.Resync, 0), d.Resync)
	o.QuotaBackoff = cmp.Or(max(o.QuotaBackoff, 0), d.QuotaBackoff)
	o.ColdHold = cmp.Or(max(o.ColdHold, 0), d.ColdHold)
	o.RoomWait = cmp.Or(max(o.RoomWait, 0), d.RoomWait)
	o.PendingTTL = cmp.Or(max(o.PendingTTL, 0), d.PendingTTL)
	o.Lease.complete()
}
