package kubeexec

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// Keys of the per-run Secret.
const (
	// SecretKeyPrompt holds the prompt, mounted as a file and fed to the
	// CLI's standard input.
	SecretKeyPrompt = "prompt"
	// SecretEnvPrefix prefixes the key of each secret environment variable:
	// env.ANTHROPIC_API_KEY.
	SecretEnvPrefix = "env."
	// EnvPromptFile names the prompt file's path in the container
	// environment; the launcher reads it.
	EnvPromptFile = "PCSYNC_PROMPT_FILE"
)

// maxSecretBytes is the API server's limit on a Secret's data.
const maxSecretBytes = 1 << 20

// Input is everything one run's Job and Secret are built from. Build it with
// NewInput; the builders read nothing else (no clock, no environment), so
// their output is a function of Input and BuildOptions.
type Input struct {
	// Model, Company and Agent are the config the run was accepted against.
	Model   *config.Model
	Company *config.Company
	Agent   *config.Agent
	// RunID is the run's id.
	RunID string
	// WaitProxy: the company's egress proxy was waking from zero when the
	// run started (ProxyScale.Need): pcsync init waits for it before the
	// CLI starts.
	WaitProxy bool
	// RequestFile is the base name of the spool request file.
	RequestFile string
	// Timeout becomes activeDeadlineSeconds; zero means none.
	Timeout time.Duration
	// Context is the request's Paperclip wake context (PAPERCLIP_* env).
	Context map[string]any
	// Command is the adapter's command line; its Stdin is the prompt.
	Command adapters.Command
	// Forwarded are the values of the adapter's env keys found in the
	// daemon's environment. They are secret.
	Forwarded map[string]string
	// AgentID is PAPERCLIP_AGENT_ID: the request's paperclip.agentId, else
	// the agent's name.
	AgentID string
	// APIURL and APIKey become PAPERCLIP_API_URL and PAPERCLIP_API_KEY when
	// not empty: the config's server URL and the run's JWT, for a request
	// with paperclip credentials. APIKey is secret: it lives in the per-run
	// Secret only.
	APIURL, APIKey string
	// Proxy are the egress proxy's variables (egress mode proxy; see
	// package agentenv); none otherwise.
	Proxy map[string]string
	// Credentials are the company's credentials the CLI uses, with the
	// run's token (egress mode proxy); nil when none.
	Credentials *agentenv.Credentials
	// HostAliases are the pod's /etc/hosts entries for the hosts it reaches
	// without the proxy (the Paperclip server's), in egress mode proxy,
	// where the pod has no cluster DNS (agentenv.NoClusterDNS).
	HostAliases []corev1.HostAlias
}

// NewInput builds the Input of r: the adapter's command line for the run
// (r.Invocation in working directory BuildOptions.WorkDir) and the values of
// the adapter's env keys (the configured envKeys and those the adapter asks
// for given the agent's env) taken from environ, the daemon's KEY=VALUE
// lines. An adapter refusal is a *runs.StartError with code invalid_request.
func NewInput(r *runs.Run, environ []string, o BuildOptions) (Input, error) {
	o.complete()
	if r.Adapter == nil {
		return Input{}, fmt.Errorf("run %s: no adapter", r.RunID)
	}
	inv := r.Invocation
	inv.Command = slices.Clone(inv.Command)
	inv.WorkDir = o.WorkDir
	cmd, err := r.Adapter.Command(inv)
	if err != nil {
		return Input{}, &runs.StartError{Code: result.ErrInvalidRequest, Err: fmt.Errorf("adapter %s: %w", r.Agent.Adapter, err)}
	}
	in := Input{
		Model:       r.Model,
		Company:     r.Company,
		Agent:       r.Agent,
		RunID:       r.RunID,
		RequestFile: filepath.Base(r.RequestFile),
		Timeout:     r.Timeout,
		Context:     r.Request.Context,
		Command:     cmd,
		Forwarded:   runs.ForwardedEnv(r, runs.EnvMap(environ)),
		AgentID:     r.PaperclipAgentID(),
	}
	if r.HasCallback() {
		// A pod cannot reach the writer's apiUrl (typically 127.0.0.1): the
		// config says where the server is for pods.
		in.APIURL, in.APIKey = r.Model.ServerURL(), r.APIKey()
	}
	return in, nil
}

// Namespace is the run's tenant namespace.
func (in Input) Namespace() string { return in.Model.Namespace(in.Company) }

// JobName is the run's Job name (see JobName).
func (in Input) JobName() string { return JobName(in.Company.Slug(), in.Agent.Name, in.RunID) }

// SecretValues returns the values that must never appear in logs, results or
// errors: the forwarded env values, the context values, the run's Paperclip
// JWT and (as the local executor treats them) the agent's env values.
func (in Input) SecretValues() []string {
	var out []string
	for _, e := range in.env(DefaultBuildOptions()) {
		if e.Secret && e.Value != "" {
			out = append(out, e.Value)
		}
	}
	for _, v := range in.Agent.Env {
		out = append(out, v)
	}
	return out
}

// env resolves the container environment: runs.EnvSpec's (the one the
// local executor builds too, with the forwarded keys but not the daemon's
// basics), over XDG_CACHE_HOME and under PCSYNC_PROMPT_FILE. Secret
// variables live in the per-run Secret; the container gets a secretKeyRef.
// The result is sorted by name.
func (in Input) env(o BuildOptions) []runs.EnvVar {
	spec := runs.EnvSpec{
		Forwarded: in.Forwarded, Agent: in.Agent.Env, Adapter: in.Command.Env, Home: in.home(o), Context: in.Context,
		RunID: in.RunID, CompanyID: in.Company.Spec.ID, AgentID: cmp.Or(in.AgentID, in.Agent.Name),
		APIURL: in.APIURL, APIKey: in.APIKey, Proxy: in.Proxy,
	}
	m := map[string]runs.EnvVar{"XDG_CACHE_HOME": {Name: "XDG_CACHE_HOME", Value: o.CacheDir}}
	for _, v := range spec.Vars() {
		m[v.Name] = v
	}
	m[EnvPromptFile] = runs.EnvVar{Name: EnvPromptFile, Value: o.InputDir + "/" + SecretKeyPrompt}
	if rc := in.Credentials; rc != nil {
		for _, k := range rc.Blank {
			m[k] = runs.EnvVar{Name: k}
		}
		for k, v := range rc.Set {
			m[k] = runs.EnvVar{Name: k, Value: v, Secret: rc.Secret(v)}
		}
	}
	out := make([]runs.EnvVar, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// envValues is env's values by name.
func (in Input) envValues(o BuildOptions) map[string]string {
	m := map[string]string{}
	for _, e := range in.env(o) {
		m[e.Name] = e.Value
	}
	return m
}

// home is HOME: on the sessions volume when the company has one (so CLI
// sessions survive for resume), else an emptyDir.
func (in Input) home(o BuildOptions) string {
	if in.Company.Spec.Sessions != nil {
		return o.SessionsMountPath + "/home/" + in.Agent.Name
	}
	return o.HomeDir
}

// BuildSecret returns the run's Secret, owned by job (which must have been
// created: its UID is the owner reference). It holds the prompt under
// SecretKeyPrompt and each secret variable under SecretEnvPrefix+NAME. It is
// immutable, which also spares the kubelet from watching it.
func BuildSecret(in Input, job *batchv1.Job, o BuildOptions) (*corev1.Secret, error) {
	o.complete()
	data := map[string][]byte{SecretKeyPrompt: in.Command.Stdin}
	size := len(in.Command.Stdin)
	for _, e := range in.env(o) {
		if e.Secret {
			data[SecretEnvPrefix+e.Name] = []byte(e.Value)
			size += len(SecretEnvPrefix+e.Name) + len(e.Value)
		}
	}
	if size > maxSecretBytes {
		return nil, fmt.Errorf("Secret/%s/%s: prompt and secret env take %d bytes, more than the 1 MiB a Secret may hold", job.Namespace, job.Name, size)
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      job.Name,
			Namespace: job.Namespace,
			Labels:    maps.Clone(job.Labels),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1",
				Kind:       "Job",
				Name:       job.Name,
				UID:        job.UID,
				Controller: ptr.To(true),
			}},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true),
		Data:      data,
	}, nil
}
