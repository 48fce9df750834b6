// Package netprobe is the probe that pcsync doctor runs in a pod of a tenant
// namespace (the hidden command `pcsync netprobe`): it tries a TCP
// connection to each target and reports, per target, whether it connected,
// was refused, timed out or was unreachable, as one JSON document small
// enough for a container's termination message (4096 bytes).
package netprobe

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Outcome is what became of one connection attempt.
type Outcome string

// The outcomes of a connection attempt.
const (
	// Connected: the TCP handshake completed (the connection is closed at
	// once; nothing is sent).
	Connected Outcome = "connected"
	// Refused: a reset answered (a closed port, or a policy's REJECT).
	Refused Outcome = "refused"
	// TimedOut: nothing answered within the timeout (a policy's DROP).
	TimedOut Outcome = "timeout"
	// Unreachable: the network said no route (an ICMP unreachable, or a
	// local rule that forbids sending).
	Unreachable Outcome = "unreachable"
	// Failed: anything else (a malformed target, no address); Detail says.
	Failed Outcome = "error"
)

// Blocked says the outcome is one a policy that forbids the target gives:
// refused, timed out or unreachable.
func (o Outcome) Blocked() bool {
	return o == Refused || o == TimedOut || o == Unreachable
}

// Version is the version of the Report format.
const Version = 1

// Result is the outcome of one target.
type Result struct {
	// Target is HOST:PORT as given.
	Target string `json:"target"`
	// Outcome is what became of the last attempt.
	Outcome Outcome `json:"outcome"`
	// Millis is how long the last attempt took.
	Millis int64 `json:"ms"`
	// Attempts is how many attempts were made; Connected how many of them
	// connected.
	Attempts  int `json:"attempts"`
	Connected int `json:"connected"`
	// Detail is the last attempt's error, for every outcome but Connected.
	Detail string `json:"detail,omitempty"`
}

// Report is the probe's output.
type Report struct {
	Version int      `json:"v"`
	Results []Result `json:"results"`
}

// maxDetail bounds each Result's Detail, so that a report of a few targets
// fits a termination message.
const maxDetail = 160

// Options configure Probe. Start from DefaultOptions; a zero or negative
// field takes its default.
type Options struct {
	// Timeout bounds each connection attempt. Default 3s.
	Timeout time.Duration
	// Settle is how long Probe waits before its first attempt: an enforcer
	// may take a moment to write the rules of a pod that just started.
	// Default 0 (none).
	Settle time.Duration
	// Attempts is how many times each target is tried; the last attempt's
	// outcome is the target's (rules that arrive late count). Default 1.
	Attempts int
	// Interval is the time between two attempts at a target. Default 1s.
	Interval time.Duration
}

// DefaultOptions returns the defaults described on Options.
func DefaultOptions() Options {
	return Options{Timeout: 3 * time.Second, Attempts: 1, Interval: time.Second}
}

func (o *Options) complete() {
	d := DefaultOptions()
	o.Timeout = cmp.Or(max(o.Timeout, 0), d.Timeout)
	o.Attempts = cmp.Or(max(o.Attempts, 0), d.Attempts)
	o.Interval = cmp.Or(max(o.Interval, 0), d.Interval)
	o.Settle = max(o.Settle, 0) // 0 is a setting here: no settle
}

// Probe waits opts.Settle, then tries a TCP connection to each target
// (HOST:PORT) at once, each attempt bounded by opts.Timeout, opts.Attempts
// times, and returns their outcomes in the order given.
func Probe(ctx context.Context, targets []string, opts Options) Report {
	opts.complete()
	r := Report{Version: Version, Results: make([]Result, len(targets))}
	if !sleep(ctx, opts.Settle) {
		for i, t := range targets {
			r.Results[i] = Result{Target: t, Outcome: Failed, Detail: context.Cause(ctx).Error()}
		}
		return r
	}
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Results[i] = attempts(ctx, t, opts)
		}()
	}
	wg.Wait()
	return r
}

func attempts(ctx context.Context, target string, opts Options) Result {
	var res Result
	connected := 0
	for i := 0; i < opts.Attempts; i++ {
		if i > 0 && !sleep(ctx, opts.Interval) {
			break
		}
		res = connect(ctx, target, opts.Timeout)
		if res.Outcome == Connected {
			connected++
		}
		res.Attempts = i + 1
		if res.Outcome == Failed {
			break // a malformed target stays so
		}
	}
	res.Connected = connected
	return res
}

// sleep waits d or until ctx ends, and says whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func connect(ctx context.Context, target string, timeout time.Duration) Result {
	res := Result{Target: target}
	if _, _, err := net.SplitHostPort(target); err != nil {
		res.Outcome, res.Detail = Failed, err.Error()
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", target)
	res.Millis = time.Since(start).Milliseconds()
	if err == nil {
		_ = conn.Close()
		res.Outcome = Connected
		return res
	}
	res.Outcome, res.Detail = Classify(err), err.Error()
	if len(res.Detail) > maxDetail {
		res.Detail = res.Detail[:maxDetail]
	}
	return res
}

// Classify returns the Outcome of a failed dial's error.
func Classify(err error) Outcome {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return TimedOut
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return Unreachable
	}
	return Failed
}

// Encode returns the report as one line of JSON.
func (r Report) Encode() []byte {
	b, err := json.Marshal(r)
	if err != nil { // a Report always marshals
		panic(err)
	}
	return b
}

// Parse reads a report written by Encode (a pod's termination message, or
// its log: the last line that parses wins).
func Parse(s string) (Report, error) {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	lastErr := errors.New("empty")
	for i := len(lines) - 1; i >= 0; i-- {
		var r Report
		err := json.Unmarshal([]byte(strings.TrimSpace(lines[i])), &r)
		if err == nil && r.Version == Version {
			return r, nil
		}
		if err == nil {
			err = fmt.Errorf("report version %d, want %d", r.Version, Version)
		}
		lastErr = err
	}
	return Report{}, fmt.Errorf("no probe report in %q: %w", truncate(s, 200), lastErr)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
