package images

import (
	"fmt"
	"strings"
)

// Config is the runtime config of an image: what both builds write into
// it (the Dockerfile's USER, ENV, WORKDIR, ENTRYPOINT and LABEL; the Go
// builder's v1.Config).
type Config struct {
	// User is "uid:gid".
	User string
	// Env holds KEY=value entries, in order.
	Env []string
	// WorkingDir is the working directory.
	WorkingDir string
	// Entrypoint is the argv prefix of every container.
	Entrypoint []string
	// Labels are the image's labels.
	Labels map[string]string
}

// Label keys the catalog sets besides ServerLabel.
const (
	// SourceLabel is the OCI label naming the source repository.
	SourceLabel = "org.opencontainers.image.source"
	// VersionLabel is the OCI label holding pcsync's version (the tag).
	VersionLabel = "org.opencontainers.image.version"
	// CLILabel holds an agent image's CLI as "<npm package>@<version>".
	CLILabel = "io.pcsync.cli"
	// ACPLabel holds an agent image's ACP agent server (Spec.ACP) as
	// "<npm package>@<version>".
	ACPLabel = "io.pcsync.acp"
)

// PcsyncUser is the user of the Pcsync image, the one pcsync's Deployment
// runs as (deploy/base/deployment.yaml: runAsUser and runAsGroup 65532).
const PcsyncUser = "65532:65532"

// Config returns the image's config for pcsync version version (the
// VersionLabel).
func (s Spec) Config(b BaseSpec, version string) Config {
	c := Config{
		User:       fmt.Sprintf("%d:%d", b.UID, b.GID),
		Env:        []string{"PATH=" + b.Path, "HOME=" + b.Home},
		WorkingDir: b.Workdir,
		Entrypoint: []string{"/usr/bin/tini", "-g", "--"},
		Labels: map[string]string{
			SourceLabel:  b.Source,
			VersionLabel: version,
			ServerLabel:  ServerPath,
		},
	}
	if s.Package != "" {
		c.Labels[CLILabel] = s.Package + "@" + s.Version
	}
	if s.ACP.Name != "" {
		c.Labels[ACPLabel] = s.ACP.Spec()
	}
	if s.Name == Pcsync {
		c.User = PcsyncUser
		c.Entrypoint = []string{"/usr/bin/tini", "--", ServerPath}
	}
	return c
}

// SetupScript returns the shell script that finishes the base's root file
// system once its packages are installed (as root, inside it): the user
// and group, their home and the working directory, and Strip. The
// Dockerfile runs it after apt-get; the Go builder in a chroot after
// debootstrap.
func (b BaseSpec) SetupScript() string {
	lines := []string{
		fmt.Sprintf("echo '%s:x:%d:%d::%s:/bin/sh' >>/etc/passwd", b.User, b.UID, b.GID, b.Home),
		fmt.Sprintf("echo '%s:x:%d:' >>/etc/group", b.Group, b.GID),
		fmt.Sprintf("install -d -m 0755 -o %d -g %d %s %s", b.UID, b.GID, b.Home, b.Workdir),
		"rm -rf " + strings.Join(b.Strip, " "),
	}
	return strings.Join(lines, " && ")
}

// NPMPackages returns the npm packages of an agent image: its CLI, then
// its ACP server when it has one; none for another image.
func (s Spec) NPMPackages() []NPMPackage {
	if s.Package == "" {
		return nil
	}
	out := []NPMPackage{{Name: s.Package, Version: s.Version, Binary: s.Binary}}
	if s.ACP.Name != "" {
		out = append(out, s.ACP)
	}
	return out
}

// NPMInstallArgs returns npm's arguments that install the image's
// NPMPackages, with their dependencies, under prefix
// (prefix/lib/node_modules, bin links in prefix/bin); both builds run
// them, with prefix standing for the image's /usr/local.
func (s Spec) NPMInstallArgs(prefix string) []string {
	args := []string{"install", "--global", "--prefix", prefix, "--no-audit", "--no-fund", "--no-update-notifier"}
	for _, p := range s.NPMPackages() {
		args = append(args, p.Spec())
	}
	return args
}
