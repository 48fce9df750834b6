//go:build tools

// Package tools pins the one program this module builds: build.sh runs
// `go build github.com/cloudnativelabs/kube-router/v2/cmd/kube-router`.
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
