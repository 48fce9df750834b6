package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// ProxyAddresses knows the address of a tenant namespace's egress proxy
// Service (agentenv.Addresses).
type ProxyAddresses interface {
	ClusterIP(namespace string) (string, error)
}

// ProxyScale scales the tenants' egress proxies (scale.Controller).
type ProxyScale interface {
	// Need keeps namespace's proxy up for a lease about to start, and
	// reports false while it is waking from zero.
	Need(namespace string) bool
	// Ready waits until namespace's proxy has an available pod.
	Ready(ctx context.Context, namespace string) error
}

// addProxyEnv adds, for a lease of a company in egress mode proxy, the
// egress proxy's variables to an execute's env (they win over the
// execute's own). A warm pool member gets them only here, once claimed:
// its pod was made without them. A company whose tenant has no proxy
// Service fails the execute, naming the Service.
func (m *Manager) addProxyEnv(ctx context.Context, l *lease, cmd *cmdclient.Command) error {
	if m.opts.ProxyAddresses == nil {
		return nil
	}
	model := m.model()
	c, ok := model.Company(l.Company)
	if !ok || model.EgressMode(c) != config.EgressProxy {
		return nil
	}
	ip, err := m.opts.ProxyAddresses.ClusterIP(l.Namespace)
	if err != nil {
		return fmt.Errorf("company %s is in egress mode proxy: %w", l.Company, err)
	}
	if cmd.Env == nil {
		cmd.Env = map[string]string{}
	}
	for k, v := range agentenv.Vars(model, c, ip, l.Agent) {
		cmd.Env[k] = v
	}
	if err := m.replaceKeys(ctx, l, c, ip, cmd); err != nil {
		return err
	}
	cmd.Argv = adapters.WithBaseURL(adapters.Type(l.AdapterType), cmd.Argv, cmd.Env)
	return nil
}

// replaceKeys drops, from an execute's env, the values of the key
// variables of each provider the company declares a credential for (spec.
// credentials) and sets the lease's token and the proxy's route instead;
// an env that carries no such key gets only a GitHub credential's
// variables (git's config), if the company declares one. The lease's token is
// made by its first such execute, its hash put on the lease's pod.
func (m *Manager) replaceKeys(ctx context.Context, l *lease, c *config.Company, ip string, cmd *cmdclient.Command) error {
	if len(c.Spec.Credentials) == 0 {
		return nil
	}
	// The token is made only when an execute carries a key: the
	// variables are found with a stand-in, replaced by the token below.
	rc := agentenv.CredentialsFor(c, adapters.Type(l.AdapterType), ip, "token")
	if rc == nil {
		return nil
	}
	keys := rc.KeyVars(cmd.Env)
	if len(keys) == 0 {
		// No model key: a GitHub credential's git config all the same.
		if rc = rc.GitHubOnly(); rc == nil {
			return nil
		}
	}
	token, err := m.leaseToken(ctx, l)
	if err != nil {
		return err
	}
	rc = rc.WithToken(token)
	if cmd.Env == nil {
		cmd.Env = map[string]string{}
	}
	for _, k := range rc.Blank {
		delete(cmd.Env, k)
	}
	for k, v := range rc.Set {
		cmd.Env[k] = v
	}
	m.opts.Metrics.SandboxKeysReplaced(l.Company, len(keys))
	return nil
}

// leaseToken is the lease's credential token, made and its hash put on
// the lease's pod on first use.
func (m *Manager) leaseToken(ctx context.Context, l *lease) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.token != "" {
		return l.token, nil
	}
	token, err := inject.NewToken()
	if err != nil {
		return "", err
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		agentpod.AnnotationTokenHash: agentpod.TokenHash(token)}}})
	if _, err := m.cs.CoreV1().Pods(l.Namespace).Patch(ctx, l.ID, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "pcsync"}); err != nil {
		return "", fmt.Errorf("Pod/%s/%s: credential token: %w", l.Namespace, l.ID, err)
	}
	l.token = token
	return token, nil
}

// writeCodexConfig writes, once per lease of codex_local whose execute
// env points OPENAI_BASE_URL at a credential route, codex's system config
// with that base URL: codex reads it from no variable, and Paperclip runs
// the CLI inside a shell script whose argv pcsync cannot extend. Not where
// pods share the host's filesystem (HostRoot): there is no pod's /etc.
func (m *Manager) writeCodexConfig(ctx context.Context, l *lease, c *cmdclient.Client, env map[string]string) error {
	if m.opts.HostRoot != "" || adapters.Type(l.AdapterType) != adapters.CodexLocal || !strings.Contains(env["OPENAI_BASE_URL"], inject.PathPrefix) {
		return nil
	}
	l.mu.Lock()
	done := l.codexConfig
	l.mu.Unlock()
	if done {
		return nil
	}
	cmd := syncCommand(time.Minute, putFileScript, adapters.CodexSystemConfigDir+"/config.toml", "644")
	var stderr lockedBuffer
	cmd.Stdin, cmd.Stderr = bytes.NewReader(adapters.CodexSystemConfig(env)), &stderr
	exit, err := c.Exec(ctx, cmd)
	if err == nil && exitFailed(exit) {
		err = fmt.Errorf("%s%s", exitWords(exit), stderrTail(exit, &stderr))
	}
	if err != nil {
		return fmt.Errorf("codex's config at %s: %w", adapters.CodexSystemConfigDir, err)
	}
	l.mu.Lock()
	l.codexConfig = true
	l.mu.Unlock()
	return nil
}
