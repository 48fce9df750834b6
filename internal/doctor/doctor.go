// Package doctor checks that pcsync can do its work where it runs: the
// cluster is reachable, pcsync holds every permission it uses, the kinds
// the config renders are served (Cilium's CRDs in egress mode cilium), the
// sessions volumes are bound and ReadWriteMany, the Secrets the config
// names exist, each warm pool against its declaration, that the tenants'
// NetworkPolicies are enforced (ProbeNetwork: a short-lived probe pod in a
// tenant namespace), the spool directory is writable, and what agent Jobs
// inherit from pcsync's own pod. Each check gives one row of a Report.
package doctor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/lib/leader"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/imagecheck"
	"github.com/pcsync/pcsync/pkg/introspect"
	"github.com/pcsync/pcsync/pkg/render"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// Status is the outcome of one check.
type Status string

// The statuses, from good to bad.
const (
	// StatusOK: the check passed.
	StatusOK Status = "ok"
	// StatusInfo: a fact worth showing (versions, what is inherited).
	StatusInfo Status = "info"
	// StatusSkip: the check does not apply (no config given, no cluster).
	StatusSkip Status = "skip"
	// StatusWarn: something that degrades pcsync or may fail later (an
	// optional Secret missing, a tenant not applied yet).
	StatusWarn Status = "warn"
	// StatusFail: pcsync cannot do part of its work.
	StatusFail Status = "fail"
)

// Check is one row of the report.
type Check struct {
	// Area groups checks: cluster, rbac, crds, sessions, secrets, spool,
	// config, inherit.
	Area string `json:"area"`
	// Name says what was checked.
	Name string `json:"name"`
	// Status is the outcome.
	Status Status `json:"status"`
	// Detail explains the outcome and, for failures, what to do.
	Detail string `json:"detail,omitempty"`
}

// Report is the outcome of Run.
type Report struct {
	Checks []Check `json:"checks"`
}

// Count returns how many checks ended with s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == s {
			n++
		}
	}
	return n
}

// WriteTable writes the report as an aligned table and a summary line.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AREA\tCHECK\tSTATUS\tDETAIL")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Area, c.Name, strings.ToUpper(string(c.Status)), c.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "summary: %d ok, %d warnings, %d failed, %d skipped\n",
		r.Count(StatusOK), r.Count(StatusWarn), r.Count(StatusFail), r.Count(StatusSkip))
	return err
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Options configure Run. Start from DefaultOptions.
type Options struct {
	// ConfigDir is the config directory; empty skips the checks that need
	// the config (kinds, sessions, secrets).
	ConfigDir string
	// Spool is the spool directory; empty skips the spool and daemon
	// checks.
	Spool string
	// StateDir is the daemon's state directory, whose status file the
	// daemon check reads; default <Spool>/.pcsync.
	StateDir string
	// RESTConfig reaches the cluster; nil (with ClusterError saying why)
	// fails the cluster checks and skips those that need it.
	RESTConfig   *rest.Config
	ClusterError error
	// LeaseNamespace is pcsync's own namespace, where the permissions of
	// ScopeOwnNamespace (the leader-election Lease, the ApplySet parent) are
	// checked. Default leader.DefaultNamespace().
	LeaseNamespace string
	// Permissions are the permissions checked. Default
	// DefaultPermissions().
	Permissions []Permission
	// Images is where pcsync's own images are unless the config says
	// (config.LoadOptions.Images).
	Images config.ImageDefaults
	// ImageCheck configures the image preflight (its Keychain is built
	// from the pull secrets doctor can read). Default
	// imagecheck.DefaultOptions().
	ImageCheck imagecheck.Options
	// Introspect finds pcsync's own pod. Default introspect.DefaultOptions().
	Introspect introspect.Options
	// Network configures the network check (a probe pod in a tenant
	// namespace; see ProbeNetwork). Default DefaultNetworkOptions().
	Network NetworkOptions
	// SkipNetwork leaves the network check out.
	SkipNetwork bool
	// Timeout bounds the whole run. Default 3 minutes (the network check's
	// probe pod may wait for an image pull).
	Timeout time.Duration
}

// DefaultOptions returns the defaults described on Options.
func DefaultOptions() Options {
	return Options{LeaseNamespace: leader.DefaultNamespace(), Permissions: DefaultPermissions(),
		Introspect: introspect.DefaultOptions(), Network: DefaultNetworkOptions(), Timeout: 3 * time.Minute}
}

// complete fills the zero fields with DefaultOptions' (a negative Timeout
// too); the nested options are completed where they are used.
func (o *Options) complete() {
	d := DefaultOptions()
	o.LeaseNamespace = cmp.Or(o.LeaseNamespace, d.LeaseNamespace)
	if o.Permissions == nil {
		o.Permissions = d.Permissions
	}
	o.Timeout = cmp.Or(max(o.Timeout, 0), d.Timeout)
}

// Run performs every check and returns the report; it never fails as a
// whole: what it cannot check is a row too.
func Run(ctx context.Context, opts Options) *Report {
	opts.complete()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	r := &doctor{opts: opts, report: &Report{}}
	r.run(ctx)
	return r.report
}

type doctor struct {
	opts   Options
	report *Report
	cs     kubernetes.Interface
	model  *config.Model
	out    *render.Output
}

func (d *doctor) add(area, name string, st Status, format string, args ...any) {
	d.report.Checks = append(d.report.Checks, Check{Area: area, Name: name, Status: st, Detail: fmt.Sprintf(format, args...)})
}

func (d *doctor) run(ctx context.Context) {
	d.checkConfig(ctx)
	reachable := d.checkCluster()
	if reachable {
		d.checkRBAC(ctx)
		d.checkKinds()
	}
	inherited := d.checkInherit(ctx, reachable)
	if reachable {
		d.checkSessions(ctx)
		d.checkPools(ctx)
		d.checkLeaseStorage(ctx)
		d.checkSecrets(ctx, inherited)
		d.checkNetwork(ctx)
	}
	d.checkKeys()
	d.checkImages(ctx, reachable, inherited)
	d.checkSpool()
}

func (d *doctor) checkConfig(ctx context.Context) {
	if d.opts.ConfigDir == "" {
		d.add("config", "config directory", StatusSkip, "no config directory given")
		return
	}
	dir, err := filepath.EvalSymlinks(d.opts.ConfigDir)
	if err != nil {
		d.add("config", d.opts.ConfigDir, StatusFail, "%v", err)
		return
	}
	lo := config.DefaultLoadOptions()
	lo.Images = d.opts.Images
	m, err := config.Load(ctx, dir, lo)
	if err == nil {
		d.out, err = render.Render(m, render.DefaultOptions())
	}
	if err != nil {
		var ce *config.Errors
		if errors.As(err, &ce) {
			lines := ce.Lines()
			more := ""
			if len(lines) > 3 {
				more = fmt.Sprintf("; and %d more (pcsync validate shows all)", len(lines)-3)
				lines = lines[:3]
			}
			d.add("config", d.opts.ConfigDir, StatusFail, "invalid: %s%s", strings.Join(lines, "; "), more)
			return
		}
		d.add("config", d.opts.ConfigDir, StatusFail, "%v", err)
		return
	}
	d.model = m
	d.add("config", d.opts.ConfigDir, StatusOK, "valid: %d companies, %d objects rendered", len(m.Companies), len(d.out.Objects))
}

func (d *doctor) checkCluster() bool {
	if d.opts.RESTConfig == nil {
		err := d.opts.ClusterError
		if err == nil {
			err = errors.New("no cluster configured")
		}
		d.add("cluster", "reachable", StatusFail, "%v", err)
		return false
	}
	cfg := rest.CopyConfig(d.opts.RESTConfig)
	if cfg.Timeout == 0 {
		cfg.Timeout = 15 * time.Second
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		d.add("cluster", "reachable", StatusFail, "%v", err)
		return false
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		d.add("cluster", "reachable", StatusFail, "%s: %v", cfg.Host, err)
		return false
	}
	d.cs = cs
	d.add("cluster", "reachable", StatusOK, "%s, Kubernetes %s (%s)", cfg.Host, v.GitVersion, v.Platform)
	return true
}

func (d *doctor) wantsCilium() bool {
	if d.model == nil {
		return true // unknown: check it, as a warning at worst
	}
	for i := range d.model.Companies {
		if d.model.EgressMode(&d.model.Companies[i]) == config.EgressCilium {
			return true
		}
	}
	return false
}

// checkRBAC asks the API server (SelfSubjectAccessReview) for every
// permission pcsync uses, where it uses it: cluster-wide, in its own
// namespace, or in a tenant namespace (the first company's that exists:
// the per-tenant rights come with each tenant's RoleBinding pcsync, so
// before any tenant is applied they are skipped, saying so).
func (d *doctor) checkRBAC(ctx context.Context) {
	cilium := d.wantsCilium()
	tenantNS, tenantErr := d.appliedTenantNamespace(ctx)
	var missing, optional []string
	checked, skipped := 0, 0
	for _, p := range d.opts.Permissions {
		if p.CiliumOnly && !cilium {
			continue
		}
		ns, where := "", "cluster-wide"
		switch p.Scope {
		case ScopeOwnNamespace:
			ns, where = d.opts.LeaseNamespace, "in namespace "+d.opts.LeaseNamespace
		case ScopeTenant:
			if tenantNS == "" {
				skipped++
				continue
			}
			ns, where = tenantNS, "in tenant namespace "+tenantNS+" (its RoleBinding "+render.PcsyncRoleBindingName+
				" grants ClusterRole "+render.PcsyncTenantClusterRole+"; is it applied, to Settings spec.pcsync.serviceAccount?)"
		}
		res, sub := splitResource(p.Resource)
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: p.Verb, Group: p.Group,
				Resource: res, Subresource: sub, Name: p.Name}}}
		got, err := d.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			d.add("rbac", p.String(), StatusFail, "cannot ask the API server (%v); pcsync needs create on "+
				"authorization.k8s.io/selfsubjectaccessreviews", err)
			return
		}
		checked++
		if got.Status.Allowed {
			continue
		}
		line := fmt.Sprintf("%s %s (%s)", p, where, p.Why)
		if p.Optional {
			optional = append(optional, line)
		} else {
			missing = append(missing, line)
		}
	}
	for _, m := range missing {
		d.add("rbac", "permission", StatusFail, "missing %s; see deploy/base/rbac.yaml", m)
	}
	for _, m := range optional {
		d.add("rbac", "permission", StatusWarn, "missing %s", m)
	}
	if len(missing) == 0 {
		where := ""
		if tenantNS != "" {
			where = ", the per-tenant ones in " + tenantNS
		}
		d.add("rbac", "permissions", StatusOK, "all %d verbs pcsync uses are allowed (%d checked%s)", checked-len(optional), checked, where)
	}
	if skipped > 0 {
		why := "no tenant namespace exists yet"
		switch {
		case tenantErr != nil:
			why = tenantErr.Error()
		case d.model == nil:
			why = "no valid config names a tenant namespace"
		}
		d.add("rbac", "tenant permissions", StatusSkip, "%d per-tenant verbs not checked: %s; each tenant's RoleBinding %s grants them once pcsync apply has created it",
			skipped, why, render.PcsyncRoleBindingName)
	}
}

// checkNetwork proves that the cluster enforces the tenants'
// NetworkPolicies (ProbeNetwork): a connection they forbid that succeeds
// fails, and so does a probe that cannot tell (fail closed); before any
// tenant is applied it is a warning.
func (d *doctor) checkNetwork(ctx context.Context) {
	const area, name = "network", "NetworkPolicies enforced"
	switch {
	case d.opts.SkipNetwork:
		d.add(area, name, StatusSkip, "left out (--skip-network-check)")
		return
	case d.model == nil:
		d.add(area, name, StatusSkip, "no valid config names a tenant namespace to probe from")
		return
	}
	r := ProbeNetwork(ctx, d.cs, d.model, d.opts.Network)
	switch {
	case r.Verdict == Enforced:
		d.add(area, name, StatusOK, "%s", r.Message())
	case r.NoTenant:
		d.add(area, name, StatusWarn, "%s", r.Message())
	default:
		d.add(area, name, StatusFail, "%s", r.Message())
	}
}

// appliedTenantNamespace returns the namespace of the first company of the
// config that exists in the cluster ("" when none does, or there is no
// valid config).
func (d *doctor) appliedTenantNamespace(ctx context.Context) (string, error) {
	if d.model == nil {
		return "", nil
	}
	for i := range d.model.Companies {
		ns := d.model.Namespace(&d.model.Companies[i])
		_, err := d.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case err == nil:
			return ns, nil
		case !apierrors.IsNotFound(err):
			return "", fmt.Errorf("Namespace/%s get failed: %w", ns, err)
		}
	}
	return "", nil
}

// checkKinds checks that the cluster serves every kind the config renders.
func (d *doctor) checkKinds() {
	want := map[schema.GroupVersionKind]bool{}
	if d.out != nil {
		for _, o := range d.out.Objects {
			want[o.GroupVersionKind()] = true
		}
	} else if d.wantsCilium() {
		d.add("crds", "rendered kinds", StatusSkip, "no valid config to render")
		return
	}
	gvks := make([]schema.GroupVersionKind, 0, len(want))
	for g := range want {
		gvks = append(gvks, g)
	}
	sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
	var missing []string
	for _, gvk := range gvks {
		list, err := d.cs.Discovery().ServerResourcesForGroupVersion(gvk.GroupVersion().String())
		served := false
		if err == nil {
			for _, r := range list.APIResources {
				if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
					served = true
				}
			}
		} else if !apierrors.IsNotFound(err) {
			d.add("crds", gvk.Kind, StatusFail, "discovery of %s: %v", gvk.GroupVersion(), err)
			continue
		}
		if !served {
			missing = append(missing, gvk.Kind+" ("+gvk.GroupVersion().String()+")")
		}
	}
	for _, m := range missing {
		d.add("crds", m, StatusFail, "the config renders this kind and the cluster does not serve it; %s", missingKindHint(m))
	}
	if len(missing) == 0 {
		names := make([]string, 0, len(gvks))
		for _, g := range gvks {
			names = append(names, g.Kind)
		}
		d.add("crds", "rendered kinds", StatusOK, "all %d served: %s", len(gvks), strings.Join(names, ", "))
	}
}

// checkInherit reads pcsync's own pod and shows what agent Jobs inherit.
func (d *doctor) checkInherit(ctx context.Context, reachable bool) introspect.Inheritance {
	var none introspect.Inheritance
	if !reachable {
		d.add("inherit", "own pod", StatusSkip, "the cluster is unreachable")
		return none
	}
	self, err := introspect.Detect(ctx, d.cs, d.opts.Introspect)
	if err != nil {
		d.add("inherit", "own pod", StatusFail, "%v", err)
		return none
	}
	if !self.InCluster {
		d.add("inherit", "own pod", StatusSkip, "not running in a pod: agent Jobs inherit nothing")
		return none
	}
	in := config.Inherit{ImagePullSecrets: true, DNSConfig: true}
	if d.model != nil {
		in = d.model.Settings.Spec.Inherit
	}
	inh := self.Inherit(in)
	d.add("inherit", "own pod", StatusOK, "%s/%s (service account %s)", self.Namespace, self.Name, self.ServiceAccount)
	lines := inh.Describe()
	if len(lines) == 0 {
		why := "its pod has no imagePullSecrets or dnsConfig"
		if !in.ImagePullSecrets && !in.DNSConfig {
			why = "Settings spec.inherit turns both off"
		}
		lines = []string{"nothing (" + why + ")"}
	}
	for _, l := range lines {
		d.add("inherit", "agent Jobs inherit", StatusInfo, "%s", l)
	}
	return inh
}

func (d *doctor) checkSessions(ctx context.Context) {
	if d.model == nil {
		return
	}
	for i := range d.model.Companies {
		c := &d.model.Companies[i]
		if c.Spec.Sessions == nil {
			continue
		}
		ns := d.model.Namespace(c)
		name := ns + "/paperclip-sessions"
		pvc, err := d.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "paperclip-sessions", metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			d.add("sessions", name, StatusWarn, "not found: not applied yet (pcsync apply, or the daemon, creates it)")
			continue
		case err != nil:
			d.add("sessions", name, StatusFail, "%v", err)
			continue
		}
		var problems []string
		if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) &&
			!slices.Contains(pvc.Status.AccessModes, corev1.ReadWriteMany) {
			problems = append(problems, fmt.Sprintf("access modes %v lack ReadWriteMany (agent pods on different nodes share it)", pvc.Spec.AccessModes))
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			sc := "the default storage class"
			if pvc.Spec.StorageClassName != nil {
				sc = "storage class " + *pvc.Spec.StorageClassName
			}
			problems = append(problems, fmt.Sprintf("phase %s, not Bound: does %s provision ReadWriteMany volumes?", pvc.Status.Phase, sc))
		}
		if len(problems) > 0 {
			d.add("sessions", name, StatusFail, "%s", strings.Join(problems, "; "))
			continue
		}
		d.add("sessions", name, StatusOK, "Bound, ReadWriteMany, %s", pvc.Status.Capacity.Storage())
	}
}

// checkImages resolves every image the config's pods would run in its
// registry (package imagecheck), with the credentials of the pull secrets
// that doctor's own credentials may read; a missing image is a failure
// that names the command that fixes it.
func (d *doctor) checkImages(ctx context.Context, reachable bool, inherited introspect.Inheritance) {
	if d.model == nil {
		return
	}
	opts := d.opts.ImageCheck
	kc := &imagecheck.Keychain{}
	unread := 0
	if reachable {
		for i := range d.model.Companies {
			c := &d.model.Companies[i]
			ns := d.model.Namespace(c)
			for _, name := range introspect.MergePullSecrets(d.model.ImagePullSecrets(c), inherited.ImagePullSecrets) {
				sec, err := d.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					unread++
					continue
				}
				data := sec.Data[corev1.DockerConfigJsonKey]
				if data == nil {
					data = sec.Data[corev1.DockerConfigKey]
				}
				if err := kc.Add("Secret/"+ns+"/"+name, data); err != nil {
					d.add("images", "Secret/"+ns+"/"+name, StatusWarn, "%v", err)
				}
			}
		}
	}
	opts.Keychain = kc
	for _, f := range imagecheck.Preflight(ctx, d.model, opts) {
		switch {
		case f.Result.OK():
			d.add("images", f.Image, StatusOK, "found (%s) for %s", f.Result.Digest, strings.Join(f.Users, ", "))
		case f.Result.Status == imagecheck.StatusDenied && unread > 0:
			d.add("images", f.Image, StatusWarn, "%s: %s (%d pull secret(s) could not be read with your credentials to check it)",
				f.Result.Detail, f.Advice, unread)
		default:
			d.add("images", f.Image, StatusFail, "%s: %s; needed by %s: %s", f.Result.Status, f.Result.Detail, strings.Join(f.Users, ", "), f.Advice)
		}
	}
}

func (d *doctor) checkSpool() {
	if d.opts.Spool == "" {
		d.add("spool", "spool directory", StatusSkip, "no --spool given")
		return
	}
	fi, err := os.Stat(d.opts.Spool)
	if err != nil {
		d.add("spool", d.opts.Spool, StatusFail, "%v", err)
		return
	}
	if !fi.IsDir() {
		d.add("spool", d.opts.Spool, StatusFail, "not a directory")
		return
	}
	f, err := os.CreateTemp(d.opts.Spool, ".pcsync-doctor-*.tmp")
	if err != nil {
		d.add("spool", d.opts.Spool, StatusFail, "not writable: %v (pcsync writes logs, results and its state there)", err)
		return
	}
	name := f.Name()
	_, werr := f.Write([]byte("doctor\n"))
	serr := f.Sync()
	cerr := f.Close()
	rerr := os.Remove(name)
	if err := errors.Join(werr, serr, cerr, rerr); err != nil {
		d.add("spool", d.opts.Spool, StatusFail, "not writable: %v", err)
		return
	}
	d.add("spool", d.opts.Spool, StatusOK, "writable")
	d.checkDaemon()
}

// checkDaemon reads the daemon's status file: a live daemon is OK, none
// (never started, or stopped) a warning, a stuck or vanished one a failure.
func (d *doctor) checkDaemon() {
	stateDir := d.opts.StateDir
	if stateDir == "" {
		stateDir = runs.DefaultStateDir(d.opts.Spool)
	}
	running, state, st, err := spool.Liveness(stateDir, time.Now())
	switch {
	case err != nil:
		d.add("daemon", stateDir, StatusFail, "%v", err)
	case running && st != nil:
		var companies []string
		for _, c := range st.Companies {
			companies = append(companies, c.Slug)
		}
		d.add("daemon", stateDir, StatusOK, "%s: pid %d, %s executor, version %s, companies: %s",
			state, st.PID, st.Executor, cmpOr(st.Version, "unknown"), cmpOr(strings.Join(companies, ", "), "none"))
	case running:
		d.add("daemon", stateDir, StatusOK, "%s", state)
	case st == nil || st.StoppedAt != nil || st.HeartbeatAt == nil:
		d.add("daemon", stateDir, StatusWarn, "%s: requests wait until `pcsync daemon --spool %s` runs", state, d.opts.Spool)
	default:
		d.add("daemon", stateDir, StatusFail, "%s; look at the daemon's logs, and restart it", state)
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// missingKindHint says what to do about a kind ("Kind (group/version)")
// the cluster does not serve: apply's hint for its group, else to install
// what provides it.
func missingKindHint(kind string) string {
	for group, hint := range apply.DefaultMissingKindHints() {
		if strings.Contains(kind, "("+group+"/") {
			return hint
		}
	}
	return "install the CRD or operator that provides it"
}
