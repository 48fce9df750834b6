package imagebuild

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// checkTools returns an error naming every missing prerequisite of a build
// and how to install it: root, debootstrap, npm, go, chroot and mount.
func checkTools() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (debootstrap, chroot and mount need it: run as root)")
	}
	for _, tool := range []struct{ name, install string }{
		{"debootstrap", "apt-get install -y debootstrap"},
		{"npm", "apt-get install -y npm (any version: it runs under the images' Node)"},
		{"go", "Go 1.26 (https://go.dev/dl)"},
		{"chroot", "apt-get install -y coreutils"},
		{"mount", "apt-get install -y mount"},
	} {
		if _, err := exec.LookPath(tool.name); err != nil {
			missing = append(missing, tool.name+" ("+tool.install+")")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("imagebuild: missing %s", strings.Join(missing, "; "))
	}
	return nil
}

// run runs a command, and returns an error holding its combined output's
// tail when it fails.
func run(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 4000 {
			tail = "…" + tail[len(tail)-4000:]
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, tail)
		}
		return fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	return nil
}
