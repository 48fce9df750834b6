package kubeexec

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
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
}

// NewInput builds the Input of r: the adapter's command line for the run
// (r.Invocation in working directory BuildOptions.WorkDir) and the values of
// the adapter's env keys (the configured envKeys and those the adapter asks
// for given the agent's env) taken from environ, the daemon's KEY=VALUE
// lines. An adapter refusal is a *runs.StartError with code invalid_request.
func NewInput(r *runs.Run, environ []string, o BuildOptions) (Input, error) {
	o = o.withDefaults()
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
	daemon := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			daemon[k] = v
		}
	}
	// As the local executor does: the adapter decides extra keys from the
	// configured keys as the daemon has them and the agent's env.
	keys := r.Model.Adapter(r.Agent.Adapter).EnvKeys
	seen := map[string]string{}
	for _, k := range keys {
		if v, ok := daemon[k]; ok {
			seen[k] = v
		}
	}
	maps.Copy(seen, r.Agent.Env)
	fwd := map[string]string{}
	for _, k := range slices.Concat(keys, r.Adapter.ForwardEnvKeys(seen)) {
		if v, ok := daemon[k]; ok {
			fwd[k] = v
		}
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
		Forwarded:   fwd,
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
		if e.secret && e.value != "" {
			out = append(out, e.value)
		}
	}
	for _, v := range in.Agent.Env {
		out = append(out, v)
	}
	return out
}

// envEntry is one variable of the agent container.
type envEntry struct {
	name, value string
	// secret entries live in the per-run Secret; the container gets a
	// secretKeyRef.
	secret bool
}

// env resolves the container environment, lowest precedence first (the same
// order as the local executor): XDG_CACHE_HOME; the forwarded daemon keys
// (secret); the agent's env; the adapter's env; HOME; the wake context
// (secret); PAPERCLIP_RUN_ID, PAPERCLIP_COMPANY_ID, PAPERCLIP_AGENT_ID,
// PAPERCLIP_API_URL, PAPERCLIP_API_KEY (secret); PCSYNC_PROMPT_FILE. The
// result is sorted by name.
func (in Input) env(o BuildOptions) []envEntry {
	m := map[string]envEntry{}
	put := func(name, value string, secret bool) { m[name] = envEntry{name, value, secret} }
	put("XDG_CACHE_HOME", o.CacheDir, false)
	for k, v := range in.Forwarded {
		put(k, v, true)
	}
	for k, v := range in.Agent.Env {
		put(k, v, false)
	}
	for k, v := range in.Command.Env {
		put(k, v, false)
	}
	put("HOME", in.home(o), false)
	for k, v := range in.Context {
		put(runs.ContextEnvName(k), contextValue(v), true)
	}
	put("PAPERCLIP_RUN_ID", in.RunID, false)
	put("PAPERCLIP_COMPANY_ID", in.Company.Spec.ID, false)
	put("PAPERCLIP_AGENT_ID", cmp.Or(in.AgentID, in.Agent.Name), false)
	if in.APIURL != "" {
		put("PAPERCLIP_API_URL", in.APIURL, false)
	}
	if in.APIKey != "" {
		put("PAPERCLIP_API_KEY", in.APIKey, true)
	}
	put(EnvPromptFile, o.InputDir+"/"+SecretKeyPrompt, false)
	out := make([]envEntry, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// home is HOME: on the sessions volume when the company has one (so CLI
// sessions survive for resume), else an emptyDir.
func (in Input) home(o BuildOptions) string {
	if in.Company.Spec.Sessions != nil {
		return o.SessionsMountPath + "/home/" + in.Agent.Name
	}
	return o.HomeDir
}

// contextValue renders a wake-context value like the local executor does.
func contextValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	default:
		return fmt.Sprint(x)
	}
}

// BuildSecret returns the run's Secret, owned by job (which must have been
// created: its UID is the owner reference). It holds the prompt under
// SecretKeyPrompt and each secret variable under SecretEnvPrefix+NAME. It is
// immutable, which also spares the kubelet from watching it.
func BuildSecret(in Input, job *batchv1.Job, o BuildOptions) (*corev1.Secret, error) {
	o = o.withDefaults()
	data := map[string][]byte{SecretKeyPrompt: in.Command.Stdin}
	size := len(in.Command.Stdin)
	for _, e := range in.env(o) {
		if e.secret {
			data[SecretEnvPrefix+e.name] = []byte(e.value)
			size += len(SecretEnvPrefix+e.name) + len(e.value)
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
				Controller: ptr(true),
			}},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr(true),
		Data:      data,
	}, nil
}

func ptr[T any](v T) *T { return &v }
