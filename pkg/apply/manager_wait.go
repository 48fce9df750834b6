package apply

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Wait waits until every object the change set applied is current by kstatus rules (e.g.
// a Namespace is Active, a Deployment has rolled out, a PVC is Bound; objects without
// status are current at once) and every object it pruned is gone. It polls with one
// LIST per resource every opts.Interval. It fails at once when an object's status is
// Failed, and after opts.Timeout with the objects that are not ready and why.
func (m *Manager) Wait(ctx context.Context, cs *ChangeSet, opts WaitOptions) error {
	opts.complete()
	targets, err := m.waitTargets(cs)
	if err != nil || len(targets) == 0 {
		return err
	}
	namespaces := sets.New[string]()
	var mappings []*meta.RESTMapping
	seen := sets.New[string]()
	for _, t := range targets {
		if t.ref.Namespace != "" {
			namespaces.Insert(t.ref.Namespace)
		}
		if !seen.Has(t.mapping.Resource.String()) {
			seen.Insert(t.mapping.Resource.String())
			mappings = append(mappings, t.mapping)
		}
	}

	var notReady []string
	var lastErr error
	start := time.Now()
	err = wait.PollUntilContextTimeout(ctx, opts.Interval, opts.Timeout, true, func(ctx context.Context) (bool, error) {
		idx := m.newLiveIndex(cs.ApplySetID, namespaces)
		if err := idx.loadAll(ctx, mappings); err != nil {
			// Transient (or the deadline is near): try again until the timeout.
			lastErr = err
			m.log.Debug("waiting: listing failed", "error", err)
			return false, nil
		}
		var failed []string
		notReady, failed = checkTargets(idx, targets, notReady[:0])
		if len(failed) > 0 {
			return false, errors.New("failed: " + strings.Join(failed, "; "))
		}
		m.log.Debug("waiting for objects", "notReady", len(notReady), "elapsed", time.Since(start).Round(time.Millisecond))
		return len(notReady) == 0, nil
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		if len(notReady) == 0 && lastErr != nil {
			return fmt.Errorf("timed out after %s waiting for objects to become ready: %w", opts.Timeout, lastErr)
		}
		sort.Strings(notReady)
		return fmt.Errorf("timed out after %s waiting for %d object(s) to become ready: %s",
			opts.Timeout, len(notReady), strings.Join(notReady, "; "))
	}
	return fmt.Errorf("waiting for objects: %w", err)
}

// waitTarget is an object Wait waits for: to be current, or gone.
type waitTarget struct {
	ref     ObjectRef
	mapping *meta.RESTMapping
	gone    bool
}

// waitTargets returns the objects of cs that Wait waits for: those applied
// (current) and those pruned (gone).
func (m *Manager) waitTargets(cs *ChangeSet) ([]waitTarget, error) {
	var targets []waitTarget
	for _, o := range cs.Objects {
		var gone bool
		switch o.Action {
		case ActionCreated, ActionConfigured, ActionUnchanged, ActionRecreated:
		case ActionPruned:
			gone = true
		default:
			continue
		}
		mp, err := m.mapper.RESTMapping(o.Ref.GroupKind(), o.Ref.Version)
		if err != nil {
			return nil, fmt.Errorf("waiting: %s: %w", o.Ref, err)
		}
		targets = append(targets, waitTarget{ref: o.Ref, mapping: mp, gone: gone})
	}
	return targets, nil
}

// checkTargets appends to notReady each target not yet as wanted in idx, and
// returns those whose status is Failed.
func checkTargets(idx *liveIndex, targets []waitTarget, notReady []string) (_ []string, failed []string) {
	for _, t := range targets {
		u := idx.get(t.mapping, t.ref)
		if t.gone {
			if u != nil {
				notReady = append(notReady, t.ref.String()+": still exists")
			}
			continue
		}
		if u == nil {
			notReady = append(notReady, t.ref.String()+": not found")
			continue
		}
		res, err := status.Compute(u)
		if err != nil {
			notReady = append(notReady, fmt.Sprintf("%s: %v", t.ref, err))
			continue
		}
		switch res.Status {
		case status.CurrentStatus:
		case status.FailedStatus:
			failed = append(failed, fmt.Sprintf("%s: %s: %s", t.ref, res.Status, res.Message))
		default:
			notReady = append(notReady, fmt.Sprintf("%s: %s: %s", t.ref, res.Status, res.Message))
		}
	}
	return notReady, failed
}
