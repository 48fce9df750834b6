package testcluster

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errNotStarted is returned by the methods that drive a node's processes when this
// process did not start the node (an attached cluster's node).
var errNotStarted = errors.New("the real node was not started by this process")

// NetworkPolicy reports whether the node enforces NetworkPolicies now: kube-router's
// firewall controller runs (RealNodeOptions.NetworkPolicy, StartNetworkPolicy).
func (n *RealNode) NetworkPolicy() bool {
	return n.net != nil && n.net.enforcing()
}

// StartNetworkPolicy starts kube-router's firewall controller, if it does not run,
// and returns once its chains filter the node's traffic. Pods that a policy selects
// are firewalled with its next sync: WaitFirewalled waits for one.
func (n *RealNode) StartNetworkPolicy(ctx context.Context) error {
	if n.net == nil {
		return fmt.Errorf("real node %s: start NetworkPolicy: %w", n.opts.Name, errNotStarted)
	}
	if err := n.net.startRouter(ctx); err != nil {
		return fmt.Errorf("real node %s: start NetworkPolicy: %w", n.opts.Name, err)
	}
	return nil
}

// StopNetworkPolicy stops kube-router and removes its chains and ipsets (what
// `kube-router --cleanup-config` should do, and in v2.1.0 does not: see
// cleanupKubeRouter): from its return the node enforces nothing, the policies stay
// in the API. It fails if a chain of kube-router is left.
func (n *RealNode) StopNetworkPolicy(ctx context.Context) error {
	if n.net == nil {
		return fmt.Errorf("real node %s: stop NetworkPolicy: %w", n.opts.Name, errNotStarted)
	}
	if err := n.net.stopRouter(ctx, 5*time.Second); err != nil {
		return fmt.Errorf("real node %s: stop NetworkPolicy: %w", n.opts.Name, err)
	}
	return nil
}

// WaitFirewalled waits until the enforcer has put pod namespace/name behind its own
// firewall chain, which it does for a pod with an IP that some NetworkPolicy selects
// (ingress or egress), with the policies that existed at that sync. Until then the
// pod's traffic passes unfiltered: a test waits for it before it probes. It fails
// at once if the node does not enforce, and after 60 s (or ctx) if the pod never
// gets its chain.
func (n *RealNode) WaitFirewalled(ctx context.Context, namespace, name string) error {
	if !n.NetworkPolicy() {
		return fmt.Errorf("real node %s: wait for pod %s/%s: the node does not enforce NetworkPolicies", n.opts.Name, namespace, name)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		ok, err := n.net.firewalled(ctx, namespace, name)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("no kube-router chain for it (is it selected by a NetworkPolicy, and Running with an IP?)")
			}
			return fmt.Errorf("real node %s: wait for pod %s/%s to be firewalled: %w (%w)", n.opts.Name, namespace, name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
