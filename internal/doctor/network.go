package doctor

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pcsync/pcsync/internal/netprobe"
	"github.com/pcsync/pcsync/pkg/config"
)

// NotEnforcedMessage is what doctor and the daemon say when a probe pod
// reached what the tenant's NetworkPolicies forbid.
const NotEnforcedMessage = "NetworkPolicies are not enforced on this cluster: agents are not isolated"

// NetworkOptions configure the network check (ProbeNetwork). Start from
// DefaultNetworkOptions; a zero or negative field takes its default.
type NetworkOptions struct {
	// Timeout bounds the probe pod, from its create to its report (an image
	// pull on a node that lacks pcsync's image included). Default 90s.
	Timeout time.Duration
	// ConnectTimeout bounds each connection attempt of the probe. Default
	// 3s.
	ConnectTimeout time.Duration
	// Settle is how long the probe waits before its first attempt, and
	// Attempts how often it tries each target, Interval apart: the last
	// attempt counts, so that an enforcer that writes a new pod's rules a
	// moment late (kube-router does) is not taken for none. Defaults 3s,
	// 3 and 2s.
	Settle   time.Duration
	Attempts int
	Interval time.Duration
	// KubeletPort is the port tried on the probe pod's own node IP. 0 (the
	// default): the kubelet ports the Nodes report
	// (status.daemonEndpoints.kubeletEndpoint.Port), of which only its own
	// node's counts.
	KubeletPort int
}

// DefaultNetworkOptions returns the defaults described on NetworkOptions.
func DefaultNetworkOptions() NetworkOptions {
	return NetworkOptions{Timeout: 90 * time.Second, ConnectTimeout: 3 * time.Second,
		Settle: 3 * time.Second, Attempts: 3, Interval: 2 * time.Second}
}

func (o *NetworkOptions) complete() {
	d := DefaultNetworkOptions()
	o.Timeout = cmp.Or(max(o.Timeout, 0), d.Timeout)
	o.ConnectTimeout = cmp.Or(max(o.ConnectTimeout, 0), d.ConnectTimeout)
	o.KubeletPort = max(o.KubeletPort, 0) // 0 is a setting here: the Nodes' ports
	o.Settle = cmp.Or(max(o.Settle, 0), d.Settle)
	o.Attempts = cmp.Or(max(o.Attempts, 0), d.Attempts)
	o.Interval = cmp.Or(max(o.Interval, 0), d.Interval)
}

// Verdict is the network check's conclusion.
type Verdict string

// The verdicts of the network check.
const (
	// Enforced: every target the tenant's policies forbid was refused, timed
	// out or unreachable.
	Enforced Verdict = "enforced"
	// NotEnforced: the probe connected to a target the policies forbid.
	NotEnforced Verdict = "not-enforced"
	// Unproven: the check could not tell (no tenant applied, the probe pod
	// never reported, a target gave an error); doctor fails closed on it.
	Unproven Verdict = "unproven"
)

// NetworkResult is the outcome of ProbeNetwork.
type NetworkResult struct {
	Verdict Verdict
	// Namespace is the tenant namespace the probe ran in ("" when none was
	// applied).
	Namespace string
	// Plugins names the cluster's network plugins as far as they can be
	// told (e.g. "kindnet (DaemonSet kube-system/kindnet)").
	Plugins []string
	// Targets are the probe's outcomes, each with what it is.
	Targets []Target
	// Reason says why the verdict is Unproven.
	Reason string
	// NoTenant: Unproven because no company's namespace is applied yet.
	NoTenant bool
}

// Target is one address the probe tried.
type Target struct {
	// What is "kubelet" or "API server".
	What string
	netprobe.Result
	// AllowedByPolicy: the tenant's policies allow it, so its outcome
	// proves nothing.
	AllowedByPolicy bool
	// Unverified says why a refusal, timeout or unreachable of this target
	// proves nothing (it is not known to be the kubelet's port); a
	// connection to it still shows the policies not enforced.
	Unverified string
}

func (t Target) String() string {
	s := fmt.Sprintf("%s (%s): %s", t.Target, t.What, t.Outcome)
	if t.Outcome != netprobe.Connected && t.Connected > 0 {
		// Rules that arrived after the pod started.
		s += fmt.Sprintf(" in the end (connected %d of %d attempts)", t.Connected, t.Attempts)
	}
	switch {
	case t.AllowedByPolicy:
		s += ", allowed by the tenant's policies: not evidence"
	case t.Unverified != "" && t.Outcome != netprobe.Connected:
		s += ", not evidence: " + t.Unverified
	case t.Outcome == netprobe.Failed:
		s += " (" + t.Detail + ")"
	}
	return s
}

// Message says what the result means, in one line.
func (r NetworkResult) Message() string {
	var targets []string
	for _, t := range r.Targets {
		targets = append(targets, t.String())
	}
	plugin := "network plugin: unknown (no known plugin's DaemonSet in " + strings.Join(pluginNamespaces, ", ") + ")"
	if len(r.Plugins) > 0 {
		plugin = "network plugin: " + strings.Join(r.Plugins, ", ")
	}
	where := "a probe pod labelled and hardened as an agent of namespace " + r.Namespace
	switch r.Verdict {
	case NotEnforced:
		var reached, others []string
		for _, t := range r.Targets {
			if t.Outcome == netprobe.Connected && !t.AllowedByPolicy {
				reached = append(reached, t.String())
			} else {
				others = append(others, t.String())
			}
		}
		s := fmt.Sprintf("%s: %s reached what the tenant's NetworkPolicies forbid: %s", NotEnforcedMessage, where, strings.Join(reached, "; "))
		if len(others) > 0 {
			s += " (and: " + strings.Join(others, "; ") + ")"
		}
		return s + "; " + plugin + "; install a plugin that enforces NetworkPolicies"
	case Enforced:
		return fmt.Sprintf("the tenant's NetworkPolicies are enforced: %s was kept from %s; %s", where, strings.Join(targets, "; "), plugin)
	}
	s := "not proven that NetworkPolicies are enforced: " + r.Reason
	if len(targets) > 0 {
		s += "; " + strings.Join(targets, "; ")
	}
	return s
}

// ProbeNetwork proves whether the cluster enforces the NetworkPolicies of
// the first company of m whose namespace is applied: a probe pod there,
// labelled and hardened as that company's agents, tries TCP connections
// its policies forbid — the kubelet port of its own node, and the API
// server's address from the EndpointSlice default/kubernetes when pcsync
// may read it — and the pod is deleted whatever happened.
func ProbeNetwork(ctx context.Context, cs kubernetes.Interface, m *config.Model, opts NetworkOptions) NetworkResult {
	opts.complete()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	c, ns, err := appliedCompany(ctx, cs, m)
	if err != nil {
		return NetworkResult{Verdict: Unproven, Reason: err.Error()}
	}
	if c == nil {
		return NetworkResult{Verdict: Unproven, NoTenant: true, Reason: "no company's namespace is applied yet (pcsync apply, or the daemon, creates them)"}
	}
	r := NetworkResult{Namespace: ns, Verdict: Unproven}
	policies, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.Reason = fmt.Sprintf("listing the NetworkPolicies of %s: %v", ns, err)
		return r
	}
	if len(policies.Items) == 0 {
		r.Reason = "namespace " + ns + " has no NetworkPolicy: apply the tenant (pcsync apply)"
		return r
	}
	sweepProbePods(ctx, cs, ns)
	api := apiServerTarget(ctx, cs)
	ports, why := kubeletPorts(ctx, cs, opts.KubeletPort)
	var targets []string
	if api != "" {
		targets = append(targets, api)
	}
	if len(ports) == 0 && len(targets) == 0 {
		r.Reason = "no target to probe: " + why + ", and the API server's address is unknown (EndpointSlice default/kubernetes)"
		return r
	}
	pod, err := buildProbePod(m, c, ns, ports, targets, opts)
	if err != nil {
		r.Reason = err.Error()
		return r
	}
	rep, last, err := runProbePod(ctx, cs, pod)
	r.Plugins = networkPlugins(context.WithoutCancel(ctx), cs)
	if err != nil {
		r.Reason = err.Error()
		return r
	}
	r.judge(rep, last, api, nodeKubeletPort(context.WithoutCancel(ctx), cs, last, opts.KubeletPort), policies.Items, pod.Labels)
	return r
}

// judge sets the verdict from the probe's report: a connection to a target
// the policies forbid shows them not enforced; each such target blocked
// shows them enforced, but a node port blocked counts only when it is the
// kubelet's (kubelet: its own node's, as its Node reports it).
func (r *NetworkResult) judge(rep netprobe.Report, pod *corev1.Pod, api string, kubelet kubeletPort,
	policies []networkingv1.NetworkPolicy, podLabels map[string]string) {
	evidence, connected := 0, 0
	var failed, unverified []string
	for _, res := range rep.Results {
		t := Target{What: "kubelet of the pod's node " + pod.Spec.NodeName, Result: res}
		ap, err := netip.ParseAddrPort(res.Target)
		switch {
		case res.Target == api:
			t.What = "API server"
		case kubelet.port == 0:
			t.Unverified = kubelet.why
		case err == nil && int(ap.Port()) != kubelet.port:
			t.Unverified = fmt.Sprintf("not the kubelet port of node %s (%d)", pod.Spec.NodeName, kubelet.port)
		}
		if err == nil {
			t.AllowedByPolicy = egressAllows(policies, podLabels, ap.Addr(), int(ap.Port()))
		}
		r.Targets = append(r.Targets, t)
		switch {
		case t.AllowedByPolicy:
			continue
		case res.Outcome == netprobe.Connected:
			connected++
		case t.Unverified != "":
			unverified = append(unverified, res.Target)
			continue
		case !res.Outcome.Blocked():
			failed = append(failed, res.Target)
		}
		evidence++
	}
	switch {
	case connected > 0:
		r.Verdict = NotEnforced
	case evidence == 0 && len(unverified) > 0:
		r.Reason = "no target the probe tried proves the policies enforced"
	case evidence == 0:
		r.Reason = "the tenant's policies allow every target the probe tried"
	case len(failed) > 0:
		r.Reason = "the probe could not try " + strings.Join(failed, ", ")
	default:
		r.Verdict = Enforced
	}
}

// appliedCompany returns the first company of m whose namespace exists,
// and that namespace; nil when none does.
func appliedCompany(ctx context.Context, cs kubernetes.Interface, m *config.Model) (*config.Company, string, error) {
	for i := range m.Companies {
		c := &m.Companies[i]
		ns := m.Namespace(c)
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case err == nil:
			return c, ns, nil
		case !apierrors.IsNotFound(err):
			return nil, "", fmt.Errorf("Namespace/%s get failed: %w", ns, err)
		}
	}
	return nil, "", nil
}

// apiServerTarget returns HOST:PORT of the API server from the
// EndpointSlice default/kubernetes (its first ready address that is not
// loopback, and its https port), or "" when there is none or pcsync may not
// read it.
func apiServerTarget(ctx context.Context, cs kubernetes.Interface) string {
	s, err := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || len(s.Ports) == 0 || s.Ports[0].Port == nil {
		return ""
	}
	port := int(*s.Ports[0].Port)
	for _, p := range s.Ports {
		if p.Name != nil && *p.Name == "https" && p.Port != nil {
			port = int(*p.Port)
		}
	}
	if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
		return ""
	}
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && !*e.Conditions.Ready {
			continue
		}
		for _, a := range e.Addresses {
			if apiServerAddress(a) {
				return net.JoinHostPort(a, strconv.Itoa(port))
			}
		}
	}
	return ""
}

// apiServerAddress says whether a pod can try a as the API server: a
// loopback address (a control plane that advertises 127.0.0.1) is the
// pod's own, where a refusal proves nothing.
func apiServerAddress(a string) bool {
	ip, err := netip.ParseAddr(a)
	return err == nil && !ip.IsLoopback() && !ip.IsUnspecified()
}

// sweepProbePods deletes the ended probe pods of ns: those of a doctor or
// daemon killed before it could delete its own (activeDeadlineSeconds ends
// them). A probe pod still running may be another's, and is left alone.
func sweepProbePods(ctx context.Context, cs kubernetes.Interface, ns string) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelProbe + "=" + ProbeLabelNetwork})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			_ = cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
		}
	}
}
