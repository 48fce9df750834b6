package config

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/pcsync/pcsync/internal/lib/redact"
	"github.com/pcsync/pcsync/pkg/adapters"
)

// APIVersion is the apiVersion of every pcsync document.
const APIVersion = "pcsync.io/v1alpha1"

// Model is a loaded, validated config directory with the schema's defaults
// filled in. It is read-only once returned by Load.
type Model struct {
	// Dir is the config directory the model was loaded from.
	Dir string
	// Settings is the Settings document, or the schema's defaults when the
	// directory has none.
	Settings Settings
	// Companies are sorted by slug.
	Companies []Company
	// Builtin holds the schema's built-in adapter defaults, before Settings
	// spec.adapters overrides; use Adapter for the effective values. Their
	// images are names of pcsync's own images (package images), which
	// Adapter places in a registry with a tag.
	Builtin map[AdapterType]AdapterDefaults
	// Images is where pcsync's own images are when Settings
	// spec.images.registry does not say (LoadOptions.Images).
	Images ImageDefaults
	// Warnings are findings that do not make the config invalid (for
	// example FQDNs wanted in standard egress mode, which cannot enforce
	// them).
	Warnings []Warning
}

// Empty reports whether the config holds no document: no Settings and no
// Company (an empty directory, or files of comments).
func (m *Model) Empty() bool { return !m.HasSettings() && len(m.Companies) == 0 }

// HasSettings reports whether a Settings document was loaded, rather than
// the schema's defaults.
func (m *Model) HasSettings() bool { return m.Settings.Source != (Position{}) }

// Warning is a positioned finding that does not stop validation.
type Warning struct {
	Pos     Position
	Field   string
	Message string
}

// String formats the warning like an error line: path:line:col: field: message.
func (w Warning) String() string { return formatLine(w.Pos, w.Field, w.Message) }

// Position is a place in a config file; Line and Column start at 1.
type Position struct {
	File   string
	Line   int
	Column int
}

// String renders "file:line:col", leaving out what is unknown.
func (p Position) String() string {
	switch {
	case p.File == "":
		return "-"
	case p.Line == 0:
		return p.File
	default:
		return p.File + ":" + strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Column)
	}
}

func formatLine(p Position, field, msg string) string {
	if field == "" {
		return fmt.Sprintf("%s: %s", p, msg)
	}
	return fmt.Sprintf("%s: %s: %s", p, field, msg)
}

// Metadata is the metadata of a pcsync document.
type Metadata struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Settings is the fleet-wide configuration document.
type Settings struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   Metadata     `json:"metadata"`
	Spec       SettingsSpec `json:"spec"`
	// Source is where the document starts; zero when defaulted.
	Source Position `json:"-"`
}

// SettingsSpec is Settings.spec; see schema/settings.cue for each field.
type SettingsSpec struct {
	NamespacePrefix string                          `json:"namespacePrefix"`
	Server          Server                          `json:"server"`
	Pcsync          PcsyncSettings                  `json:"pcsync"`
	Paperclip       *PaperclipSettings              `json:"paperclip,omitempty"`
	Egress          SettingsEgress                  `json:"egress"`
	Images          Images                          `json:"images"`
	Inherit         Inherit                         `json:"inherit"`
	Defaults        Defaults                        `json:"defaults"`
	Adapters        map[AdapterType]AdapterOverride `json:"adapters"`
	Patches         []Patch                         `json:"patches"`
	// AllowUnsafePatches are the tenant hardenings that patches may weaken
	// in every tenant.
	AllowUnsafePatches []UnsafePatch `json:"allowUnsafePatches"`
}

// UnsafePatch names a tenant hardening that patches may weaken only when
// the config allows it (schema #UnsafePatch).
type UnsafePatch string

// The tenant hardenings that pcsync render checks after patches.
const (
	// UnsafePodSecurity: the Namespace's Pod Security labels stay restricted.
	UnsafePodSecurity UnsafePatch = "podSecurity"
	// UnsafeNetworkPolicy: the deny-all NetworkPolicy stays and denies all.
	UnsafeNetworkPolicy UnsafePatch = "networkPolicy"
	// UnsafeRBAC: the tenant Role and RoleBinding grant no more than the
	// baseline.
	UnsafeRBAC UnsafePatch = "rbac"
	// UnsafeObjectIdentity: every tenant object keeps its apiVersion, kind,
	// name and namespace, and none is removed.
	UnsafeObjectIdentity UnsafePatch = "objectIdentity"
)

// AllowedUnsafePatches are the hardenings that patches may weaken in
// company c: those of Settings and of the company.
func (m *Model) AllowedUnsafePatches(c *Company) []UnsafePatch {
	var out []UnsafePatch
	for _, u := range append(slices.Clone(m.Settings.Spec.AllowUnsafePatches), c.Spec.AllowUnsafePatches...) {
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

// Server locates the Paperclip server that agents call back to.
type Server struct {
	Namespace   string            `json:"namespace"`
	PodSelector map[string]string `json:"podSelector"`
	Port        int               `json:"port"`
	// URL is where agent pods call Paperclip; empty means the default
	// (Model.ServerURL).
	URL string `json:"url,omitempty"`
}

// PcsyncSettings is Settings.spec.pcsync: pcsync itself, as the tenants'
// RBAC names it.
type PcsyncSettings struct {
	// ServiceAccount is the ServiceAccount pcsync runs as; every tenant's
	// pcsync RoleBinding grants it the per-tenant rights.
	ServiceAccount ServiceAccountRef `json:"serviceAccount"`
}

// ServiceAccountRef names a ServiceAccount.
type ServiceAccountRef struct {
	// Name is the ServiceAccount's name.
	Name string `json:"name"`
	// Namespace is its namespace.
	Namespace string `json:"namespace"`
}

// PaperclipSettings says where Paperclip's API is, for the companies whose
// agents pcsync manages there (CompanySpec.Paperclip.Manage).
type PaperclipSettings struct {
	// URL is the base URL of Paperclip's API.
	URL string `json:"url"`
	// TokenEnv names the environment variable holding a board API key.
	TokenEnv string `json:"tokenEnv,omitempty"`
	// TokenFile is the absolute path of a file holding a board API key.
	TokenFile string `json:"tokenFile,omitempty"`
	// SpoolDir is the spool directory as the Paperclip server sees it.
	SpoolDir string `json:"spoolDir"`
}

// EgressMode selects how egress is enforced.
type EgressMode string

// The egress modes.
const (
	EgressProxy    EgressMode = "proxy"
	EgressStandard EgressMode = "standard"
	EgressCilium   EgressMode = "cilium"
)

// SettingsEgress is Settings.spec.egress.
type SettingsEgress struct {
	Mode EgressMode `json:"mode"`
	// MetricsNamespace is the namespace whose pods may scrape the egress
	// proxies' /metrics (egress mode proxy).
	MetricsNamespace string `json:"metricsNamespace"`
	// ProxyIdleSec is how long an egress proxy with nothing to serve stays
	// up before its Deployment is scaled to zero; 0 keeps it up.
	ProxyIdleSec int `json:"proxyIdleSec"`
}

// ImageDefaults is where pcsync's own images (the built-in agent images
// and pcsync's) are found when the config does not say.
type ImageDefaults struct {
	// Registry is host[:port][/org] of pcsync's images: the registry of
	// the image pcsync itself runs from, when it runs in a cluster. Empty
	// when unknown; Settings spec.images.registry wins.
	Registry string
	// Tag is their tag: pcsync's version, or the tag of the image pcsync
	// runs from.
	Tag string
}

// Images is Settings.spec.images.
type Images struct {
	Registry    string   `json:"registry,omitempty"`
	AllowList   []string `json:"allowList"`
	PullSecrets []string `json:"pullSecrets"`
}

// Inherit is Settings.spec.inherit: what agent Jobs take over from
// pcsync's own pod when pcsync runs in a cluster.
type Inherit struct {
	// ImagePullSecrets gives agent pods the imagePullSecrets of pcsync's
	// pod, after the config's own.
	ImagePullSecrets bool `json:"imagePullSecrets"`
	// DNSConfig gives agent pods the dnsConfig of pcsync's pod.
	DNSConfig bool `json:"dnsConfig"`
}

// Defaults is Settings.spec.defaults: what every company gets unless it
// overrides a field.
type Defaults struct {
	Quota      Quota      `json:"quota"`
	LimitRange LimitRange `json:"limitRange"`
	Jobs       Jobs       `json:"jobs"`
	Resources  Resources  `json:"resources"`
}

// Quantity is a Kubernetes resource quantity as written in the config
// ("250m", "2Gi", or a bare number).
type Quantity string

// UnmarshalJSON accepts a JSON string or number.
func (q *Quantity) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*q = Quantity(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("quantity %s: %w", b, err)
	}
	*q = Quantity(n.String())
	return nil
}

// Quota is a company's ResourceQuota. Nil fields are unset (an override
// that leaves the default in place).
type Quota struct {
	Pods           *int      `json:"pods,omitempty"`
	RequestsCPU    *Quantity `json:"requestsCpu,omitempty"`
	RequestsMemory *Quantity `json:"requestsMemory,omitempty"`
	LimitsCPU      *Quantity `json:"limitsCpu,omitempty"`
	LimitsMemory   *Quantity `json:"limitsMemory,omitempty"`
	// LimitsEphemeralStorage is limits.ephemeral-storage.
	LimitsEphemeralStorage *Quantity `json:"limitsEphemeralStorage,omitempty"`
	// PersistentVolumeClaims is persistentvolumeclaims: the claims the
	// tenant may hold (suspended leases' workspaces, sessions).
	PersistentVolumeClaims *int `json:"persistentVolumeClaims,omitempty"`
	// RequestsStorage is requests.storage: the sum of its claims' sizes.
	RequestsStorage *Quantity `json:"requestsStorage,omitempty"`
}

// ResourceList is CPU, memory and ephemeral storage; nil fields are unset.
type ResourceList struct {
	CPU              *Quantity `json:"cpu,omitempty"`
	Memory           *Quantity `json:"memory,omitempty"`
	EphemeralStorage *Quantity `json:"ephemeralStorage,omitempty"`
}

// LimitRange is a company's container LimitRange.
type LimitRange struct {
	Max            *ResourceList `json:"max,omitempty"`
	Min            *ResourceList `json:"min,omitempty"`
	Default        *ResourceList `json:"default,omitempty"`
	DefaultRequest *ResourceList `json:"defaultRequest,omitempty"`
}

// Jobs says how agent Jobs are run and kept.
type Jobs struct {
	TTLSecondsAfterFinished *int  `json:"ttlSecondsAfterFinished,omitempty"`
	ActiveDeadlineSeconds   *int  `json:"activeDeadlineSeconds,omitempty"`
	Retain                  *bool `json:"retain,omitempty"`
	// EmptyDirSizeLimit is the sizeLimit of each emptyDir of an agent pod.
	EmptyDirSizeLimit *Quantity `json:"emptyDirSizeLimit,omitempty"`
}

// Resources are container requests and limits.
type Resources struct {
	Requests *ResourceList `json:"requests,omitempty"`
	Limits   *ResourceList `json:"limits,omitempty"`
}

// AdapterType names an agent CLI integration. It is pkg/adapters' type:
// that package holds the one list of names (adapters.Types), and the
// schema's #AdapterType is generated from it (go generate ./schema).
type AdapterType = adapters.Type

// AdapterDefaults is what pcsync needs of an adapter type.
type AdapterDefaults struct {
	Image      string   `json:"image"`
	EnvKeys    []string `json:"envKeys"`
	AllowFQDNs []string `json:"allowFqdns"`
	Command    []string `json:"command"`
}

// AdapterOverride replaces built-in adapter defaults field by field.
type AdapterOverride struct {
	Image      *string  `json:"image,omitempty"`
	EnvKeys    []string `json:"envKeys,omitempty"`
	AllowFQDNs []string `json:"allowFqdns,omitempty"`
	Command    []string `json:"command,omitempty"`
}

// Patch is a kustomize patches entry. Path, when set, was resolved by the
// loader: Patch then holds the file's content and Path the file it came from.
type Patch struct {
	Patch   string        `json:"patch,omitempty"`
	Path    string        `json:"path,omitempty"`
	Target  *PatchTarget  `json:"target,omitempty"`
	Options *PatchOptions `json:"options,omitempty"`
	// Source is where the patch entry is declared, for errors that
	// applying it gives.
	Source Position `json:"-"`
}

// PatchTarget selects the objects a patch applies to.
type PatchTarget struct {
	Group              string `json:"group,omitempty"`
	Version            string `json:"version,omitempty"`
	Kind               string `json:"kind,omitempty"`
	Name               string `json:"name,omitempty"`
	Namespace          string `json:"namespace,omitempty"`
	LabelSelector      string `json:"labelSelector,omitempty"`
	AnnotationSelector string `json:"annotationSelector,omitempty"`
}

// PatchOptions are kustomize's patch options.
type PatchOptions struct {
	AllowNameChange bool `json:"allowNameChange,omitempty"`
	AllowKindChange bool `json:"allowKindChange,omitempty"`
}

// Company is one tenant.
type Company struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   Metadata    `json:"metadata"`
	Spec       CompanySpec `json:"spec"`
	// Source is where the document starts.
	Source Position `json:"-"`
}

// Slug is the company's metadata.name.
func (c *Company) Slug() string { return c.Metadata.Name }

// Agent returns the agent of that name.
func (c *Company) Agent(name string) (*Agent, bool) {
	for i := range c.Spec.Agents {
		if c.Spec.Agents[i].Name == name {
			return &c.Spec.Agents[i], true
		}
	}
	return nil, false
}

// CredentialsUsedBy returns the company's credentials (spec.credentials)
// whose provider the CLI of adapter type t uses, and its GitHub and
// header ones (any agent's tools use them), in their declared order.
func (c *Company) CredentialsUsedBy(t adapters.Type) []Credential {
	uses := adapters.Providers(t)
	var out []Credential
	for _, cr := range c.Spec.Credentials {
		if cr.Provider == adapters.ProviderGitHub || cr.Provider == adapters.ProviderHeader || slices.Contains(uses, cr.Provider) {
			out = append(out, cr)
		}
	}
	return out
}

// CompanySpec is Company.spec; see schema/company.cue for each field.
type CompanySpec struct {
	ID                        string            `json:"id"`
	Suspend                   bool              `json:"suspend"`
	Egress                    CompanyEgress     `json:"egress"`
	Quota                     *Quota            `json:"quota,omitempty"`
	LimitRange                *LimitRange       `json:"limitRange,omitempty"`
	Jobs                      *Jobs             `json:"jobs,omitempty"`
	RuntimeClassName          string            `json:"runtimeClassName,omitempty"`
	ServiceAccountAnnotations map[string]string `json:"serviceAccountAnnotations,omitempty"`
	ImagePullSecrets          []string          `json:"imagePullSecrets,omitempty"`
	Sessions                  *Sessions         `json:"sessions,omitempty"`
	SecretRefs                []SecretRef       `json:"secretRefs"`
	Credentials               []Credential      `json:"credentials"`
	Budget                    *Budget           `json:"budget,omitempty"`
	Patches                   []Patch           `json:"patches"`
	Paperclip                 CompanyPaperclip  `json:"paperclip"`
	Sandbox                   *CompanySandbox   `json:"sandbox,omitempty"`
	AllowUnsafePatches        []UnsafePatch     `json:"allowUnsafePatches"`
	Agents                    []Agent           `json:"agents"`
}

// CompanyPaperclip is a company's Paperclip side.
type CompanyPaperclip struct {
	// Manage keeps the company's agents in Paperclip as declared.
	Manage bool `json:"manage"`
	// Environments are the sandbox environments of provider "pcsync" kept
	// in Paperclip for the company.
	Environments []PaperclipEnvironment `json:"environments"`
}

// CompanySandbox is a company's sandbox leases (schema spec.sandbox).
type CompanySandbox struct {
	// WarmPool are the pools of Ready pods kept for its leases.
	WarmPool []WarmPool `json:"warmPool"`
	// RefillDelaySec is how long a claim holds the company's pool refills
	// (the schema's default: 3; 0 refills at once).
	RefillDelaySec int `json:"refillDelaySec"`
	// Suspend, when set, suspends the company's kept leases when idle,
	// their workspace and HOME on a claim of this storage.
	Suspend *LeaseSuspend `json:"suspend,omitempty"`
}

// LeaseSuspend is spec.sandbox.suspend: when a kept lease gives its pod
// back, and the storage that keeps its workspace and HOME meanwhile.
type LeaseSuspend struct {
	// IdleSec is how long a kept lease with no execute keeps its pod.
	IdleSec int `json:"idleSec"`
	// Size is each lease's claim's storage request.
	Size Quantity `json:"size"`
	// StorageClassName is the claims' StorageClass; empty: the cluster's
	// default.
	StorageClassName string `json:"storageClassName,omitempty"`
}

// LeaseSuspend is company c's spec.sandbox.suspend; nil when its kept
// leases are never suspended.
func (c *Company) LeaseSuspend() *LeaseSuspend {
	if c.Spec.Sandbox == nil {
		return nil
	}
	return c.Spec.Sandbox.Suspend
}

// IdleTime is how long a kept lease with no execute keeps its pod.
func (s *LeaseSuspend) IdleTime() time.Duration { return time.Duration(s.IdleSec) * time.Second }

// RefillDelay is how long a claim of a member of a pool of company c holds
// the company's refills (spec.sandbox.refillDelaySec); 0: at once, or no
// spec.sandbox.
func (c *Company) RefillDelay() time.Duration {
	if c.Spec.Sandbox == nil {
		return 0
	}
	return time.Duration(c.Spec.Sandbox.RefillDelaySec) * time.Second
}

// WarmPool is one pool of Ready pods of one image (schema #WarmPool).
type WarmPool struct {
	// Image is the members' image; empty: AdapterType's.
	Image string `json:"image,omitempty"`
	// AdapterType is the adapter type whose image the members run.
	AdapterType AdapterType `json:"adapterType,omitempty"`
	// Count is how many Ready members to keep.
	Count int `json:"count"`
	// Agent is the agent whose scheduling the members get; empty: the
	// company's.
	Agent string `json:"agent,omitempty"`
}

// PaperclipEnvironment is a Paperclip sandbox environment of provider
// "pcsync" (schema #PaperclipEnvironment).
type PaperclipEnvironment struct {
	Name        string   `json:"name"`
	Image       string   `json:"image,omitempty"`
	LeaseTTLSec *int     `json:"leaseTtlSec,omitempty"`
	TimeoutMs   *int     `json:"timeoutMs,omitempty"`
	EnvAllow    []string `json:"envAllow,omitempty"`
	SocketPath  string   `json:"socketPath,omitempty"`
	Prestart    *bool    `json:"prestart,omitempty"`
	ReuseLease  *bool    `json:"reuseLease,omitempty"`
	// RunnerLifecycleMode is Paperclip's runnerLifecycleMode: "warm",
	// "per_turn" or "inherit" ("" leaves it unset).
	RunnerLifecycleMode string `json:"runnerLifecycleMode,omitempty"`
}

// CompanyEgress is a company's egress allowance.
type CompanyEgress struct {
	Mode       EgressMode `json:"mode,omitempty"`
	AllowFQDNs []string   `json:"allowFqdns"`
	AllowCIDRs []CIDRRule `json:"allowCidrs"`
	// AllowPrivateCIDRs lets AllowCIDRs reach private, cluster, link-local
	// and loopback addresses, or every address (refused otherwise).
	AllowPrivateCIDRs bool `json:"allowPrivateCidrs"`
	// ProxyIdleSec overrides Settings spec.egress.proxyIdleSec.
	ProxyIdleSec *int `json:"proxyIdleSec,omitempty"`
}

// CIDRRule allows egress to a CIDR on some ports. A plain CIDR string in the
// config means TCP 443.
type CIDRRule struct {
	CIDR     string `json:"cidr"`
	Ports    []int  `json:"ports"`
	Protocol string `json:"protocol"`
}

// UnmarshalJSON accepts "10.0.0.0/8" or {cidr, ports, protocol}.
func (r *CIDRRule) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*r = CIDRRule{CIDR: s, Ports: []int{443}, Protocol: "TCP"}
		return nil
	}
	type plain CIDRRule
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = CIDRRule(p)
	return nil
}

// Sessions is the RWX volume for agent sessions.
type Sessions struct {
	Size             Quantity `json:"size"`
	StorageClassName string   `json:"storageClassName,omitempty"`
}

// Credential is a model-provider key of a company, held by its egress
// proxy (spec.credentials).
type Credential struct {
	Name       string              `json:"name"`
	Provider   adapters.Provider   `json:"provider"`
	Type       adapters.KeyKind    `json:"type"`
	SecretRef  CredentialSecretRef `json:"secretRef"`
	GatewayURL string              `json:"gatewayUrl,omitempty"`
	// Host is a GitHub credential's GitHub Enterprise Server host; ""
	// is github.com.
	Host string `json:"host,omitempty"`
	// Header is a header credential's header and variables.
	Header *CredentialHeader `json:"header,omitempty"`
}

// CredentialHeader is where a header credential's key goes (Name, after
// Scheme and a space when set) and the variables that give an agent the
// route's URL and the run's token.
type CredentialHeader struct {
	Name     string `json:"name"`
	Scheme   string `json:"scheme,omitempty"`
	URLEnv   string `json:"urlEnv"`
	TokenEnv string `json:"tokenEnv"`
}

// CredentialSecretRef is the Secret and data key that hold a credential.
type CredentialSecretRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// SecretRef names an existing Secret whose keys become agent env.
type SecretRef struct {
	Name     string `json:"name"`
	Optional bool   `json:"optional"`
}

// Agent is one coding-agent CLI of a company.
type Agent struct {
	Name             string            `json:"name"`
	Adapter          AdapterType       `json:"adapter"`
	Model            string            `json:"model,omitempty"`
	Effort           string            `json:"effort,omitempty"`
	Variant          string            `json:"variant,omitempty"`
	MaxTurnsPerRun   int               `json:"maxTurnsPerRun,omitempty"`
	InstructionsFile string            `json:"instructionsFile,omitempty"`
	ExtraArgs        []string          `json:"extraArgs"`
	Env              map[string]string `json:"env"`
	Image            string            `json:"image,omitempty"`
	Concurrency      int               `json:"concurrency"`
	TimeoutSec       int               `json:"timeoutSec"`
	GraceSec         int               `json:"graceSec"`
	Resources        *Resources        `json:"resources,omitempty"`
	NodeSelector     map[string]string `json:"nodeSelector,omitempty"`
	Tolerations      []Toleration      `json:"tolerations,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
	Paperclip        PaperclipAgent    `json:"paperclip"`
}

// PaperclipAgent is an agent's fields in Paperclip; nil (or empty) fields
// are not declared and not managed.
type PaperclipAgent struct {
	// Environment names one of the company's Paperclip environments: the
	// agent then keeps its stock adapter type and runs there.
	Environment string `json:"environment,omitempty"`
	// AdapterConfig is the stock adapter's config (with Environment).
	AdapterConfig      map[string]any          `json:"adapterConfig,omitempty"`
	Role               string                  `json:"role"`
	Title              *string                 `json:"title,omitempty"`
	ReportsTo          string                  `json:"reportsTo,omitempty"`
	Capabilities       *string                 `json:"capabilities,omitempty"`
	BudgetMonthlyCents *int                    `json:"budgetMonthlyCents,omitempty"`
	RuntimeConfig      *PaperclipRuntimeConfig `json:"runtimeConfig,omitempty"`
	Metadata           map[string]any          `json:"metadata,omitempty"`
}

// PaperclipRuntimeConfig is the part of an agent's runtimeConfig pcsync
// declares.
type PaperclipRuntimeConfig struct {
	Heartbeat *PaperclipHeartbeat `json:"heartbeat,omitempty"`
}

// PaperclipHeartbeat is runtimeConfig.heartbeat: when Paperclip wakes the
// agent.
type PaperclipHeartbeat struct {
	Enabled           *bool `json:"enabled,omitempty"`
	IntervalSec       *int  `json:"intervalSec,omitempty"`
	WakeOnDemand      *bool `json:"wakeOnDemand,omitempty"`
	MaxConcurrentRuns *int  `json:"maxConcurrentRuns,omitempty"`
}

// Toleration is a pod toleration.
type Toleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// RunRequest is a validated run request from the spool directory. The
// schema lets both or neither of Company and CompanyID through: the caller
// checks that exactly one is given against the config.
type RunRequest struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Company    string             `json:"company,omitempty"`
	CompanyID  string             `json:"companyId,omitempty"`
	Agent      string             `json:"agent"`
	Prompt     string             `json:"prompt"`
	RunID      string             `json:"runId,omitempty"`
	SessionID  string             `json:"sessionId,omitempty"`
	TimeoutSec int                `json:"timeoutSec,omitempty"`
	Context    map[string]any     `json:"context,omitempty"`
	Paperclip  *PaperclipCallback `json:"paperclip,omitempty"`
}

// PaperclipCallback is a run request's paperclip: how the agent calls the
// Paperclip server back.
type PaperclipCallback struct {
	// APIURL is the Paperclip API as the request's writer reaches it.
	APIURL string `json:"apiUrl,omitempty"`
	// APIKey is the run's JWT.
	APIKey SecretString `json:"apiKey,omitempty"`
	// AgentID is the Paperclip agent id.
	AgentID string `json:"agentId,omitempty"`
	// RunID is the Paperclip heartbeat run id.
	RunID string `json:"runId,omitempty"`
}

// SecretString is a string that is never shown: it prints, logs and
// encodes to JSON as "[redacted]". Reveal returns the value, for the few
// places that hand it on (an agent's environment, a Secret).
type SecretString string

// Redacted is what a SecretString shows instead of its value.
const Redacted = redact.Marker

// Reveal returns the secret value.
func (s SecretString) Reveal() string { return string(s) }

// String implements fmt.Stringer.
func (s SecretString) String() string { return s.shown() }

// GoString implements fmt.GoStringer.
func (s SecretString) GoString() string { return strconv.Quote(s.shown()) }

// Format implements fmt.Formatter, for every verb.
func (s SecretString) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.shown()) }

// LogValue implements slog.LogValuer.
func (s SecretString) LogValue() slog.Value { return slog.StringValue(s.shown()) }

// MarshalJSON implements json.Marshaler.
func (s SecretString) MarshalJSON() ([]byte, error) { return json.Marshal(s.shown()) }

// UnmarshalJSON implements json.Unmarshaler.
func (s *SecretString) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = SecretString(v)
	return nil
}

func (s SecretString) shown() string {
	if s == "" {
		return ""
	}
	return Redacted
}
