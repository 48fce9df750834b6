package agentenv

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// hostsTTL is how long Hosts keeps an address it found.
const hostsTTL = time.Minute

// Hosts finds the addresses of the hosts an agent pod without cluster DNS
// reaches directly (NoClusterDNS), for its /etc/hosts: a Service's name
// (<name>.<namespace>.svc, with or without the cluster domain) by the
// Service's ClusterIP, read from the API server; any other name by the
// daemon's own resolver. Found addresses are kept for a minute.
type Hosts struct {
	client kubernetes.Interface
	lookup func(ctx context.Context, host string) ([]string, error)

	mu    sync.Mutex
	found map[string]hostsEntry
}

type hostsEntry struct {
	ips []string
	at  time.Time
}

// NewHosts returns a Hosts that reads Services with client.
func NewHosts(client kubernetes.Interface) *Hosts {
	return &Hosts{client: client, lookup: net.DefaultResolver.LookupHost, found: map[string]hostsEntry{}}
}

// Aliases are the /etc/hosts entries of rawURL's host: none for an IP
// address or an empty URL.
func (h *Hosts) Aliases(ctx context.Context, rawURL string) ([]corev1.HostAlias, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return nil, nil
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if _, err := netip.ParseAddr(host); err == nil || host == "localhost" {
		return nil, nil
	}
	ips, err := h.addresses(ctx, host)
	if err != nil {
		return nil, err
	}
	out := make([]corev1.HostAlias, len(ips))
	for i, ip := range ips {
		out[i] = corev1.HostAlias{IP: ip, Hostnames: []string{host}}
	}
	return out, nil
}

func (h *Hosts) addresses(ctx context.Context, host string) ([]string, error) {
	h.mu.Lock()
	e, ok := h.found[host]
	h.mu.Unlock()
	if ok && time.Since(e.at) < hostsTTL {
		return e.ips, nil
	}
	var ips []string
	var err error
	if name, ns, ok := serviceName(host); ok {
		ips, err = h.serviceIP(ctx, ns, name)
	} else if ips, err = h.lookup(ctx, host); err != nil {
		err = fmt.Errorf("host %s: %w", host, err)
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(ips)
	h.mu.Lock()
	h.found[host] = hostsEntry{ips: ips, at: time.Now()}
	h.mu.Unlock()
	return ips, nil
}

func (h *Hosts) serviceIP(ctx context.Context, ns, name string) ([]string, error) {
	s, err := h.client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("Service/%s/%s: %w", ns, name, err)
	}
	ips := slices.DeleteFunc(slices.Clone(s.Spec.ClusterIPs), func(ip string) bool { return ip == corev1.ClusterIPNone })
	if len(ips) == 0 && s.Spec.ClusterIP != "" && s.Spec.ClusterIP != corev1.ClusterIPNone {
		ips = []string{s.Spec.ClusterIP}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("Service/%s/%s: no ClusterIP (a headless Service cannot be given to a pod without DNS)", ns, name)
	}
	return ips, nil
}

// serviceName splits a Service's DNS name, <name>.<namespace>.svc[.<domain>].
func serviceName(host string) (name, ns string, ok bool) {
	parts := strings.Split(host, ".")
	if len(parts) < 3 || parts[2] != "svc" || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}
