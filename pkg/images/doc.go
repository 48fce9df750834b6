// Package images is the catalog of pcsync's runtime images: the agent base
// (Debian, Node, tini, git, ripgrep, the pcsync binary, user agent 1000),
// one image per agent CLI built FROM the base (with the adapter's ACP agent
// server where Paperclip's ACP engine runs one), and pcsync's own image.
// It is the one source of truth for both ways of building them: the
// Dockerfiles under images/ (written by `go run ./hack/genimages`) and the
// Docker-free builder internal/imagebuild (`make images`, the tests).
//
// Files:
//
//	names.go       image names, Ref, AgentImage, ServerPath, ServerLabel
//	catalog.go     Base (the base image's spec) and Spec (one image), NPMPackage, the
//	               ACP servers, All, Lookup
//	acp.go         ACPInitializeRequest and Spec.ACPProbe: an image's ACP server answers
//	config.go      Config: the image config (user, env, entrypoint, labels) per image
//	dockerfile.go  Dockerfile and Dockerfiles: the Dockerfiles the catalog gives
//	split.go       Split: a reference's registry, name and tag
//	version.go     Version: pcsync's release version, its images' tag, render's default and the chart's appVersion
//
// See docs/images.md.
package images
