package images

import (
	"slices"
	"strings"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// Image names (the repository part of a reference, without registry or tag).
// Other packages build default image references from these: keep them
// stable.
const (
	// Base is the agent base image: Debian, Node, tini, git, ripgrep and
	// the pcsync binary, user agent (1000).
	Base = "pcsync-agent-base"
	// Pcsync is pcsync's own image (its Deployment, and the sandbox's init
	// container), the base with pcsync as its entrypoint.
	Pcsync = "pcsync"
	// agentPrefix starts the name of every per-CLI image.
	agentPrefix = "pcsync-agent-"
)

// ServerPath is where every image of the catalog holds the pcsync binary.
const ServerPath = "/usr/local/bin/pcsync"

// PaperclipDir is where pcsync's own image holds its Paperclip adapter
// (adapter/) and sandbox plugin (plugin/), each a package directory with
// its production node_modules, for `pcsync paperclip install` to copy into
// a Paperclip server's pod.
const PaperclipDir = "/usr/local/share/pcsync/paperclip"

// ServerLabel is the image label whose value is the path of the pcsync
// binary inside the image (ServerPath); it tells pcsync that the image
// already holds its binary.
const ServerLabel = "io.pcsync.server"

// Ref returns the reference registry/name:tag. The registry may hold a port
// and an organisation path ("127.0.0.1:5000/org").
func Ref(registry, name, tag string) string {
	return registry + "/" + name + ":" + tag
}

// Agent returns the name of the image of an agent CLI, by its short name
// ("claude" → "pcsync-agent-claude").
func Agent(cli string) string {
	return agentPrefix + cli
}

// AgentImage returns the name of the image that runs an adapter type's CLI
// (claude_local → "pcsync-agent-claude"), or "" for a type that is not an
// adapter. The name exists for every adapter type, including one whose
// image the catalog cannot build (see Spec.Unavailable).
func AgentImage(t adapters.Type) string {
	cli := cliName(t)
	if cli == "" {
		return ""
	}
	return Agent(cli)
}

// cliName returns an adapter type's short CLI name (claude_local →
// "claude"), or "" for a type that is not an adapter.
func cliName(t adapters.Type) string {
	if !slices.Contains(adapters.Types(), t) {
		return ""
	}
	name, _ := strings.CutSuffix(string(t), "_local")
	return name
}
