// Command release writes a release's manifests into a directory; make
// release runs it once it has pushed the release's images:
//
//	go run ./hack/release -registry ghcr.io/acme -out _out/release [-version v0.1.0]
//
// It writes
//
//	install.yaml   deploy/base built with kustomize, pcsync's image pinned to
//	               <registry>/pcsync:<version>: one file to kubectl apply, as
//	               Flux and Argo CD publish theirs
//	chart/pcsync/  charts/pcsync with image.registry set to <registry>, for
//	               helm package (make release packages it)
//
// The version must be the release version of pkg/images/version.go, which
// every build of the release names pcsync's images with.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/pcsync/pcsync/pkg/images"
)

func main() {
	o := options{}
	flag.StringVar(&o.Version, "version", images.Version, "the release version (pkg/images/version.go's)")
	flag.StringVar(&o.Registry, "registry", "", "host[:port][/org] holding the release's images (required)")
	flag.StringVar(&o.Out, "out", "_out/release", "the directory to write")
	flag.StringVar(&o.Root, "root", ".", "the repository root")
	flag.Parse()
	if err := write(o); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	fmt.Printf("release %s: %s/install.yaml and %s/chart/pcsync (images in %s)\n", o.Version, o.Out, o.Out, o.Registry)
}
