package testtool

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binary returns the path of the tool name that hack/<name>/build.sh of
// the repository at root builds, building it when its cache has none
// (minutes).
func Binary(ctx context.Context, root, name string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", name, "build.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/%s/build.sh (make %s): %w\n%s", name, name, err, stderr.String())
	}
	return filepath.Join(strings.TrimSpace(string(out)), name), nil
}
