// Package testhelm renders Helm charts for tests with the helm that
// hack/helm/build.sh builds from its Go module (cached; make helm, which
// make test runs first, builds it): test/deploy's comparison of
// charts/pcsync with deploy/base, and the real node's test of the chart
// applied as a user applies it.
//
// Files:
//
//	testhelm.go  Binary and Template
package testhelm
