package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
	"github.com/pcsync/pcsync/pkg/secretcheck"
	"github.com/pcsync/pcsync/pkg/tenantns"
)

// DefaultAdapterType is the adapter type of a lease whose request names
// none (Paperclip's environment probe).
const DefaultAdapterType = "claude_local"

// AcquireParams are what Paperclip's acquireLease says of a lease.
type AcquireParams struct {
	Config        EnvironmentConfig
	CompanyID     string
	EnvironmentID string
	RunID         string
	AgentID       string
	AdapterType   string
	// RequestedExpiresAt, when set, is the latest the lease may live.
	RequestedExpiresAt *time.Time
}

// LeaseInfo is what Paperclip keeps of a lease.
type LeaseInfo struct {
	ID        string
	ExpiresAt time.Time
	Metadata  map[string]any
}

// Acquire creates a lease: it checks the company and the image against the
// config, records the lease, claims a Ready member of a warm pool of its
// pod or creates its pod, waits until the pod runs and its command server
// answers, and arms the expiry. Nothing is created for a
// refused lease, and a lease that fails after its pod was created has its
// pod deleted. A lease begun for the run by Prestart with the same params
// is taken instead, once it is ready.
func (m *Manager) Acquire(ctx context.Context, p AcquireParams) (info LeaseInfo, err error) {
	began := time.Now()
	defer func() { m.observeAcquire(began, err) }()
	if e := m.early.take(p.RunID); e != nil {
		if info, ok, err := m.adoptEarly(ctx, e, p); ok {
			return info, err
		}
	}
	return m.acquire(ctx, p, false)
}

// acquire is Acquire's own start of a lease; early marks it prestarted
// (Prestart) until an acquire takes it.
func (m *Manager) acquire(ctx context.Context, p AcquireParams, early bool) (_ LeaseInfo, err error) {
	model := m.model()
	if model == nil {
		return LeaseInfo{}, userErrorf(CodeNoConfig, "pcsync has no valid config loaded yet")
	}
	now := time.Now()
	r, rule, err := m.plan(ctx, model, &p, now)
	if err != nil {
		return LeaseInfo{}, err
	}
	r.Prestarted = early
	if err := m.credentialsExist(ctx, model, &r); err != nil {
		return LeaseInfo{}, err
	}
	proxied, cold := m.proxyState(model, r.Company, r.Namespace)
	started := func() {}
	if m.pools != nil {
		started = m.pools.Acquiring(r.Namespace)
	}
	defer started()
	created, ws, warm, err := m.startPod(ctx, model, &r)
	if err != nil {
		return LeaseInfo{}, err
	}
	l := m.track(r)
	l.rule = rule
	m.log.Info("sandbox lease pod created", slog.String("lease", r.ID), slog.String("namespace", r.Namespace),
		slog.String("image", r.Image), slog.String("adapterType", p.AdapterType), slog.String("run", p.RunID), slog.String("agent", r.Agent),
		slog.Time("expiresAt", r.ExpiresAt), slog.Bool("warm", warm))

	patience := m.opts.ReadyTimeout
	if p.Config.TimeoutMs > 0 {
		patience = min(patience, time.Duration(p.Config.TimeoutMs)*time.Millisecond)
	}
	rctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	// A claimed member runs already: no wait. A cold pod's command server
	// is tried from now on: it may answer before the pod's status says
	// Running (openEarly).
	if !warm {
		ws = m.openEarly(r, patience)
	}
	if running, _ := podRunning(created); !warm || !running {
		if err := m.waitStarted(rctx, created, ws); err != nil {
			ws.close()
			err = explainUnschedulable(err, model, &r)
			if r.Keep != nil {
				err = m.explainStorage(ctx, err, &r)
			}
			m.releaseAsync(l, EndFailed)
			return LeaseInfo{}, err
		}
	}
	started()
	if !l.to(LeasePending, LeaseReady) {
		ws.close()
		return LeaseInfo{}, fmt.Errorf("lease %s: state %s: it ended while its pod started", l.ID, l.State())
	}
	m.connect(l, patience, ws)
	// A member of the warm pool has run long enough for its egress rules.
	if cold || (proxied && !warm) {
		if err := m.waitProxy(ctx, l, !cold); err != nil {
			m.releaseAsync(l, EndFailed)
			return LeaseInfo{}, err
		}
	}
	m.log.Info("sandbox lease ready", slog.String("lease", r.ID), slog.Duration("took", time.Since(now).Round(time.Millisecond)))
	return m.info(l), nil
}

// plan checks a lease request against the config and gives the lease's
// record (company, agent, namespace, image, expiry) and env rule; nothing
// is created. Each refusal is a user error with its code.
func (m *Manager) plan(ctx context.Context, model *config.Model, p *AcquireParams, now time.Time) (leasepod.Record, EnvRule, error) {
	if errs := p.Config.Check(model); len(errs) > 0 {
		code := CodeConfigInvalid
		if len(errs) == 1 && errs[0].Field == "image" {
			code = CodeImageNotAllowed
		}
		return leasepod.Record{}, EnvRule{}, configErrors(code, errs)
	}
	c, _ := model.Company(p.Config.Company)
	if c.Suspended() {
		return leasepod.Record{}, EnvRule{}, userErrorf(CodeCompanySuspended,
			"config.company: pcsync Company %q is suspended (spec.suspend in its config): no new lease until it is resumed", c.Slug())
	}
	if p.CompanyID != "" && c.Spec.ID != "" && p.CompanyID != c.Spec.ID {
		return leasepod.Record{}, EnvRule{}, userErrorf(CodeCompanyMismatch,
			"config.company: pcsync Company %q is Paperclip company %s, not this environment's company %s",
			c.Slug(), c.Spec.ID, p.CompanyID)
	}
	agent, err := m.agentOf(ctx, model, c, p.AgentID)
	if err != nil {
		return leasepod.Record{}, EnvRule{}, err
	}
	if p.AdapterType == "" {
		// A probe's lease names no adapter: the default, as Paperclip's
		// own providers do.
		p.AdapterType = DefaultAdapterType
	}
	image := p.Config.Image
	rule := EnvRule{Allow: p.Config.EnvAllow}
	if t, ok := pcsyncAdapter(p.AdapterType); ok {
		d := model.Adapter(t)
		rule.AdapterKeys = d.EnvKeys
		if image == "" {
			image = d.Image
		}
	}
	if image == "" {
		return leasepod.Record{}, EnvRule{}, userErrorf(CodeNoImage,
			"adapter type %q has no image in the pcsync config: set the environment's config.image (allowed by Settings spec.images.allowList)", p.AdapterType)
	}
	if !model.ImageAllowed(image) {
		return leasepod.Record{}, EnvRule{}, userErrorf(CodeImageNotAllowed, "%s", imageRefusal(image))
	}
	expires, err := m.expiry(p, now)
	if err != nil {
		return leasepod.Record{}, EnvRule{}, err
	}
	r := leasepod.Record{
		ID: leasepod.NewID(), Namespace: model.Namespace(c), Company: c.Slug(), Image: image,
		AdapterType: p.AdapterType, CompanyID: p.CompanyID, EnvironmentID: p.EnvironmentID,
		RunID: p.RunID, AgentID: p.AgentID, Agent: agent, ExpiresAt: expires, CreatedAt: now,
		Keep: keepOf(c, p.Config.Core),
	}
	m.placeServer(&r, model)
	return r, rule, nil
}

// credentialsExist refuses a lease of a company in egress mode proxy whose
// credentials that the lease's CLI uses (spec.credentials) lack their
// Secret: the proxy would have no key for its executes. One dry-run create
// per Secret (secretcheck.Guard; none while a Secret found is trusted),
// before any pod is created or claimed.
func (m *Manager) credentialsExist(ctx context.Context, model *config.Model, r *leasepod.Record) error {
	if m.opts.ProxyAddresses == nil {
		return nil // no execute gets the proxy's variables, nor a token
	}
	c, ok := model.Company(r.Company)
	if !ok || model.EgressMode(c) != config.EgressProxy {
		return nil
	}
	err := m.credentials.Check(ctx, r.Namespace, c, adapters.Type(r.AdapterType))
	switch {
	case err == nil:
		return nil
	case secretcheck.IsMissing(err):
		return userErrorf(CodeCredentialMissing, "no pod created: %v", err)
	}
	return fmt.Errorf("lease %s: %w", r.ID, err)
}

// agentOf is the agent company c declares in Git that Paperclip's agent id
// is (Options.Agents), whose scheduling the lease's pod gets; "" for none
// (the company's defaults). A lease whose agent cannot be told is refused:
// its pod could land where that agent's must not.
func (m *Manager) agentOf(ctx context.Context, model *config.Model, c *config.Company, id string) (string, error) {
	if id == "" || m.opts.Agents == nil {
		return "", nil
	}
	name, err := m.opts.Agents.ResolveAgent(ctx, model, c, id)
	if err != nil {
		return "", userErrorf(CodeAgentUnresolved,
			"Paperclip agent %s: pcsync cannot tell which agent of Company %s it is, so not where its pod may run: %v", id, c.Slug(), err)
	}
	return name, nil
}

// placeServer says where the lease's command server comes from (the
// image's own pcsync, or the helper container's copy) and sets the paths of
// the lease as its commands see them.
func (m *Manager) placeServer(r *leasepod.Record, model *config.Model) {
	if m.opts.HostRoot == "" && model.ImageHasServer(r.Image) {
		// pcsync's own images hold its binary: no helper container.
		r.Server = images.ServerPath
	} else {
		r.HelperImage = cmp.Or(m.opts.HelperImage, model.BuiltinImage(images.Pcsync))
	}
	r.SetPaths(m.opts.HostRoot)
}

// expiry is when a lease asked for at now ends: the environment's TTL (or
// the default), at most MaxLeaseTTL, sooner if Paperclip asks for sooner;
// whole seconds.
func (m *Manager) expiry(p *AcquireParams, now time.Time) (time.Time, error) {
	ttl := m.opts.DefaultLeaseTTL
	if p.Config.LeaseTTLSec > 0 {
		ttl = time.Duration(p.Config.LeaseTTLSec) * time.Second
	}
	ttl = min(ttl, m.opts.MaxLeaseTTL)
	expires := now.Add(ttl)
	if r := p.RequestedExpiresAt; r != nil {
		if !r.After(now.Add(time.Second)) {
			return time.Time{}, userErrorf(CodeExpiryPassed, "requestedExpiresAt %s has passed", r.UTC().Format(time.RFC3339))
		}
		if r.Before(expires) {
			expires = *r
		}
	}
	return expires.Truncate(time.Second), nil
}

// createPod checks that the lease's namespace is its company's tenant,
// journals the lease and creates its pod (a kept lease's claim first); the
// journal entry and the claim are dropped again when the create fails. r gets the pod's UID.
func (m *Manager) createPod(ctx context.Context, model *config.Model, r *leasepod.Record) (*corev1.Pod, error) {
	if err := m.tenants.Check(ctx, r.Namespace, r.Company); errors.Is(err, tenantns.ErrNotTenant) {
		return nil, userErrorf(CodeNamespaceNotTenant, "no pod created: %v", err)
	} else if err != nil {
		return nil, err
	}
	pod, err := leasepod.BuildPod(r, model)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, errors.New("sandbox: the daemon is stopping")
	}
	if err := m.j.put(*r); err != nil {
		return nil, err
	}
	if r.Keep != nil {
		if err := m.createClaim(ctx, model, r); err != nil {
			_ = m.j.drop(r.ID)
			return nil, err
		}
	}
	created, err := m.cs.CoreV1().Pods(r.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: "pcsync"})
	if err != nil {
		if r.Keep != nil {
			_ = m.deleteClaim(ctx, r.Namespace, r.ID, "")
		}
		_ = m.j.drop(r.ID)
		return nil, createError(*r, err)
	}
	r.PodUID = string(created.UID)
	return created, nil
}

// info is what Paperclip keeps of a lease.
func (m *Manager) info(l *lease) LeaseInfo {
	return LeaseInfo{ID: l.ID, ExpiresAt: l.ExpiresAt, Metadata: map[string]any{
		"remoteCwd":    l.Workspace,
		"shellCommand": "sh",
		"namespace":    l.Namespace,
		"pod":          l.ID,
		"image":        l.Image,
		"company":      l.Company,
	}}
}

// Resume returns a lease the daemon holds (adopted after a restart too);
// a suspended one gets its pod again first (resume).
func (m *Manager) Resume(ctx context.Context, id string) (LeaseInfo, error) {
	l := m.lookup(id)
	if l == nil {
		return LeaseInfo{}, fmt.Errorf("lease %s: %w: its pod is gone or it was never pcsync's", id, ErrNoLease)
	}
	was := l.State()
	if err := m.ensureReady(ctx, l); err != nil {
		return LeaseInfo{}, err
	}
	if s := l.State(); s != LeaseReady {
		return LeaseInfo{}, fmt.Errorf("lease %s: state %s", id, s)
	}
	info := m.info(l)
	if was == LeaseSuspended || was == LeaseSuspending || was == LeaseResuming {
		info.Metadata[MetadataResumed] = resumedMetadata(l)
	}
	return info, nil
}

// Workspace returns the lease's working directory.
func (m *Manager) Workspace(id string) (string, error) {
	l := m.lookup(id)
	if l == nil {
		return "", fmt.Errorf("lease %s: %w", id, ErrNoLease)
	}
	return l.Workspace, nil
}

// createError explains a refused pod create.
func createError(r leasepod.Record, err error) error {
	msg := err.Error()
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(msg, "quota"):
		return userErrorf(CodeQuotaFull, "company %s is at its quota (ResourceQuota paperclip-quota in namespace %s): %s; wait for its runs to end or raise spec.quota in Git",
			r.Company, r.Namespace, msg)
	case apierrors.IsNotFound(err):
		return userErrorf(CodeNamespaceMissing, "namespace %s of company %s does not exist: run `pcsync apply` (or let the daemon reconcile) first", r.Namespace, r.Company)
	case apierrors.IsForbidden(err) && strings.Contains(msg, "cannot create resource"):
		return userErrorf(CodePodForbidden, "Pod/%s/%s: refused: %s (pcsync creates pods only in tenant namespaces whose RoleBinding pcsync grants it the ClusterRole pcsync-tenant: run `pcsync apply`, and check Settings spec.pcsync.serviceAccount)",
			r.Namespace, r.ID, msg)
	case apierrors.IsForbidden(err):
		return userErrorf(CodePodForbidden, "Pod/%s/%s: refused: %s", r.Namespace, r.ID, msg)
	}
	return fmt.Errorf("Pod/%s/%s: create: %w", r.Namespace, r.ID, err)
}

// pcsyncAdapter maps Paperclip's adapter type to pcsync's, whose image and
// env keys the lease uses; ok is false for a type pcsync does not know.
func pcsyncAdapter(paperclipType string) (adapters.Type, bool) {
	if paperclipType == "cursor" {
		return adapters.CursorLocal, true
	}
	t := adapters.Type(paperclipType)
	for _, k := range adapters.Types() {
		if k == t {
			return t, true
		}
	}
	return "", false
}
