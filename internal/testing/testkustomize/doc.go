// Package testkustomize builds kustomizations for tests, as `kustomize
// build` does (krusty, its default options), into the objects they hold:
// test/deploy's checks of what deploy/ and deploy/monitoring ship, and the real
// node's tests of a user's overlay of them, written into an in-memory file
// system.
//
// Files:
//
//	testkustomize.go  Build, BuildDir, Decode, CopyDir, WriteYAML and Find
package testkustomize
