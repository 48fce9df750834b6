// Command pause is the sandbox ("pause") image of internal/testing/testcluster's real node,
// and a tiny tool for test containers. The harness builds it with CGO_ENABLED=0 at
// node start and packs it as /pause in a one-layer image; it needs nothing else in
// the image.
//
// Without flags it is a pod sandbox's PID 1: it sleeps until SIGTERM or SIGINT,
// reaping every child that is reparented to it, and exits 0.
//
// Flags make it a test container's command; they run in this order:
//
//	-listen NET:PORT  serve on every address, in the background (repeatable):
//	                  tcp:PORT writes the -banner line to each connection and closes
//	                  it; udp:PORT answers each datagram with the -banner line
//	-banner TEXT      what listeners answer (default "pcsync-target")
//	-relay PORT=HOST:PORT  serve a bare CONNECT relay to HOST:PORT on PORT, in the
//	                  background (repeatable): the floor of a proxy, for benchmarks
//	-cat              copy stdin to stdout until EOF
//	-dial NET:HOST:PORT  connect (tcp) or send a datagram (udp) and print one line,
//	                  "dial NET HOST:PORT: OUTCOME", where OUTCOME is "ok ANSWER"
//	                  (the first line the peer sent; plain "ok" for a TCP peer that
//	                  sends nothing within half a second), "refused", "timeout",
//	                  "unreachable" or "error: …" (repeatable, in order; each bounded
//	                  by -timeout)
//	-resolve NAME     look NAME up with the pod's resolv.conf (Go's resolver) and
//	                  print "resolve NAME: ok IP[,IP…]", or "nxdomain", "refused",
//	                  "timeout" or "error: …" (repeatable, after the dials; each
//	                  bounded by -timeout)
//	-write PATH       copy stdin into the file PATH (its directories made, mode
//	                  0644), after -cat
//	-read PATH        copy the file PATH to stdout (repeatable, after -write)
//	-timeout D        bound of each -dial and -resolve (default 2s)
//	-print TEXT       print TEXT and a newline (repeatable, in order)
//	-exit N           exit with code N instead of sleeping afterwards
//
// For example `/pause -cat -print done -exit 3` echoes its stdin, prints "done"
// and exits 3; `/pause -print ready` prints "ready" and then sleeps like a sandbox;
// `/pause -listen tcp:8080 -listen udp:53 -banner db` serves; `/pause -dial
// tcp:10.201.0.7:8080 -exit 0`, run in another pod, prints "dial tcp
// 10.201.0.7:8080: ok db".
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lines collects repeated -print flags.
type lines []string

func (l *lines) String() string     { return fmt.Sprint(*l) }
func (l *lines) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var prints, listens, dials, relays, resolves, reads lines
	cat := flag.Bool("cat", false, "copy stdin to stdout until EOF")
	exit := flag.Int("exit", -1, "exit with this code instead of sleeping (0-255)")
	banner := flag.String("banner", "pcsync-target", "what -listen answers")
	timeout := flag.Duration("timeout", 2*time.Second, "bound of each -dial")
	flag.Var(&prints, "print", "print this text and a newline (repeatable)")
	flag.Var(&listens, "listen", "serve on NET:PORT, tcp or udp (repeatable)")
	flag.Var(&dials, "dial", "probe NET:HOST:PORT, tcp or udp (repeatable)")
	flag.Var(&relays, "relay", "serve a bare CONNECT relay, PORT=HOST:PORT (repeatable)")
	flag.Var(&resolves, "resolve", "look NAME up (repeatable)")
	flag.Var(&reads, "read", "copy the file PATH to stdout (repeatable)")
	write := flag.String("write", "", "copy stdin into the file PATH")
	flag.Parse()

	for _, r := range relays {
		if err := relay(r); err != nil {
			fmt.Fprintf(os.Stderr, "pause: relay %s: %v\n", r, err)
			os.Exit(1)
		}
	}
	for _, l := range listens {
		if err := listen(l, *banner); err != nil {
			fmt.Fprintf(os.Stderr, "pause: listen %s: %v\n", l, err)
			os.Exit(1)
		}
	}
	for _, d := range dials {
		fmt.Println(dial(d, *timeout))
	}
	for _, name := range resolves {
		fmt.Println(resolve(name, *timeout))
	}
	if *cat {
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintf(os.Stderr, "pause: cat: %v\n", err)
			os.Exit(1)
		}
	}
	if err := files(*write, reads); err != nil {
		fmt.Fprintf(os.Stderr, "pause: %v\n", err)
		os.Exit(1)
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

// listen serves spec ("tcp:PORT" or "udp:PORT") on every address in the background.
func listen(spec, banner string) error {
	network, port, ok := strings.Cut(spec, ":")
	if !ok {
		return errors.New("want NET:PORT")
	}
	switch network {
	case "tcp":
		ln, err := net.Listen("tcp", ":"+port)
		if err != nil {
			return err
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					continue
				}
				_, _ = fmt.Fprintln(c, banner)
				_ = c.Close()
			}
		}()
	case "udp":
		pc, err := net.ListenPacket("udp", ":"+port)
		if err != nil {
			return err
		}
		go func() {
			buf := make([]byte, 2048)
			for {
				_, addr, err := pc.ReadFrom(buf)
				if err != nil {
					continue
				}
				_, _ = pc.WriteTo([]byte(banner+"\n"), addr)
			}
		}()
	default:
		return fmt.Errorf("network %q: want tcp or udp", network)
	}
	return nil
}

// dial probes spec ("tcp:HOST:PORT" or "udp:HOST:PORT") and describes the outcome.
func dial(spec string, timeout time.Duration) string {
	network, addr, _ := strings.Cut(spec, ":")
	head := fmt.Sprintf("dial %s %s: ", network, addr)
	if network != "tcp" && network != "udp" {
		return head + "error: want tcp or udp"
	}
	deadline := time.Now().Add(timeout)
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return head + outcome(err)
	}
	defer c.Close()
	if network == "udp" {
		_ = c.SetDeadline(deadline)
		if _, err := c.Write([]byte("probe\n")); err != nil {
			return head + outcome(err)
		}
		buf := make([]byte, 256)
		n, err := c.Read(buf)
		if n == 0 && err != nil {
			return head + outcome(err)
		}
		return head + "ok " + firstLine(buf[:n])
	}
	// Connected is reached; a peer that speaks first (a banner) is named by its
	// first line, one that waits (a TLS server) is just "ok".
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	buf := make([]byte, 256)
	n, _ := c.Read(buf)
	if n == 0 {
		return head + "ok"
	}
	return head + "ok " + firstLine(buf[:n])
}

// resolve looks name up as the pod's programs do and describes the outcome.
func resolve(name string, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	head := "resolve " + name + ": "
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	var de *net.DNSError
	switch {
	case err == nil:
		return head + "ok " + strings.Join(addrs, ",")
	case errors.As(err, &de) && de.IsNotFound:
		return head + "nxdomain"
	case errors.Is(err, syscall.ECONNREFUSED):
		return head + "refused"
	case errors.As(err, &de) && de.IsTimeout, errors.Is(err, context.DeadlineExceeded):
		return head + "timeout"
	}
	return head + "error: " + err.Error()
}

// files copies stdin into the file write (if set), then each file of reads to
// stdout.
func files(write string, reads []string) error {
	if write != "" {
		if err := os.MkdirAll(filepath.Dir(write), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", write, err)
		}
		f, err := os.OpenFile(write, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("write %s: %w", write, err)
		}
		if _, err := io.Copy(f, os.Stdin); err != nil {
			_ = f.Close()
			return fmt.Errorf("write %s: %w", write, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("write %s: %w", write, err)
		}
	}
	for _, r := range reads {
		f, err := os.Open(r)
		if err != nil {
			return fmt.Errorf("read %s: %w", r, err)
		}
		_, err = io.Copy(os.Stdout, f)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", r, err)
		}
	}
	return nil
}

// firstLine is b's first line, trimmed.
func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}

// outcome names a dial error: refused (a REJECT, or nothing listening), timeout (a
// DROP, or no answer), unreachable (no route or no forwarding), or the error.
func outcome(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "error: " + err.Error()
}

// relay serves spec ("PORT=HOST:PORT") in the background: the least a CONNECT
// proxy can do. Each connection's request head (up to its blank line) is read and
// ignored, HOST:PORT is dialled, "HTTP/1.1 200" is answered, and the bytes are
// copied both ways by the kernel (io.Copy between TCP connections splices). No
// access check, no log: benchmarks run it beside a real proxy, on the same hops,
// as the floor of any proxy there.
func relay(spec string) error {
	port, target, ok := strings.Cut(spec, "=")
	if !ok || target == "" {
		return errors.New("want PORT=HOST:PORT")
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				continue
			}
			go relayOne(c.(*net.TCPConn), target)
		}
	}()
	return nil
}

// relayOne carries one client's tunnel to target.
func relayOne(client *net.TCPConn, target string) {
	defer client.Close()
	br := bufio.NewReader(client)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			break
		}
	}
	t, err := net.Dial("tcp", target)
	if err != nil {
		_, _ = fmt.Fprintf(client, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	up := t.(*net.TCPConn)
	defer up.Close()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		// Bytes the client sent behind its head, then the rest.
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			_, _ = up.Write(b)
		}
		_, _ = io.Copy(up, client)
		_ = up.CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(client, up)
	_ = client.CloseWrite()
	<-done
}
