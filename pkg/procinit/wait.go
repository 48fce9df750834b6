package procinit

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

// settle is how many answers in a row waitProxy wants, 100 ms apart.
const settle = 5

// ExitProxyUnavailable is Run's status when the egress proxy it waited
// for did not answer in time (sysexits' EX_UNAVAILABLE).
const ExitProxyUnavailable = 69

// proxyAddr is host:port of a proxy URL ("http://10.0.0.7:3128") or of
// host:port itself.
func proxyAddr(proxy string) (string, error) {
	if !strings.Contains(proxy, "://") {
		proxy = "http://" + proxy
	}
	u, err := url.Parse(proxy)
	if err != nil || u.Hostname() == "" || u.Port() == "" {
		return "", fmt.Errorf("egress proxy %q: want http://host:port", proxy)
	}
	return u.Host, nil
}

// waitProxy waits until the proxy at opts.WaitProxy accepts connections:
// a run's pod may start before its company's proxy, scaled up from zero
// for it, is ready. It says so on stderr only when it had to wait. It
// returns 0 once the proxy answers, else the status Run exits with: on a
// signal (128+n), or when opts.WaitTimeout passes. With opts.ProxyGrace,
// one answer is enough and the grace's end returns 0 too.
func waitProxy(opts Options, sigs <-chan os.Signal) int {
	addr, err := proxyAddr(opts.WaitProxy)
	if err != nil {
		fmt.Fprintf(opts.Stderr, "pcsync init: %v\n", err)
		return 2
	}
	start := opts.Now()
	bound, want := opts.WaitTimeout, settle
	if opts.ProxyGrace > 0 {
		bound, want = opts.ProxyGrace, 1
	}
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	// A proxy scaled down and straight back up has, for a moment, its old
	// pod (closing) and its new one behind the Service: one answer is not
	// enough. settle answers in a row are.
	ok, waited := 0, false
	for {
		if dial(addr) == nil {
			if ok++; ok >= want {
				if waited {
					fmt.Fprintf(opts.Stderr, "pcsync init: the egress proxy at %s answered after %s\n", addr, opts.Now().Sub(start).Round(time.Millisecond))
				}
				return 0
			}
		} else {
			if !waited {
				fmt.Fprintf(opts.Stderr, "pcsync init: waiting for the egress proxy at %s%s\n", addr, why(opts))
			}
			ok, waited = 0, true
		}
		select {
		case s := <-sigs:
			return 128 + int(s.(syscall.Signal))
		case <-deadline.C:
			if opts.ProxyGrace > 0 {
				fmt.Fprintf(opts.Stderr, "pcsync init: the egress proxy at %s did not answer within %s; starting the agent anyway\n", addr, bound)
				return 0
			}
			fmt.Fprintf(opts.Stderr, "pcsync init: the egress proxy at %s did not answer within %s: the agent was not started\n", addr, opts.WaitTimeout)
			return ExitProxyUnavailable
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// why is what waitProxy waits for, as it says on stderr.
func why(opts Options) string {
	if opts.ProxyGrace > 0 {
		return fmt.Sprintf(" (at most %s: this pod's egress may be allowed a moment after it starts)", opts.ProxyGrace)
	}
	return " (its company's proxy is starting)"
}

// dial opens and closes one connection to addr.
func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}
