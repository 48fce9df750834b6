// Package introspect lets pcsync read its own pod when it runs in a
// cluster, so that agent Jobs can inherit what the platform configured for
// pcsync itself: the image pull secrets of a private registry mirror and
// the pod's DNS configuration. Settings spec.inherit opts out.
package introspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pcsync/pcsync/pkg/config"
)

// DefaultNamespaceFile is where a pod's service-account mount holds its
// namespace.
const DefaultNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Options configure Detect. Start from DefaultOptions.
type Options struct {
	// NamespaceFile holds the pod's namespace; when it does not exist,
	// pcsync does not run in a pod. Default DefaultNamespaceFile.
	NamespaceFile string
	// Getenv reads the environment: POD_NAME (the downward API), else
	// HOSTNAME, names the pod. Default os.Getenv.
	Getenv func(string) string
	// Hostname is the last resort for the pod name. Default os.Hostname.
	Hostname func() (string, error)
}

// DefaultOptions returns the defaults described on Options.
func DefaultOptions() Options {
	return Options{NamespaceFile: DefaultNamespaceFile, Getenv: os.Getenv, Hostname: os.Hostname}
}

// complete fills the zero fields with DefaultOptions'.
func (o *Options) complete() {
	d := DefaultOptions()
	o.NamespaceFile = cmp.Or(o.NamespaceFile, d.NamespaceFile)
	if o.Getenv == nil {
		o.Getenv = d.Getenv
	}
	if o.Hostname == nil {
		o.Hostname = d.Hostname
	}
}

// Self is what pcsync found out about its own pod.
type Self struct {
	// InCluster is false when pcsync does not run in a pod (no
	// service-account namespace file); the other fields are then empty.
	InCluster bool
	// Namespace and Name identify the pod.
	Namespace, Name string
	// ServiceAccount is the pod's service account.
	ServiceAccount string
	// ImagePullSecrets are the names of the pod's image pull secrets.
	ImagePullSecrets []string
	// Image is the image pcsync runs from: that of the pod's container
	// named "pcsync", else of its first container.
	Image string
	// DNSPolicy and DNSConfig are the pod's DNS settings.
	DNSPolicy corev1.DNSPolicy
	DNSConfig *corev1.PodDNSConfig
}

// Detect reads the pod pcsync runs in. Outside a pod it returns a Self
// with InCluster false and no error. Inside, a pod it cannot read (the
// name is wrong, RBAC lacks get on pods) is an error that says so.
func Detect(ctx context.Context, client kubernetes.Interface, opts Options) (*Self, error) {
	opts.complete()
	b, err := os.ReadFile(opts.NamespaceFile)
	if errors.Is(err, os.ErrNotExist) {
		return &Self{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("introspect: pod namespace: %w", err)
	}
	ns := strings.TrimSpace(string(b))
	if ns == "" {
		return nil, fmt.Errorf("introspect: pod namespace: %s is empty", opts.NamespaceFile)
	}
	name := strings.TrimSpace(opts.Getenv("POD_NAME"))
	if name == "" {
		name = strings.TrimSpace(opts.Getenv("HOSTNAME"))
	}
	if name == "" {
		if name, err = opts.Hostname(); err != nil {
			return nil, fmt.Errorf("introspect: pod name: %w", err)
		}
	}
	pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("introspect: reading its own pod %s/%s (set POD_NAME from the downward API "+
			"if the host name is not the pod name; pcsync needs get on pods in its namespace): %w", ns, name, err)
	}
	s := &Self{InCluster: true, Namespace: ns, Name: name, ServiceAccount: pod.Spec.ServiceAccountName,
		DNSPolicy: pod.Spec.DNSPolicy, DNSConfig: pod.Spec.DNSConfig.DeepCopy()}
	for i, c := range pod.Spec.Containers {
		if i == 0 || c.Name == "pcsync" {
			s.Image = c.Image
		}
	}
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name != "" {
			s.ImagePullSecrets = append(s.ImagePullSecrets, ref.Name)
		}
	}
	return s, nil
}

// Inheritance is what agent pods take over from pcsync's pod.
type Inheritance struct {
	// ImagePullSecrets are added after the config's own pull secrets
	// (duplicates dropped).
	ImagePullSecrets []string
	// DNSConfig, when not nil, becomes the agent pods' dnsConfig.
	DNSConfig *corev1.PodDNSConfig
	// DNSPolicy, when not empty, becomes the agent pods' dnsPolicy: "None"
	// when pcsync's pod uses None (its dnsConfig is then the whole DNS
	// configuration), else empty (the default, ClusterFirst).
	DNSPolicy corev1.DNSPolicy
}

// Empty says whether nothing is inherited.
func (i Inheritance) Empty() bool {
	return len(i.ImagePullSecrets) == 0 && i.DNSConfig == nil && i.DNSPolicy == ""
}

// Inherit returns what agent pods inherit from s under the config's
// Settings spec.inherit. A nil or out-of-cluster Self gives nothing.
func (s *Self) Inherit(in config.Inherit) Inheritance {
	var out Inheritance
	if s == nil || !s.InCluster {
		return out
	}
	if in.ImagePullSecrets {
		out.ImagePullSecrets = slices.Clone(s.ImagePullSecrets)
	}
	if in.DNSConfig && s.DNSConfig != nil {
		out.DNSConfig = s.DNSConfig.DeepCopy()
		if s.DNSPolicy == corev1.DNSNone {
			out.DNSPolicy = corev1.DNSNone
		}
	}
	return out
}

// MergePullSecrets returns own followed by the inherited secrets that own
// does not name.
func MergePullSecrets(own, inherited []string) []string {
	out := slices.Clone(own)
	for _, s := range inherited {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Describe returns "what was inherited" lines for pcsync doctor.
func (i Inheritance) Describe() []string {
	var out []string
	if len(i.ImagePullSecrets) > 0 {
		out = append(out, "imagePullSecrets: "+strings.Join(i.ImagePullSecrets, ", "))
	}
	if c := i.DNSConfig; c != nil {
		var parts []string
		if i.DNSPolicy != "" {
			parts = append(parts, "policy "+string(i.DNSPolicy))
		}
		if len(c.Nameservers) > 0 {
			parts = append(parts, "nameservers "+strings.Join(c.Nameservers, " "))
		}
		if len(c.Searches) > 0 {
			parts = append(parts, "searches "+strings.Join(c.Searches, " "))
		}
		for _, o := range c.Options {
			v := o.Name
			if o.Value != nil {
				v += "=" + *o.Value
			}
			parts = append(parts, "option "+v)
		}
		out = append(out, "dnsConfig: "+strings.Join(parts, ", "))
	}
	return out
}
