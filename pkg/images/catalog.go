package images

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// BaseSpec is what goes into the agent base image, Base. Both builds read
// it: the Dockerfile (images/base/Dockerfile) and internal/imagebuild.
type BaseSpec struct {
	// Suite is the Debian release ("bookworm").
	Suite string
	// Variant is debootstrap's variant ("minbase": essential packages and
	// apt only); the Dockerfile starts from SlimImage, the same thing.
	Variant string
	// Mirror is the Debian mirror debootstrap reads.
	Mirror string
	// SlimImage is the Dockerfile's starting point: Debian's own minbase
	// image of Suite.
	SlimImage string
	// Sources are apt's sources of the image: the Go builder writes them
	// to /etc/apt/sources.list after debootstrap (which reads Suite alone)
	// and upgrades from them, so that it gets the point updates and security
	// fixes that SlimImage's apt-get install gets from the same suites.
	Sources []string
	// Packages are the Debian packages installed on top of the variant,
	// sorted.
	Packages []string
	// Strip are the paths (shell globs, absolute) removed from the root
	// file system after the packages are installed: apt's lists and cache,
	// docs, man pages, logs.
	Strip []string
	// NodeVersion is the Node.js release at /usr/local/bin/node, installed
	// from the npm registry's node-linux-<arch> package (NodeTarball).
	NodeVersion string
	// NPMVersion is the npm release the Dockerfiles' build stage runs to
	// install the CLIs (npm is not in any final image).
	NPMVersion string
	// GoImage is the Dockerfiles' stage that builds pcsync.
	GoImage string
	// User and Group name the unprivileged account, UID and GID its ids.
	User, Group string
	UID, GID    int
	// Home is the user's home directory and Workdir the working directory;
	// both exist in the image, owned by UID:GID.
	Home, Workdir string
	// Path is the PATH of every image.
	Path string
	// Source is the org.opencontainers.image.source label.
	Source string
}

// DefaultBase returns the spec of the agent base image.
func DefaultBase() BaseSpec {
	return BaseSpec{
		Suite:     "bookworm",
		Variant:   "minbase",
		Mirror:    "http://deb.debian.org/debian",
		SlimImage: "debian:bookworm-slim",
		Sources: []string{
			"deb http://deb.debian.org/debian bookworm main",
			"deb http://deb.debian.org/debian bookworm-updates main",
			"deb http://deb.debian.org/debian-security bookworm-security main",
		},
		Packages: []string{"ca-certificates", "git", "ripgrep", "tini"},
		Strip: []string{
			"/var/lib/apt/lists/*", "/var/cache/apt/*", "/var/cache/debconf/*-old",
			"/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/lintian/*", "/usr/share/locale/*",
			"/var/log/*.log", "/var/log/apt/*",
		},
		NodeVersion: "24.21.0",
		NPMVersion:  "11.19.1",
		GoImage:     "golang:1.26-bookworm",
		User:        "agent",
		Group:       "agent",
		UID:         1000,
		GID:         1000,
		Home:        "/home/agent",
		Workdir:     "/workspace",
		Path:        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		Source:      "https://github.com/pcsync/pcsync",
	}
}

// NodeTarball returns the npm registry's URL of the Node.js package for a
// Go architecture (amd64, arm64), or an error naming an architecture that
// has none.
func (b BaseSpec) NodeTarball(goarch string) (string, error) {
	arch, ok := map[string]string{"amd64": "x64", "arm64": "arm64"}[goarch]
	if !ok {
		return "", fmt.Errorf("node %s: no npm package for architecture %q (want amd64 or arm64)", b.NodeVersion, goarch)
	}
	pkg := "node-linux-" + arch
	return "https://registry.npmjs.org/" + pkg + "/-/" + pkg + "-" + b.NodeVersion + ".tgz", nil
}

// Spec is one image of the catalog.
type Spec struct {
	// Name is the image's name (Base, Pcsync, Agent(cli)).
	Name string
	// Dir is the folder of its Dockerfile, relative to the repository root.
	Dir string
	// From is the image it is built on (Base), or "" for the base itself.
	From string
	// Adapter is the adapter type whose CLI it runs; "" for Base and Pcsync.
	Adapter adapters.Type
	// Package and Version are the CLI's npm package and pinned release, and
	// Binary the executable it links into /usr/local/bin.
	Package, Version, Binary string
	// ACP is the adapter's ACP agent server, installed beside the CLI by
	// the same npm command (NPMInstallArgs), or the zero NPMPackage when
	// the image needs none (see acpServers).
	ACP NPMPackage
	// Unavailable, when set, says why the image cannot be built: it is left
	// out of All.
	Unavailable string
}

// NPMPackage is one npm package an image installs.
type NPMPackage struct {
	// Name is the package's name and Version its pinned release.
	Name, Version string
	// Binary is the executable (a bin of the package) npm links into
	// /usr/local/bin, on every image's PATH.
	Binary string
}

// Spec returns "<name>@<version>", npm's spec of the package.
func (p NPMPackage) Spec() string {
	return p.Name + "@" + p.Version
}

// acpServers are the ACP agent servers that Paperclip's ACP engine (the
// default engine of its claude_local and codex_local adapters) runs inside
// a sandbox: adapter-claude-local's and adapter-codex-local's
// dist/server/acp.js run the bare command Binary on the sandbox's PATH. The
// releases are those Paperclip 2026.916.1 bundles
// (node_modules/@agentclientprotocol/*; acp_integration_test.go checks them
// against the installed Paperclip). Each bundles the engine it drives:
// claude-agent-acp the Claude Agent SDK's own Claude Code binary,
// codex-acp its own @openai/codex. The other adapters' ACP engines need no
// server of their own (gemini_local runs `gemini --acp`, acpx_local is
// one), or Paperclip gives them none.
func acpServers() map[adapters.Type]NPMPackage {
	return map[adapters.Type]NPMPackage{
		adapters.ClaudeLocal: {Name: "@agentclientprotocol/claude-agent-acp", Version: "0.73.0", Binary: "claude-agent-acp"},
		adapters.CodexLocal:  {Name: "@agentclientprotocol/codex-acp", Version: "1.13.1", Binary: "codex-acp"},
	}
}

// cursorUnavailable is why there is no pcsync-agent-cursor image (checked
// with npm view on the npm registry).
const cursorUnavailable = "no npm package ships cursor-agent: Cursor distributes it only through its install script " +
	"(https://cursor.com/install, which downloads from downloads.cursor.com); the npm package named cursor-agent " +
	"(1.0.3, github.com/zalab-inc/cursor_agent) is an unrelated library with no executable"

// Agents returns one Spec per adapter type, in adapters.Types order,
// including those whose image cannot be built (Unavailable set). The CLI's
// package and version come from adapters.CheckedVersions, its binary from
// adapters.BuiltinDefaults, so the images run the releases the adapters were
// checked against; the ACP server from acpServers.
func Agents() []Spec {
	versions := adapters.CheckedVersions()
	defaults := adapters.BuiltinDefaults()
	var out []Spec
	for _, t := range adapters.Types() {
		cli := cliName(t)
		s := Spec{Name: Agent(cli), Dir: "images/agent-" + cli, From: Base, Adapter: t, ACP: acpServers()[t]}
		if cmd := defaults[t].Command; len(cmd) > 0 {
			s.Binary = cmd[0]
		}
		fields := strings.Fields(versions[t])
		switch {
		case t == adapters.CursorLocal:
			s.Unavailable, s.ACP = cursorUnavailable, NPMPackage{}
		case len(fields) != 2:
			s.Unavailable = fmt.Sprintf("adapters.CheckedVersions()[%s] = %q is not \"<npm package> <version>\"", t, versions[t])
		default:
			s.Package, s.Version = fields[0], fields[1]
		}
		out = append(out, s)
	}
	return out
}

// Unbuildable returns the adapter types whose CLI's image cannot be built
// (cursor_local), each with why: their agents need an image of their own.
func Unbuildable() map[adapters.Type]string {
	out := map[adapters.Type]string{}
	for _, s := range Agents() {
		if s.Unavailable != "" {
			out[s.Adapter] = s.Unavailable
		}
	}
	return out
}

// All returns every image that can be built, in build order: Base, the
// agents' images (those not Unavailable), Pcsync.
func All() []Spec {
	out := []Spec{{Name: Base, Dir: "images/base"}}
	for _, s := range Agents() {
		if s.Unavailable == "" {
			out = append(out, s)
		}
	}
	return append(out, Spec{Name: Pcsync, Dir: "images/pcsync", From: Base})
}

// Lookup returns the image of All named name, or an error that says why
// there is none (an unavailable image's reason, or the known names).
func Lookup(name string) (Spec, error) {
	all := All()
	if i := slices.IndexFunc(all, func(s Spec) bool { return s.Name == name }); i >= 0 {
		return all[i], nil
	}
	for _, s := range Agents() {
		if s.Name == name {
			return Spec{}, fmt.Errorf("image %s: cannot be built: %s", name, s.Unavailable)
		}
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	return Spec{}, fmt.Errorf("image %s: not in the catalog (want one of %s)", name, strings.Join(names, ", "))
}
