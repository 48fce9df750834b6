package sandbox

import (
	"fmt"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// ProxyAddresses knows the address of a tenant namespace's egress proxy
// Service (agentenv.Addresses).
type ProxyAddresses interface {
	ClusterIP(namespace string) (string, error)
}

// addProxyEnv adds, for a lease of a company in egress mode proxy, the
// egress proxy's variables to an execute's env (they win over the
// execute's own). A warm pool member gets them only here, once claimed:
// its pod was made without them. A company whose tenant has no proxy
// Service fails the execute, naming the Service.
func (m *Manager) addProxyEnv(l *lease, cmd *cmdclient.Command) error {
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
	return nil
}
