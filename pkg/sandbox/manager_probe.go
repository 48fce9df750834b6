package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/imagecheck"
	"github.com/pcsync/pcsync/pkg/podsched"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
	"github.com/pcsync/pcsync/pkg/secretcheck"
)

// ValidateConfigResponse is what Validate finds: the validateConfig
// hook's answer as it is.
type ValidateConfigResponse struct {
	OK     bool     `json:"ok"`
	Errors []string `json:"errors,omitempty"`
	// NormalizedConfig is the config Paperclip stores when OK.
	NormalizedConfig map[string]any `json:"normalizedConfig,omitempty"`
	Warnings         []string       `json:"warnings,omitempty"`
}

// ProbeResponse is what Probe finds, the probe hook's answer as it is: OK
// when no diagnostic is an error.
type ProbeResponse struct {
	OK          bool         `json:"ok"`
	Summary     string       `json:"summary"`
	Diagnostics []Diagnostic `json:"diagnostics"`
}

// Severity is how much a diagnostic matters.
type Severity string

// The severities of a diagnostic.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// Diagnostic is one finding of the probe.
type Diagnostic struct {
	Severity Severity `json:"severity"`
	Code     Code     `json:"code"`
	Message  string   `json:"message"`
}

// Validate checks an environment's config (Paperclip's JSON object) on its
// own and against the loaded pcsync config, and gives the normalized
// config Paperclip stores when it is valid.
func (m *Manager) Validate(raw map[string]any) ValidateConfigResponse {
	cfg, errs := ParseConfig(raw)
	model := m.model()
	if model != nil {
		errs = append(errs, cfg.Check(model)...)
	}
	out := ValidateConfigResponse{OK: len(errs) == 0}
	if len(errs) > 0 {
		out.Errors = errorStrings(errs)
	} else {
		out.NormalizedConfig = cfg.Normalized()
	}
	if model == nil {
		out.Warnings = []string{"pcsync has no valid config loaded yet: config.company was not checked"}
	}
	return out
}

// Probe checks what a lease of an environment's config (Paperclip's JSON
// object) needs without creating one: the config, the tenant namespace,
// the images in their registries, and a server-side dry run of a lease pod
// per scheduling (admission: Pod Security, quota).
func (m *Manager) Probe(ctx context.Context, raw map[string]any) ProbeResponse {
	diags := []Diagnostic{}
	add := func(sev Severity, code Code, msg string) {
		diags = append(diags, Diagnostic{Severity: sev, Code: code, Message: msg})
	}
	cfg, errs := ParseConfig(raw)
	model := m.model()
	if model == nil {
		add(SeverityError, CodeNoConfig, "pcsync has no valid config loaded: see the daemon's log and /readyz")
	} else {
		errs = append(errs, cfg.Check(model)...)
	}
	for _, e := range errs {
		add(SeverityError, CodeConfigInvalid, e.Error())
	}
	if len(diags) == 0 {
		m.probeCluster(ctx, model, cfg, add)
	}
	out := ProbeResponse{OK: true, Summary: "pcsync sandbox ready", Diagnostics: diags}
	for _, d := range diags {
		if d.Severity == SeverityError {
			out.OK, out.Summary = false, "pcsync sandbox not usable: "+d.Message
			break
		}
	}
	return out
}

// probeCluster probes what the cluster says of a lease of cfg: the tenant
// namespace, the images, and one dry-run pod per scheduling.
func (m *Manager) probeCluster(ctx context.Context, model *config.Model, cfg EnvironmentConfig, add func(Severity, Code, string)) {
	c, _ := model.Company(cfg.Company)
	ns := model.Namespace(c)
	if _, err := m.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		add(SeverityError, CodeNamespaceMissing, fmt.Sprintf("namespace %s of company %s does not exist: run `pcsync apply` first", ns, c.Slug()))
		return
	} else if err != nil {
		add(SeverityError, CodeClusterUnreachable, "Kubernetes API: "+err.Error())
		return
	}
	m.probeCredentials(ctx, model, c, ns, add)
	image := cfg.Image
	if image == "" {
		image = model.Adapter(DefaultAdapterType).Image
	}
	r := leasepod.Record{ID: "pcsync-sbx-probe", Namespace: ns, Company: c.Slug(), Image: image, ExpiresAt: time.Now().Add(time.Hour)}
	m.placeServer(&r, model)
	probeImages(ctx, model, r, add)
	for _, pp := range probePods(c) {
		r.Agent = pp.agent
		pod, err := leasepod.BuildPod(&r, model)
		if err == nil {
			_, err = m.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		}
		if err != nil {
			add(SeverityError, CodePodRefused, pp.who+": "+createError(r, err).Error())
			continue
		}
		add(SeverityInfo, CodePodAdmitted, fmt.Sprintf("%s (image %s) is admitted in namespace %s and needs %s",
			pp.who, image, ns, podsched.Of(&pod.Spec)))
	}
}

// probeCredentials warns of each credential of company c (spec.credentials)
// whose Secret does not exist in namespace ns: the leases whose CLI uses it
// are refused (credential_missing); those of other CLIs are not, so it is
// a warning. Only where Acquire checks them (egress mode proxy, with the
// proxy's addresses).
func (m *Manager) probeCredentials(ctx context.Context, model *config.Model, c *config.Company, ns string, add func(Severity, Code, string)) {
	if m.opts.ProxyAddresses == nil || model.EgressMode(c) != config.EgressProxy {
		return
	}
	for _, cr := range c.Spec.Credentials {
		err := secretcheck.Exists(ctx, m.cs, ns, cr.SecretRef.Name)
		switch {
		case apierrors.IsNotFound(err):
			me := &secretcheck.MissingError{Company: c.Slug(), Credential: cr.Name, Namespace: ns, Secret: cr.SecretRef.Name, Key: cr.SecretRef.Key}
			add(SeverityWarning, CodeCredentialMissing, fmt.Sprintf("leases whose CLI uses %s are refused: %v", cr.Provider, me))
		case err != nil:
			add(SeverityWarning, CodeClusterUnreachable, fmt.Sprintf("credential %s/%s: %v", c.Slug(), cr.Name, err))
		}
	}
}

// probePod is one lease pod the probe dry-runs: who it serves, and the
// agent whose scheduling it has ("" for the company's defaults).
type probePod struct{ who, agent string }

// probePods are the lease pods the probe dry-runs, one per place a lease of
// company c may need: a lease of an agent the config does not declare (the
// company's defaults), then one per distinct scheduling of the agents c
// declares in its sandbox environments (paperclip.environment), named.
func probePods(c *config.Company) []probePod {
	key := func(a *config.Agent) string {
		b, _ := json.Marshal(podsched.For(c, a))
		return string(b)
	}
	out := []probePod{{who: "a lease pod of an agent the config does not declare"}}
	var names [][]string
	seen := map[string]int{key(nil): -1}
	for i := range c.Spec.Agents {
		ag := &c.Spec.Agents[i]
		if ag.Paperclip.Environment == "" {
			continue
		}
		k := key(ag)
		if j, ok := seen[k]; ok {
			if j >= 0 {
				names[j] = append(names[j], ag.Name)
			}
			continue
		}
		seen[k] = len(names)
		names = append(names, []string{ag.Name})
	}
	for _, n := range names {
		who := "a lease pod of agent " + n[0]
		if len(n) > 1 {
			who = "a lease pod of agents " + strings.Join(n, ", ")
		}
		out = append(out, probePod{who: who, agent: n[0]})
	}
	return out
}

// probeImages looks the lease's images up in their registries (the image,
// and the helper container's when the image does not hold pcsync): a missing
// one is an error naming what fixes it, one that needs the tenant's pull
// secrets (which the daemon does not read) is a note.
func probeImages(ctx context.Context, m *config.Model, r leasepod.Record, add func(Severity, Code, string)) {
	want := []imagecheck.Want{{Image: r.Image, Users: []string{"the lease"}, Builtin: m.ImageHasServer(r.Image)}}
	if r.HelperImage != "" {
		want = append(want, imagecheck.Want{Image: r.HelperImage, Users: []string{"the lease's helper container"}, Builtin: true})
	}
	for _, f := range imagecheck.Resolve(ctx, m, want, imagecheck.DefaultOptions()) {
		line := fmt.Sprintf("%s for %s: %s", f.Result, f.Users[0], f.Advice)
		switch {
		case f.Result.OK():
		case f.Builtin && m.ImageRegistry() == "":
			add(SeverityWarning, CodeImageNoRegistry, line)
		case f.Result.Status == imagecheck.StatusUnreachable:
			// The nodes may reach a registry the daemon does not.
			add(SeverityWarning, CodeImageUnreachable, line)
		case f.Result.Status == imagecheck.StatusDenied:
			add(SeverityInfo, CodeImageUnverified, fmt.Sprintf("%s: the registry wants credentials (the tenant's pull secrets, which pcsync does not read); the kubelet will use them", f.Result))
		default:
			add(SeverityError, CodeImagePrefix+Code(f.Result.Status), line)
		}
	}
}

// configErrors joins field errors into one refusal.
func configErrors(code Code, errs []ConfigError) error {
	return &UserError{Code: code, Message: strings.Join(errorStrings(errs), "; ")}
}

func errorStrings(errs []ConfigError) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}
