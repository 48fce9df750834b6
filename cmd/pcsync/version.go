package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/images"
)

// version is pcsync's release version (images.Version), or what the build
// stamps: -ldflags "-X main.version=v1.2.3". It is the tag of pcsync's
// images when no image pcsync runs from says another.
var version = images.Version

func newVersionCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the pcsync version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(g.Stdout, "pcsync %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
