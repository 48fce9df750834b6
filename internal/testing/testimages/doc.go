// Package testimages makes the images that tests on the real node pull:
// pcsync's own images built from make images' definitions
// (internal/imagebuild, cached), and stand-ins derived from them with a few
// files added (a stand-in CLI, a transcript), pushed to the real node's
// registry (internal/testing/testcluster).
//
// Files:
//
//	testimages.go  Build, WithFiles and Push
//	standin.go     StandIn: a stand-in on pcsync's base, pushed
package testimages
