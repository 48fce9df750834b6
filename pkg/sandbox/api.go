package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/imagecheck"
	"github.com/pcsync/pcsync/pkg/podsched"
)

// API serves the hooks of pcsync's Paperclip plugin
// (integrations/paperclip-sandbox) on a Unix socket: POST /v1/hooks/<hook>
// with the hook's params as Paperclip passes them, answered with the hook's
// result; runCancelled ({runId}) ends a cancelled run's leases. execute answers NDJSON: {"stdout":…} and {"stderr":…} chunks while
// the command runs, then one {"result":…} or {"error":…}. Any refusal is a
// non-2xx status with {"error":{"message","code"}}. Nothing of a request is
// logged but ids and key names.
type API struct {
	m      *Manager
	socket string
	log    *slog.Logger
}

// NewAPI returns the API of m on socket (created with mode 0600).
func NewAPI(m *Manager, socket string) *API {
	return &API{m: m, socket: socket, log: m.log}
}

// Serve listens until ctx ends, then stops accepting and returns once the
// requests in flight are done (executes are cut off after 5 s).
func (a *API) Serve(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(a.socket), 0o700); err != nil {
		return fmt.Errorf("sandbox API: %w", err)
	}
	if err := os.Remove(a.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sandbox API: remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", a.socket)
	if err != nil {
		return fmt.Errorf("sandbox API: %w", err)
	}
	if err := os.Chmod(a.socket, 0o600); err != nil {
		_ = ln.Close()
		return fmt.Errorf("sandbox API: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/hooks/{hook}", a.hook)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	a.log.Info("sandbox API listening", slog.String("socket", a.socket))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("sandbox API: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	_ = os.Remove(a.socket)
	return nil
}

// baseParams are the fields every hook's params share.
type baseParams struct {
	DriverKey     string         `json:"driverKey"`
	CompanyID     string         `json:"companyId"`
	EnvironmentID string         `json:"environmentId"`
	Config        map[string]any `json:"config"`
}

type leaseRef struct {
	ProviderLeaseID *string        `json:"providerLeaseId"`
	Metadata        map[string]any `json:"metadata"`
}

func (a *API) hook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("hook")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	if err != nil {
		fail(w, http.StatusRequestEntityTooLarge, "bad_request", "request body: "+err.Error())
		return
	}
	var base baseParams
	if err := json.Unmarshal(body, &base); err != nil {
		fail(w, http.StatusBadRequest, "bad_request", "params: "+err.Error())
		return
	}
	switch name {
	case "validateConfig":
		a.validate(w, base)
	case "probe":
		a.probe(r.Context(), w, base)
	case "acquireLease":
		a.acquire(r.Context(), w, base, body)
	case "resumeLease":
		var p struct {
			ProviderLeaseID string `json:"providerLeaseId"`
		}
		_ = json.Unmarshal(body, &p)
		info, err := a.m.Resume(r.Context(), p.ProviderLeaseID)
		if err != nil {
			refuse(w, err)
			return
		}
		reply(w, leaseJSON(info))
	case "releaseLease", "destroyLease":
		var p struct {
			ProviderLeaseID *string        `json:"providerLeaseId"`
			LeaseMetadata   map[string]any `json:"leaseMetadata"`
			Cancel          bool           `json:"cancelActiveWork"`
		}
		_ = json.Unmarshal(body, &p)
		if p.ProviderLeaseID == nil || *p.ProviderLeaseID == "" {
			reply(w, nil) // no lease was made
			return
		}
		ns, _ := p.LeaseMetadata["namespace"].(string)
		state, err := a.m.Release(r.Context(), ReleaseParams{ID: *p.ProviderLeaseID, Cancel: p.Cancel || name == "destroyLease", Namespace: ns})
		if err != nil {
			refuse(w, err)
			return
		}
		reply(w, map[string]any{"providerLeaseId": *p.ProviderLeaseID, "state": string(state)})
	case "realizeWorkspace":
		var p struct {
			Lease leaseRef `json:"lease"`
		}
		_ = json.Unmarshal(body, &p)
		cwd, err := a.m.Workspace(deref(p.Lease.ProviderLeaseID))
		if err != nil {
			refuse(w, err)
			return
		}
		reply(w, map[string]any{"cwd": cwd})
	case "execute":
		a.execute(r.Context(), w, body)
	case "runCancelled":
		var p struct {
			RunID string `json:"runId"`
		}
		_ = json.Unmarshal(body, &p)
		n, err := a.m.CancelRun(r.Context(), p.RunID)
		if err != nil {
			refuse(w, err)
			return
		}
		reply(w, map[string]any{"released": n})
	default:
		fail(w, http.StatusNotFound, "unknown_hook", fmt.Sprintf("hook %q is not served by this pcsync daemon", name))
	}
}

func (a *API) validate(w http.ResponseWriter, base baseParams) {
	cfg, errs := ParseConfig(base.Config)
	if m := a.m.model(); m != nil {
		errs = append(errs, cfg.Check(m)...)
	}
	out := map[string]any{"ok": len(errs) == 0}
	if len(errs) > 0 {
		out["errors"] = errorStrings(errs)
	} else {
		out["normalizedConfig"] = cfg.Normalized()
	}
	if a.m.model() == nil {
		out["warnings"] = []string{"pcsync has no valid config loaded yet: config.company was not checked"}
	}
	reply(w, out)
}

// probe checks what a lease needs without creating one: the config, the
// tenant namespace, and a server-side dry run of a lease pod (admission:
// Pod Security, quota).
func (a *API) probe(ctx context.Context, w http.ResponseWriter, base baseParams) {
	var diags []map[string]any
	add := func(sev, code, msg string) {
		diags = append(diags, map[string]any{"severity": sev, "code": code, "message": msg})
	}
	cfg, errs := ParseConfig(base.Config)
	m := a.m.model()
	if m == nil {
		add("error", "no_config", "pcsync has no valid config loaded: see the daemon's log and /readyz")
	} else {
		errs = append(errs, cfg.Check(m)...)
	}
	for _, e := range errs {
		add("error", "config_invalid", e.Error())
	}
	if len(diags) == 0 {
		c, _ := m.Company(cfg.Company)
		ns := m.Namespace(c)
		if _, err := a.m.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				add("error", "namespace_missing", fmt.Sprintf("namespace %s of company %s does not exist: run `pcsync apply` first", ns, c.Slug()))
			} else {
				add("error", "cluster_unreachable", "Kubernetes API: "+err.Error())
			}
		} else {
			image := cfg.Image
			if image == "" {
				image = m.Adapter(DefaultAdapterType).Image
			}
			r := Record{ID: "pcsync-sbx-probe", Namespace: ns, Company: c.Slug(), Image: image, ExpiresAt: time.Now().Add(time.Hour)}
			a.m.placeServer(&r, m)
			a.probeImages(ctx, m, r, add)
			for _, pp := range probePods(c) {
				r.Agent = pp.agent
				pod, err := BuildPod(&r, m)
				if err == nil {
					_, err = a.m.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				}
				if err != nil {
					add("error", "pod_refused", pp.who+": "+createError(r, err).Error())
				} else {
					add("info", "pod_admitted", fmt.Sprintf("%s (image %s) is admitted in namespace %s and needs %s",
						pp.who, image, ns, podsched.Of(&pod.Spec)))
				}
			}
		}
	}
	ok := true
	for _, d := range diags {
		if d["severity"] == "error" {
			ok = false
		}
	}
	summary := "pcsync sandbox ready"
	if !ok {
		summary = "pcsync sandbox not usable: " + diags[0]["message"].(string)
	}
	reply(w, map[string]any{"ok": ok, "summary": summary, "diagnostics": diags})
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
// and the init container's when the image does not hold pcsync): a missing
// one is an error naming what fixes it, one that needs the tenant's pull
// secrets (which the daemon does not read) is a note.
func (a *API) probeImages(ctx context.Context, m *config.Model, r Record, add func(sev, code, msg string)) {
	want := []imagecheck.Want{{Image: r.Image, Users: []string{"the lease"}, Builtin: m.ImageHasServer(r.Image)}}
	if r.HelperImage != "" {
		want = append(want, imagecheck.Want{Image: r.HelperImage, Users: []string{"the lease's init container"}, Builtin: true})
	}
	for _, f := range imagecheck.Resolve(ctx, m, want, imagecheck.DefaultOptions()) {
		line := fmt.Sprintf("%s for %s: %s", f.Result, f.Users[0], f.Advice)
		switch {
		case f.Result.OK():
		case f.Builtin && m.ImageRegistry() == "":
			add("warning", "image_no_registry", line)
		case f.Result.Status == imagecheck.StatusUnreachable:
			// The nodes may reach a registry the daemon does not.
			add("warning", "image_unreachable", line)
		case f.Result.Status == imagecheck.StatusDenied:
			add("info", "image_unverified", fmt.Sprintf("%s: the registry wants credentials (the tenant's pull secrets, which pcsync does not read); the kubelet will use them", f.Result))
		default:
			add("error", "image_"+string(f.Result.Status), line)
		}
	}
}

func (a *API) acquire(ctx context.Context, w http.ResponseWriter, base baseParams, body []byte) {
	var p struct {
		RunID              string  `json:"runId"`
		AgentID            string  `json:"agentId"`
		AdapterType        string  `json:"adapterType"`
		RequestedExpiresAt *string `json:"requestedExpiresAt"`
	}
	_ = json.Unmarshal(body, &p)
	cfg, errs := ParseConfig(base.Config)
	if len(errs) > 0 {
		err := configErrors("config_invalid", errs)
		a.m.observeAcquire(time.Now(), err)
		refuse(w, err)
		return
	}
	ap := AcquireParams{Config: cfg, CompanyID: base.CompanyID, EnvironmentID: base.EnvironmentID,
		RunID: p.RunID, AgentID: p.AgentID, AdapterType: p.AdapterType}
	if p.RequestedExpiresAt != nil && *p.RequestedExpiresAt != "" {
		t, err := time.Parse(time.RFC3339Nano, *p.RequestedExpiresAt)
		if err != nil {
			fail(w, http.StatusBadRequest, "bad_request", "requestedExpiresAt: "+err.Error())
			return
		}
		ap.RequestedExpiresAt = &t
	}
	info, err := a.m.Acquire(ctx, ap)
	if err != nil {
		refuse(w, err)
		return
	}
	reply(w, leaseJSON(info))
}

func (a *API) execute(ctx context.Context, w http.ResponseWriter, body []byte) {
	var p struct {
		Lease     leaseRef          `json:"lease"`
		Command   string            `json:"command"`
		Args      []string          `json:"args"`
		Cwd       string            `json:"cwd"`
		Env       map[string]string `json:"env"`
		Stdin     *string           `json:"stdin"`
		TimeoutMs int64             `json:"timeoutMs"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		fail(w, http.StatusBadRequest, "bad_request", "params: "+err.Error())
		return
	}
	if p.Command == "" {
		fail(w, http.StatusBadRequest, "bad_request", "params.command is empty")
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	line := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(v)
		if fl != nil {
			fl.Flush()
		}
	}
	res, err := a.m.Execute(ctx, ExecParams{
		LeaseID: deref(p.Lease.ProviderLeaseID), Command: p.Command, Args: p.Args, Cwd: p.Cwd,
		Env: p.Env, Stdin: p.Stdin, Timeout: time.Duration(p.TimeoutMs) * time.Millisecond,
	}, func(stream string, chunk []byte) { line(map[string]string{stream: string(chunk)}) })
	if err != nil {
		code := "execute_failed"
		var ue *UserError
		if errors.As(err, &ue) {
			code = ue.Code
		}
		line(map[string]any{"error": map[string]string{"message": err.Error(), "code": code}})
		return
	}
	line(map[string]any{"result": map[string]any{
		"exitCode": res.ExitCode, "signal": nullable(res.Signal), "timedOut": res.TimedOut,
		"stdout": res.Stdout, "stderr": res.Stderr,
	}})
}

func leaseJSON(info LeaseInfo) map[string]any {
	return map[string]any{
		"providerLeaseId": info.ID,
		"expiresAt":       info.ExpiresAt.UTC().Format(time.RFC3339),
		"metadata":        info.Metadata,
	}
}

// configErrors joins field errors into one refusal.
func configErrors(code string, errs []ConfigError) error {
	return &UserError{Code: code, Message: strings.Join(errorStrings(errs), "; ")}
}

func errorStrings(errs []ConfigError) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func refuse(w http.ResponseWriter, err error) {
	var ue *UserError
	switch {
	case errors.As(err, &ue):
		fail(w, http.StatusUnprocessableEntity, ue.Code, ue.Message)
	case errors.Is(err, ErrNoLease):
		fail(w, http.StatusNotFound, "no_lease", err.Error())
	default:
		fail(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": msg, "code": code}})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
