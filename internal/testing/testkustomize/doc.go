// Package testkustomize builds kustomizations for tests, as `kustomize
// build` does (krusty, its default options), into the objects they hold:
// deploy/ and deploy/monitoring's checks of what they ship, and the real
// node's tests of a user's overlay of them, written into an in-memory file
// system.
//
// Files:
//
//	testkustomize.go  Build, BuildDir, CopyDir, WriteYAML and Find
package testkustomize
