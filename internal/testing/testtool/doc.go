// Package testtool finds the tools tests run that hack/ builds from their
// Go modules into versioned caches: helm (hack/helm/build.sh) and the
// GitHub CLI gh (hack/gh/build.sh), built when the cache has none; make
// helm and make gh, which make test runs first, build them.
//
// Files:
//
//	testtool.go  Binary
package testtool
