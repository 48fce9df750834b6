// Command pcsync keeps Kubernetes in the shape that a Git repository of
// YAML describes, for companies of AI coding agents, and runs their work as
// Kubernetes Jobs. See README.md and docs/design.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
