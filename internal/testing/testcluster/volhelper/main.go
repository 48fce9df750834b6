// Command volhelper is the helper pod's program of the real node's
// local-path-provisioner (internal/testing/testcluster, "Dynamic volumes"): the
// provisioner runs it in a pod on the node, with the volumes' parent directory
// mounted at the same path, to make a volume's directory or to remove it. The
// harness builds it with CGO_ENABLED=0 and packs it as /volhelper in a one-layer
// image of the node's registry; the provisioner's config names it as both its
// setupCommand and teardownCommand, so the image needs no shell.
//
//	volhelper -p PATH -s SIZE -m MODE -a ACTION
//
// ACTION create makes PATH (and its parents) with mode 0777, as upstream's setup
// script does, so that a pod of any user writes there; delete removes PATH and
// everything under it. MODE must be Filesystem (no block volumes); SIZE is not
// enforced (a directory has none). PATH must be absolute and at least two levels
// deep, so that a wrong argument cannot remove a top-level directory.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	path := flag.String("p", "", "the volume's directory")
	flag.String("s", "", "the volume's size in bytes (not enforced)")
	mode := flag.String("m", "Filesystem", "the volume mode")
	action := flag.String("a", "", "create or delete")
	flag.Parse()
	if err := run(*path, *mode, *action); err != nil {
		fmt.Fprintln(os.Stderr, "volhelper:", err)
		os.Exit(1)
	}
	fmt.Printf("volhelper: %s %s: done\n", *action, *path)
}

func run(path, mode, action string) error {
	clean := filepath.Clean(path)
	if !filepath.IsAbs(clean) || strings.Count(clean, "/") < 2 {
		return fmt.Errorf("-p %q: want an absolute path at least two levels deep", path)
	}
	if mode != "Filesystem" {
		return fmt.Errorf("-m %q: only Filesystem volumes are supported", mode)
	}
	switch action {
	case "create":
		if err := os.MkdirAll(clean, 0o777); err != nil {
			return err
		}
		return os.Chmod(clean, 0o777) // MkdirAll's mode is masked by the umask
	case "delete":
		return os.RemoveAll(clean)
	default:
		return fmt.Errorf("-a %q: want create or delete", action)
	}
}
