package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/images"
)

// version is pcsync's release version (images.Version), the same in every
// build of a release: the tag render and the daemon give pcsync's images
// when the image pcsync runs from says none. A constant, so that no build
// stamp changes what pcsync renders.
const version = images.Version

// commit is the build's stamp: -ldflags "-X main.commit=$(git describe
// --tags --always --dirty)", as make build and make images stamp it. It
// tells builds of a release apart and changes nothing else.
var commit string

// buildStamp is commit, else the module version go install recorded
// (pcsync@v0.1.0), else the VCS revision go build recorded, else "unknown".
func buildStamp() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			return s.Value
		}
	}
	return "unknown"
}

func newVersionCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print pcsync's release version and the build's stamp",
		Long: `Print pcsync's release version, which is the tag of its images that render and
the daemon name unless the image pcsync runs from says another, and the build's
stamp (git describe of the source make build stamped, or the module version).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(g.Stdout, versionLine())
			return err
		},
	}
}

// versionLine is what pcsync version and pcsync --version print.
func versionLine() string {
	return fmt.Sprintf("pcsync %s (build %s, %s, %s/%s)", version, buildStamp(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
