package config

import (
	"cmp"
	"strconv"
	"strings"
	"time"

	"github.com/pcsync/pcsync/pkg/images"
)

// Company returns the company with that slug.
func (m *Model) Company(slug string) (*Company, bool) {
	for i := range m.Companies {
		if m.Companies[i].Metadata.Name == slug {
			return &m.Companies[i], true
		}
	}
	return nil, false
}

// CompanyByID returns the company whose spec.id (its Paperclip company id)
// is id.
func (m *Model) CompanyByID(id string) (*Company, bool) {
	for i := range m.Companies {
		if m.Companies[i].Spec.ID == id {
			return &m.Companies[i], true
		}
	}
	return nil, false
}

// ServerURL is the URL agent pods call the Paperclip server at: Settings
// spec.server.url, else http://{app}.{namespace}.svc:{port}, where app is
// spec.server.podSelector's "app" label (default "paperclip-server"): a
// Service named like the server's pods.
func (m *Model) ServerURL() string {
	s := m.Settings.Spec.Server
	if s.URL != "" {
		return s.URL
	}
	app := s.PodSelector["app"]
	if app == "" {
		app = "paperclip-server"
	}
	ns := s.Namespace
	if ns == "" {
		ns = "paperclip"
	}
	port := s.Port
	if port == 0 {
		port = 3100
	}
	return "http://" + app + "." + ns + ".svc:" + strconv.Itoa(port)
}

// Namespace is the tenant namespace of a company: {namespacePrefix}{slug}.
func (m *Model) Namespace(c *Company) string {
	return m.Settings.Spec.NamespacePrefix + c.Metadata.Name
}

// EgressMode is the company's egress mode, else the Settings one.
func (m *Model) EgressMode(c *Company) EgressMode {
	if c.Spec.Egress.Mode != "" {
		return c.Spec.Egress.Mode
	}
	return m.Settings.Spec.Egress.Mode
}

// ProxyIdle is how long the company's egress proxy stays up with nothing
// to serve (its spec.egress.proxyIdleSec, else the Settings'); 0: always.
func (m *Model) ProxyIdle(c *Company) time.Duration {
	sec := m.Settings.Spec.Egress.ProxyIdleSec
	if c.Spec.Egress.ProxyIdleSec != nil {
		sec = *c.Spec.Egress.ProxyIdleSec
	}
	return time.Duration(sec) * time.Second
}

// EgressProxyResources are the requests and limits of the egress proxy's
// container (egress mode proxy): within the default LimitRange (its
// minimum requests are 100m and 128Mi) and counted against the tenant's
// quota like any pod of the namespace.
func EgressProxyResources() Resources {
	q := func(s string) *Quantity { v := Quantity(s); return &v }
	return Resources{
		Requests: &ResourceList{CPU: q("100m"), Memory: q("128Mi"), EphemeralStorage: q("64Mi")},
		Limits:   &ResourceList{CPU: q("500m"), Memory: q("256Mi"), EphemeralStorage: q("256Mi")},
	}
}

// SandboxHelperResources are the requests and limits of the helper
// container a sandbox lease pod of an image without pcsync carries
// (pkg/sandbox), before the tenant LimitRange's min raises them.
func SandboxHelperResources() Resources {
	q := func(s string) *Quantity { v := Quantity(s); return &v }
	return Resources{
		Requests: &ResourceList{CPU: q("100m"), Memory: q("128Mi"), EphemeralStorage: q("64Mi")},
		Limits:   &ResourceList{CPU: q("500m"), Memory: q("128Mi"), EphemeralStorage: q("64Mi")},
	}
}

// Adapter returns the effective defaults of an adapter type: the built-in
// ones, each field replaced by Settings spec.adapters when given. A built-in
// image is one of pcsync's own (BuiltinImage), named in ImageRegistry with
// the tag of Model.Images.
func (m *Model) Adapter(t AdapterType) AdapterDefaults {
	d := m.Builtin[t]
	d.Image = m.BuiltinImage(d.Image)
	if o, ok := m.Settings.Spec.Adapters[t]; ok {
		if o.Image != nil {
			d.Image = *o.Image
		}
		if o.EnvKeys != nil {
			d.EnvKeys = o.EnvKeys
		}
		if o.AllowFQDNs != nil {
			d.AllowFQDNs = o.AllowFQDNs
		}
		if o.Command != nil {
			d.Command = o.Command
		}
	}
	return d
}

// ImageRegistry is the registry of pcsync's own images: Settings
// spec.images.registry, else Model.Images.Registry, else "" (unknown).
func (m *Model) ImageRegistry() string {
	return strings.TrimSuffix(cmp.Or(m.Settings.Spec.Images.Registry, m.Images.Registry), "/")
}

// BuiltinImage returns the reference of one of pcsync's own images by name
// (package images: "pcsync-agent-claude", "pcsync"): in ImageRegistry, with
// Model.Images' tag. With no registry known, the bare name:tag, which a
// preflight (pcsync doctor) reports.
func (m *Model) BuiltinImage(name string) string {
	if name == "" {
		return ""
	}
	tag := cmp.Or(m.Images.Tag, DefaultImageTag)
	if r := m.ImageRegistry(); r != "" {
		return images.Ref(r, name, tag)
	}
	return name + ":" + tag
}

// ImageHasServer reports whether image is one of pcsync's own built-in
// images (BuiltinImage of an adapter type's name, or of images.Pcsync),
// which hold the pcsync binary at images.ServerPath.
func (m *Model) ImageHasServer(image string) bool {
	if image == "" {
		return false
	}
	if image == m.BuiltinImage(images.Pcsync) {
		return true
	}
	for _, d := range m.Builtin {
		if image == m.BuiltinImage(d.Image) {
			return true
		}
	}
	return false
}

// WantsFQDNs reports whether a company's egress names hosts: its own
// egress.allowFqdns, or the effective allowFqdns of its agents' adapters.
func (m *Model) WantsFQDNs(c *Company) bool {
	if len(c.Spec.Egress.AllowFQDNs) > 0 {
		return true
	}
	for i := range c.Spec.Agents {
		if len(m.Adapter(c.Spec.Agents[i].Adapter).AllowFQDNs) > 0 {
			return true
		}
	}
	return false
}

// AgentImage is the image an agent's pods run: its own image, else its
// adapter's effective image.
func (m *Model) AgentImage(a *Agent) string {
	if a.Image != "" {
		return a.Image
	}
	return m.Adapter(a.Adapter).Image
}

// WarmPoolImage is the image of a warm pool's members: its own, or its
// adapter type's.
func (m *Model) WarmPoolImage(p WarmPool) string {
	if p.Image != "" {
		return p.Image
	}
	return m.Adapter(p.AdapterType).Image
}

// Quota is the company's effective quota: Settings defaults, overridden
// field by field by the company.
func (m *Model) Quota(c *Company) Quota {
	q := m.Settings.Spec.Defaults.Quota
	if o := c.Spec.Quota; o != nil {
		q.Pods = pick(o.Pods, q.Pods)
		q.RequestsCPU = pick(o.RequestsCPU, q.RequestsCPU)
		q.RequestsMemory = pick(o.RequestsMemory, q.RequestsMemory)
		q.LimitsCPU = pick(o.LimitsCPU, q.LimitsCPU)
		q.LimitsMemory = pick(o.LimitsMemory, q.LimitsMemory)
		q.LimitsEphemeralStorage = pick(o.LimitsEphemeralStorage, q.LimitsEphemeralStorage)
		q.PersistentVolumeClaims = pick(o.PersistentVolumeClaims, q.PersistentVolumeClaims)
		q.RequestsStorage = pick(o.RequestsStorage, q.RequestsStorage)
	}
	return q
}

// LimitRange is the company's effective container LimitRange.
func (m *Model) LimitRange(c *Company) LimitRange {
	l := m.Settings.Spec.Defaults.LimitRange
	if o := c.Spec.LimitRange; o != nil {
		l.Max = mergeList(o.Max, l.Max)
		l.Min = mergeList(o.Min, l.Min)
		l.Default = mergeList(o.Default, l.Default)
		l.DefaultRequest = mergeList(o.DefaultRequest, l.DefaultRequest)
	}
	return l
}

// Jobs is the company's effective Job settings.
func (m *Model) Jobs(c *Company) Jobs {
	j := m.Settings.Spec.Defaults.Jobs
	if o := c.Spec.Jobs; o != nil {
		j.TTLSecondsAfterFinished = pick(o.TTLSecondsAfterFinished, j.TTLSecondsAfterFinished)
		j.ActiveDeadlineSeconds = pick(o.ActiveDeadlineSeconds, j.ActiveDeadlineSeconds)
		j.Retain = pick(o.Retain, j.Retain)
		j.EmptyDirSizeLimit = pick(o.EmptyDirSizeLimit, j.EmptyDirSizeLimit)
	}
	return j
}

// AgentResources is the agent container's effective resources: Settings
// defaults, overridden field by field by the agent.
func (m *Model) AgentResources(a *Agent) Resources {
	r := m.Settings.Spec.Defaults.Resources
	if o := a.Resources; o != nil {
		r.Requests = mergeList(o.Requests, r.Requests)
		r.Limits = mergeList(o.Limits, r.Limits)
	}
	return r
}

// ImagePullSecrets are the pull secrets of a company's agent pods: the
// Settings ones, then the company's, without duplicates.
func (m *Model) ImagePullSecrets(c *Company) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range append(append([]string{}, m.Settings.Spec.Images.PullSecrets...), c.Spec.ImagePullSecrets...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func pick[T any](override, base *T) *T {
	if override != nil {
		return override
	}
	return base
}

func mergeList(override, base *ResourceList) *ResourceList {
	if override == nil {
		return base
	}
	if base == nil {
		return override
	}
	out := *base
	out.CPU = pick(override.CPU, base.CPU)
	out.Memory = pick(override.Memory, base.Memory)
	out.EphemeralStorage = pick(override.EphemeralStorage, base.EphemeralStorage)
	return &out
}

// ImageAllowed reports whether a pod may run image: it is the effective
// image of one of the config's adapter types (Settings spec.adapters or the
// built-in default), or it matches a glob of Settings spec.images.allowList.
func (m *Model) ImageAllowed(image string) bool {
	if image == "" {
		return false
	}
	for t := range m.Builtin {
		if m.Adapter(t).Image == image {
			return true
		}
	}
	return imageAllowed(image, m.Settings.Spec.Images.AllowList)
}
