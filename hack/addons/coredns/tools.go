//go:build tools

// Package tools pins the one program this module builds: build.sh runs
// `go build github.com/coredns/coredns`.
package tools

import _ "github.com/coredns/coredns"
