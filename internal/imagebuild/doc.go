// Package imagebuild builds pcsync's runtime images (the catalog of
// pkg/images) without Docker: the base's root file system with debootstrap
// from Debian's mirror, Node.js and each CLI with npm from the npm
// registry, pcsync with go build, each packed as a layer with
// go-containerregistry. The Dockerfiles under images/ build the same
// images from the same catalog; `make images` (hack/images) and the tests
// use this package. It needs root (debootstrap, chroot, mount), debootstrap,
// npm and go.
//
// Every layer but pcsync's is cached under Options.CacheDir, keyed by a
// hash of what makes it (the base spec, the Node version, the CLI's
// package and version), built in a temporary directory under a lock file
// and renamed into place, so concurrent builds (test binaries) share it.
//
// Files:
//
//	options.go  Options and DefaultOptions
//	tools.go    the check that root and the tools are there
//	cache.go    the cache: keys, lock files, atomic renames
//	tar.go      a directory as a layer: tar (owners, modes, links), gzip, digests
//	rootfs.go   the base's root file system: debootstrap, SetupScript in a chroot
//	npm.go      Node.js and the CLIs with npm
//	pcsync.go   the pcsync binary's layer
//	pcsync_paperclip.go  the layer of pcsync's image with its Paperclip adapter and plugin
//	paperclip.go  PaperclipStandIn: a stand-in of Paperclip's published
//	            image (paperclipai from npm on the base), for tests
//	image.go    layers and config into a v1.Image
//	build.go    Build: every image of the catalog, in order
//	verify.go   each CLI's --version (and the base's tools) in a chroot of its image, as its user
//	write.go    WriteLayout (an OCI layout) and Push (a registry)
package imagebuild
