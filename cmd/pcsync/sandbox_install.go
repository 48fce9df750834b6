package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// newSandboxInstallCmd copies the running pcsync binary to DEST: the
// postStart hook of a sandbox lease pod's helper container runs it
// (pcsync's image is distroless: no cp) to place pcsync in the pod's
// shared emptyDir before the kubelet starts the pod's main container.
func newSandboxInstallCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "install DEST",
		Short: "Copy this pcsync binary to DEST (the helper container's postStart hook in a sandbox pod)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return installSelf(args[0])
		},
	}
}

// newSandboxHoldCmd blocks until SIGTERM or SIGINT: the process of a
// sandbox lease pod's helper container, which only carries the postStart
// hook that installs pcsync and must stay up while the pod runs (its
// restartPolicy is Never).
func newSandboxHoldCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "hold",
		Short: "Block until SIGTERM (the helper container of a sandbox pod)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			<-c.Context().Done() // main's context ends at SIGTERM or SIGINT
			return nil
		},
	}
}

func installSelf(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".pcsync-*")
	if err != nil {
		return fmt.Errorf("install %s: %w", dest, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("install %s: %w", dest, err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("install %s: %w", dest, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install %s: %w", dest, err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("install %s: %w", dest, err)
	}
	return nil
}
