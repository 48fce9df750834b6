// Command pause is the sandbox ("pause") image of internal/testcluster's real node,
// and a tiny tool for test containers. The harness builds it with CGO_ENABLED=0 at
// node start and packs it as /pause in a one-layer image; it needs nothing else in
// the image.
//
// Without flags it is a pod sandbox's PID 1: it sleeps until SIGTERM or SIGINT,
// reaping every child that is reparented to it, and exits 0.
//
// Flags make it a test container's command; they run in this order:
//
//	-cat          copy stdin to stdout until EOF
//	-print TEXT   print TEXT and a newline (repeatable, in order)
//	-exit N       exit with code N instead of sleeping afterwards
//
// For example `/pause -cat -print done -exit 3` echoes its stdin, prints "done"
// and exits 3; `/pause -print ready` prints "ready" and then sleeps like a sandbox.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// lines collects repeated -print flags.
type lines []string

func (l *lines) String() string     { return fmt.Sprint(*l) }
func (l *lines) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var prints lines
	cat := flag.Bool("cat", false, "copy stdin to stdout until EOF")
	exit := flag.Int("exit", -1, "exit with this code instead of sleeping (0-255)")
	flag.Var(&prints, "print", "print this text and a newline (repeatable)")
	flag.Parse()

	if *cat {
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintf(os.Stderr, "pause: cat: %v\n", err)
			os.Exit(1)
		}
	}
	for _, p := range prints {
		fmt.Println(p)
	}
	if *exit >= 0 {
		os.Exit(*exit)
	}
	os.Exit(sleep())
}

// sleep waits for SIGTERM or SIGINT, reaping children on SIGCHLD, and returns the
// exit code.
func sleep() int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return 0
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
	return 0
}
