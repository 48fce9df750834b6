package testcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// stopRealNode stops the real node this process started, in the order that leaves
// nothing behind: the node is cordoned and its pods deleted through the API (so the
// kubelet stops their containers, unmounts their volumes and tears down their
// network); then the kubelet and containerd stop; then a sweep kills whatever is
// left (containerd's shims outlive it), unmounts, and removes the bridges and
// cgroups; then the registry stops and the machine lock is released. For an
// attached cluster's node it does nothing.
func (c *Cluster) stopRealNode() error {
	n := c.node
	if n == nil || n.lock == nil {
		return nil
	}
	begin := time.Now()
	var errs []error
	// The provisioner first: no helper pod is made while the node drains. The
	// sweep removes the volumes it leaves.
	if err := n.provisioner.stop(c.opts.StopGrace); err != nil && !n.provisioner.exited() {
		errs = append(errs, err)
	}
	if n.kubelet != nil && !n.kubelet.exited() {
		c.saveCoreDNSLog()
		if err := c.drainRealNode(); err != nil {
			c.opts.Logf("testcluster: real node: %v (the sweep below cleans up)", err)
		}
	}
	if n.net != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := n.net.stop(ctx, c.opts.StopGrace); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	for _, comp := range []*component{n.kubelet, n.containerd} {
		if comp == nil {
			continue
		}
		if err := comp.stop(c.opts.StopGrace); err != nil && !comp.exited() {
			errs = append(errs, err)
		}
	}
	if n.started {
		if err := sweepNode(n.tools.ip, []string{n.dir}, c.opts.Logf); err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
		}
		if err := restoreIPForward(n.dir); err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
		}
		if n.net != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := cleanupKubeletChains(ctx, n.net.tools); err != nil {
				errs = append(errs, fmt.Errorf("sweep: %w", err))
			}
			if err := removeUplinkGuard(ctx, n.net.tools); err != nil {
				errs = append(errs, fmt.Errorf("sweep: %w", err))
			}
			cancel()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.registry.close(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := n.apiProxy.close(); err != nil {
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	if lerr := n.lock.release(err == nil); lerr != nil {
		err = errors.Join(err, lerr)
	}
	n.lock = nil
	if err != nil {
		return fmt.Errorf("real node %s: stop: %w", n.opts.Name, err)
	}
	c.opts.Logf("testcluster: real node %s stopped in %s", n.opts.Name, time.Since(begin).Round(time.Millisecond))
	return nil
}

// drainRealNode cordons the real node, deletes its pods with a one-second grace
// period and waits (up to StopGrace) until the kubelet has removed them. Jobs do
// not put replacements there: the node is cordoned.
func (c *Cluster) drainRealNode() error {
	name := c.node.opts.Name
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StopGrace+5*time.Second)
	defer cancel()
	_, err := c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType,
		[]byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("cordon %s: %w", name, err)
	}
	sel := metav1.ListOptions{FieldSelector: "spec.nodeName=" + name}
	pods, err := c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, sel)
	if err != nil {
		return fmt.Errorf("pods on %s: %w", name, err)
	}
	for _, p := range pods.Items {
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(1))})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	err = poll(ctx, c.node.kubelet, 200*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		pods, err := c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, sel)
		if err != nil {
			return false, err.Error(), nil
		}
		if len(pods.Items) > 0 {
			return false, fmt.Sprintf("%d pods left, e.g. %s/%s", len(pods.Items), pods.Items[0].Namespace, pods.Items[0].Name), nil
		}
		return true, "", nil
	})
	if err != nil {
		return fmt.Errorf("drain %s: %w", name, err)
	}
	return nil
}

// ResidentMemory returns the resident memory in bytes of the node's kubelet,
// containerd, kube-proxy, (while it runs) kube-router, local-path-provisioner
// and CoreDNS (the process of its pod), by name (empty for an attached
// cluster's node).
func (n *RealNode) ResidentMemory() map[string]int64 {
	out := map[string]int64{}
	comps := []*component{n.kubelet, n.containerd, n.provisioner}
	if n.net != nil {
		comps = append(comps, n.net.components()...)
	}
	for _, comp := range comps {
		if comp != nil && comp.cmd.Process != nil && !comp.exited() {
			out[comp.name] = rss(comp.cmd.Process.Pid)
		}
	}
	if n.kubelet != nil {
		if pid := nodeProcess(coreDNSBinMount + "/coredns"); pid > 0 {
			out["coredns"] = rss(pid)
		}
	}
	return out
}
