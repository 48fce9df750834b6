package render

import (
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
)

// envEgressHosts are the hosts an agent's env implies beyond its adapter's
// allowFqdns (the host of a custom base URL, Bedrock's regional endpoints
// when Claude Code runs on Bedrock), as pkg/adapters knows them per CLI.
func envEgressHosts(t config.AdapterType, env map[string]string) []string {
	hosts, err := adapters.EgressHostsFor(t, env)
	if err != nil {
		// The schema admits only known adapter types.
		return nil
	}
	return hosts
}
