package apply

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
)

// call is what one Apply or Diff works on. Both open it the same way
// (newCall, then load) and defer done, so that the report's duration and
// request counts cover the whole call, early errors included.
type call struct {
	m           *Manager
	report      *ChangeSet
	start       time.Time
	mut0, read0 int64

	// handover and partial are the call's ApplyOptions.Handover and
	// Partial (none for Diff).
	handover Handover
	partial  bool

	// Set by load.
	desired []*desiredObject
	inv     *inventory
	idx     *liveIndex
}

// newCall starts the report of an Apply (dryRun as asked) or a Diff (always
// a dry run) and the clock and request counts it gives.
func (m *Manager) newCall(dryRun bool) *call {
	return &call{
		m:      m,
		report: &ChangeSet{ApplySetID: m.applySetID(), Parent: m.parentRef(), DryRun: dryRun},
		start:  time.Now(),
		mut0:   m.counter.Mutations(),
		read0:  m.counter.Reads(),
	}
}

// done fills the report's duration and the requests the call sent.
func (c *call) done() {
	c.report.Duration = time.Since(c.start)
	c.report.MutatingRequests = c.m.counter.Mutations() - c.mut0
	c.report.ReadRequests = c.m.counter.Reads() - c.read0
}

// load prepares objs and reads the parent (begin), reads the live objects
// of the set and of the namespaces concerned (a partial call: only where
// objs are), and claims what pcsync may take (ownership.go). Nothing is
// sent to the cluster but reads.
func (c *call) load(ctx context.Context, objs []*unstructured.Unstructured) error {
	m := c.m
	desired, inv, err := m.begin(ctx, objs)
	if err != nil {
		return err
	}
	if c.partial && !inv.exists {
		return fmt.Errorf("ApplySet parent %s does not exist: %w", inv.parent, ErrPartialNoParent)
	}
	idx := m.newLiveIndex(inv.id, m.interestingNamespaces(inv, desired))
	if c.partial {
		idx.only = desired
	}
	if err := idx.loadAll(ctx, uniqueMappings(desired)); err != nil {
		return err
	}
	if err := m.claim(ctx, desired, idx, inv, sets.New(c.handover.From...)); err != nil {
		return err
	}
	c.desired, c.inv, c.idx = desired, inv, idx
	return nil
}

// planPrune plans the prune of the loaded set and runs the prune guard on it
// with opts' limits and the approval tokens given: a hold, when the guard
// holds the prune back, or an error when it refuses it.
func (c *call) planPrune(ctx context.Context, emptyRender bool, opts ApplyOptions, approvals ...string) (*prunePlan, *PruneHold, error) {
	plan, err := c.m.planPrune(ctx, c.inv, c.desired, c.idx, sets.New(c.handover.Keep...))
	if err != nil {
		return nil, nil, err
	}
	hold, err := guardPrune(plan, tenantsOf(c.desired, c.inv.parent.Namespace), emptyRender, opts, approvals...)
	if err != nil {
		return nil, nil, err
	}
	return plan, hold, nil
}

// begin prepares objs, reads the parent and resolves the objects' kinds. The parent
// is read while the objects are encoded and the API's discovery is read: the three
// do not depend on each other, and only reads are sent before the input is known to
// be good.
func (m *Manager) begin(ctx context.Context, objs []*unstructured.Unstructured) ([]*desiredObject, *inventory, error) {
	var (
		wg     sync.WaitGroup
		inv    *inventory
		invErr error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		inv, invErr = m.readInventory(ctx)
	}()
	go func() {
		defer wg.Done()
		// Errors show again, per kind, when resolve asks the mapper.
		_, _, _ = m.disc.ServerGroupsAndResources()
	}()
	desired, err := prepare(objs, m.applySetID(), runtime.GOMAXPROCS(0))
	wg.Wait()
	if err != nil {
		return nil, nil, err
	}
	if invErr != nil {
		return nil, nil, invErr
	}
	m.resolve(desired, false)
	return desired, inv, nil
}
