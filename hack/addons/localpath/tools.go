//go:build tools

// Package tools pins the one program this module builds: build.sh runs
// `go build github.com/rancher/local-path-provisioner`.
package tools

import _ "github.com/rancher/local-path-provisioner"
