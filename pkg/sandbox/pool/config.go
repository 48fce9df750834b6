package pool

import (
	"context"
	"reflect"
	"time"
)

// ConfigChanged wakes the config loop: the Manager's model func returns a
// new config, declared again at once (without it, the next Resync finds
// it). It does not block; a wake already pending covers it.
func (c *Controller) ConfigChanged() {
	select {
	case c.pushed <- struct{}{}:
	default:
	}
}

// configLoop looks for a changed config when one is pushed
// (ConfigChanged) and every Resync (the Manager reads the current
// one from a func: a changed pointer is a new config), queues the pools
// it changed, and gives the metrics the pools. It alone declares pools
// and reports them.
func (c *Controller) configLoop(ctx context.Context) {
	t := time.NewTicker(c.opts.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.pushed:
		}
		c.configChanged()
		c.report()
	}
}

// configChanged, when the config is not the one the pools were declared
// from, declares them again and queues the pools whose declaration
// changed (added, removed, another count) and those with members that no
// pool declares. Before the first config, nothing is declared and no pool
// syncs.
func (c *Controller) configChanged() {
	model := c.model()
	old := c.cfg.Load()
	if model == nil || (old != nil && old.model == model) {
		return
	}
	now := &poolConfig{model: model, pools: c.declare(model)}
	c.cfg.Store(now)
	for _, k := range changedPools(old, now) {
		c.queue.Add(k)
	}
	for _, s := range c.informer.GetIndexer().ListIndexFuncValues(c.index) {
		k := parseKey(s)
		if now.pools[k] == nil {
			c.queue.Add(k)
		}
	}
}

// changedPools are the pools declared in old or now whose declaration
// differs (or is new, or gone); every pool of now when old is nil.
func changedPools(old, now *poolConfig) []Key {
	var out []Key
	var before map[Key]*Decl
	if old != nil {
		before = old.pools
	}
	for k, d := range now.pools {
		if b := before[k]; b == nil || b.count != d.count || !reflect.DeepEqual(b.Rec, d.Rec) {
			out = append(out, k)
		}
	}
	for k := range before {
		if now.pools[k] == nil {
			out = append(out, k)
		}
	}
	return out
}

// report gives the metrics each company's pools: declared, members and
// ready summed over its pools, and zeros for a company reported before
// that has none now.
func (c *Controller) report() {
	sums := map[string][3]int{}
	for _, s := range c.Status() {
		v := sums[s.Company]
		sums[s.Company] = [3]int{v[0] + s.Declared, v[1] + s.Members, v[2] + s.Ready}
	}
	for co := range c.reported {
		if _, ok := sums[co]; !ok {
			sums[co] = [3]int{}
			delete(c.reported, co)
		}
	}
	for co, v := range sums {
		if v != [3]int{} {
			c.reported[co] = true
		}
		c.metrics.SandboxPool(co, v[0], v[1], v[2])
	}
}
