// Command genimages writes the Dockerfiles of pcsync's runtime images from
// the catalog in pkg/images, so that they cannot drift from what
// `make images` builds:
//
//	go run ./hack/genimages          # writes images/*/Dockerfile
//	go run ./hack/genimages -root .  # the repository root (default: .)
//
// TestCurrent fails when a committed Dockerfile is not what genimages
// writes.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pcsync/pcsync/pkg/images"
)

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	if err := write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "genimages:", err)
		os.Exit(1)
	}
}

// write writes every Dockerfile of the catalog under root.
func write(root string) error {
	files, err := images.Dockerfiles()
	if err != nil {
		return err
	}
	for rel, data := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}
