package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
)

// sync makes pool k's members what the config declares: it deletes the
// members that must go (poolPlan) and creates the missing ones, unless
// the pool's creates or deletes are still in flight (expectations) or no
// config is loaded yet. It queues k again for the next time a member's
// age will matter, or a hold of its namespace ends.
func (c *Controller) sync(ctx context.Context, k Key) error {
	cfg := c.cfg.Load()
	if cfg == nil {
		return nil // no config yet: keep what is
	}
	if wait := c.exp.wait(k); wait > 0 {
		c.queue.AddAfter(k, wait)
		return nil
	}
	d := cfg.pools[k]
	members, err := c.members(k)
	if err != nil {
		return err
	}
	now := time.Now()
	in := poolInput{members: members, now: now, held: c.holds.held(k.Namespace, now), opts: c.opts}
	if d != nil {
		in.declared, in.count = true, d.count
	}
	plan := decide(in)
	if len(plan.remove) > 0 || plan.create > 0 {
		c.log.Debug("sandbox: warm pool sync", slog.String("pool", k.String()), slog.Int("declared", in.count),
			slog.Int("members", len(members)), slog.Int("create", plan.create), slog.Int("remove", len(plan.remove)))
	}
	var errs []error
	for _, r := range plan.remove {
		errs = append(errs, c.remove(ctx, k, r.pod, r.why))
	}
	if plan.create > 0 {
		errs = append(errs, c.refill(ctx, d, cfg.model, plan.create))
	}
	if plan.after > 0 {
		c.queue.AddAfter(k, plan.after)
	}
	if !in.declared && len(members) == 0 {
		c.exp.forget(k)
	}
	return errors.Join(errs...)
}

// members are pool k's members in the lister, but for those being
// deleted and those a claim or a shrink took.
func (c *Controller) members(k Key) ([]*corev1.Pod, error) {
	pods, err := c.lister.Pods(k.Namespace).List(labels.SelectorFromSet(labels.Set{Label: k.Hash, LabelOwner: c.opts.Owner}))
	if err != nil {
		return nil, fmt.Errorf("pool %s: list members: %w", k, err)
	}
	out := pods[:0]
	for _, p := range pods {
		if _, taken := c.claimed.Load(p.UID); !taken && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// poolInput is what a pool's sync decides from.
type poolInput struct {
	// declared says the config declares the pool, count members of it.
	declared bool
	count    int
	// members are its members (none being deleted or claimed).
	members []*corev1.Pod
	now     time.Time
	// held is how long its namespace's creates are held (nsHolds).
	held time.Duration
	opts Options
}

// poolPlan is what a pool's sync does.
type poolPlan struct {
	// remove are the members to delete, and why.
	remove []removal
	// create is how many members to create.
	create int
	// after is when to sync the pool again though no event comes (a
	// member's deadline, a hold's end); 0: on the next event.
	after time.Duration
}

type removal struct {
	pod *corev1.Pod
	why string
}

// decide is a pool's sync in a pure function. A member goes when its pool
// is no longer declared (a company, its pool, or its image, spec or company
// changed), it ended, it was not Ready within ReadyDeadline, it is older
// than MemberMaxAge, or it is surplus (the least ready, newest first); the
// missing ones are created unless the namespace is held.
func decide(in poolInput) poolPlan {
	var plan poolPlan
	var fit []*corev1.Pod
	for _, p := range in.members {
		if why := unfit(p, in.declared, in.now, in.opts); why != "" {
			plan.remove = append(plan.remove, removal{p, why})
			continue
		}
		fit = append(fit, p)
	}
	switch n := len(fit); {
	case n > in.count:
		slices.SortFunc(fit, surplusFirst)
		for _, p := range fit[:n-in.count] {
			plan.remove = append(plan.remove, removal{p, "its pool has more members than it declares"})
		}
		fit = fit[n-in.count:]
	case n < in.count && in.held > 0:
		plan.after = in.held
	case n < in.count:
		plan.create = in.count - n
	}
	for _, p := range fit {
		plan.after = sooner(plan.after, nextDeadline(p, in.now, in.opts))
	}
	return plan
}

// sooner is the sooner of two waits, 0 being none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// surplusFirst orders members the least ready first, then the newest.
func surplusFirst(a, b *corev1.Pod) int {
	if ra, rb := agentpod.Ready(a), agentpod.Ready(b); ra != rb {
		if ra {
			return 1
		}
		return -1
	}
	return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
}

// nextDeadline is how long until member p, fit now, becomes unfit by its
// age: its ReadyDeadline while it is not Ready, its MemberMaxAge.
func nextDeadline(p *corev1.Pod, now time.Time, o Options) time.Duration {
	// unfit wants an age over the limit: a little after it.
	const past = 100 * time.Millisecond
	age := now.Sub(p.CreationTimestamp.Time)
	d := o.MemberMaxAge - age + past
	if !agentpod.Ready(p) {
		d = min(d, o.ReadyDeadline-age+past)
	}
	return max(d, past)
}

// unfit says why a member must go, or "" when it may stay.
func unfit(pod *corev1.Pod, declared bool, now time.Time, o Options) string {
	age := now.Sub(pod.CreationTimestamp.Time)
	switch {
	case !declared:
		return "its pool is no longer declared (the company, its pool, or the pod spec it makes changed)"
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		return "it ended (" + string(pod.Status.Phase) + ")"
	case !agentpod.Ready(pod) && age > o.ReadyDeadline:
		return fmt.Sprintf("it was not Ready within %s: %s", o.ReadyDeadline, agentpod.Reason(pod))
	case age > o.MemberMaxAge:
		return fmt.Sprintf("it waited for a claim longer than %s", o.MemberMaxAge)
	}
	return ""
}
