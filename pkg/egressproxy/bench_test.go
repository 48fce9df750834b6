package egressproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The proxy's benchmarks, on loopback in this process: the target is an
// httptest TLS server, the proxy is served as in a pod (Serve), and each
// figure is reported with b.ReportMetric. Run: go test -run XXX -bench .
// -benchtime 1x ./pkg/egressproxy/

// BenchmarkSmallRequests: 100 small HTTPS requests, each on a new
// connection (a CONNECT tunnel per request through the proxy), direct and
// through the proxy; p50 of each and the difference (goal ≤ +2 ms).
func BenchmarkSmallRequests(b *testing.B) {
	w := startWorld(b, []string{"allowed.test"}, fakeResolver{"allowed.test": loopback}, true)
	url := fmt.Sprintf("https://allowed.test:%d/small", w.port)
	proxied := w.client(b, "bench")
	direct := directClient(b, w)
	var dDirect, dProxy []time.Duration
	for b.Loop() {
		for range 100 {
			dDirect = append(dDirect, timeGet(b, direct, url))
			dProxy = append(dProxy, timeGet(b, proxied, url))
		}
	}
	pd, pp := p50(dDirect), p50(dProxy)
	b.ReportMetric(ms(pd), "p50-direct-ms")
	b.ReportMetric(ms(pp), "p50-proxy-ms")
	b.ReportMetric(ms(pp-pd), "p50-added-ms")
}

// BenchmarkDownload50MB: a 50 MB body, direct and through the proxy; the
// ratio of the times (goal ≤ 1.1).
func BenchmarkDownload50MB(b *testing.B) {
	blob := bytes.Repeat([]byte("0123456789abcdef"), 50<<20/16)
	w := startWorldHandler(b, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Length", strconv.Itoa(len(blob)))
		_, _ = rw.Write(blob)
	}))
	url := fmt.Sprintf("https://allowed.test:%d/blob", w.port)
	proxied := w.client(b, "bench")
	direct := directClient(b, w)
	var tDirect, tProxy time.Duration
	for b.Loop() {
		tDirect += timeGet(b, direct, url)
		tProxy += timeGet(b, proxied, url)
	}
	b.SetBytes(int64(len(blob)))
	b.ReportMetric(ms(tDirect)/float64(b.N), "direct-ms")
	b.ReportMetric(ms(tProxy)/float64(b.N), "proxy-ms")
	b.ReportMetric(float64(tProxy)/float64(tDirect), "proxy/direct")
}

// BenchmarkMemory: the heap the proxy holds idle and with 50 tunnels open
// at once (each through a CONNECT to the target, kept open), and this
// process's RSS at both points. The process also holds the target and the
// clients: the RSS is an upper bound of the proxy's; the heap difference
// is the 50 tunnels' cost, the target's side of them included.
func BenchmarkMemory(b *testing.B) {
	w := startWorld(b, []string{"allowed.test"}, fakeResolver{"allowed.test": loopback}, true)
	for b.Loop() {
		idleHeap, idleRSS := memNow()
		conns := make([]net.Conn, 0, 50)
		for range 50 {
			c, err := net.Dial("tcp", strings.TrimPrefix(w.proxyURL, "http://"))
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", w.port, w.port)
			buf := make([]byte, 64)
			if n, err := c.Read(buf); err != nil || !strings.Contains(string(buf[:n]), " 200 ") {
				b.Fatalf("CONNECT: %q, %v", buf[:n], err)
			}
			conns = append(conns, c)
		}
		busyHeap, busyRSS := memNow()
		for _, c := range conns {
			c.Close()
		}
		b.ReportMetric(float64(idleHeap)/(1<<20), "idle-heap-MiB")
		b.ReportMetric(float64(busyHeap)/(1<<20), "50conn-heap-MiB")
		b.ReportMetric(float64(idleRSS)/(1<<20), "idle-rss-MiB")
		b.ReportMetric(float64(busyRSS)/(1<<20), "50conn-rss-MiB")
	}
}

func startWorldHandler(t testing.TB, h http.Handler) *world {
	w := startWorld(t, []string{"allowed.test"}, fakeResolver{"allowed.test": loopback}, true)
	w.target.Config.Handler = h
	return w
}

// directClient reaches the target without the proxy, by its address.
func directClient(t testing.TB, w *world) *http.Client {
	c := w.client(t, "")
	tr := c.Transport.(*http.Transport)
	tr.Proxy = nil
	addr := w.target.Listener.Addr().String()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return c
}

func timeGet(b *testing.B, c *http.Client, url string) time.Duration {
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return time.Since(start)
}

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// memNow is the heap in use after a collection, and the process's RSS.
func memNow() (heap, rss uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			rss = kb << 10
		}
	}
	return m.HeapInuse, rss
}

// BenchmarkConnect: one CONNECT tunnel opened and closed per op, on a new
// connection, with nothing sent through it: the proxy's own cost of a
// tunnel (request parsing, the decision, the dial), which its CPU profile
// shows (-cpuprofile).
func BenchmarkConnect(b *testing.B) {
	w := startWorld(b, []string{"allowed.test"}, fakeResolver{"allowed.test": loopback}, true)
	w.proxy.opts.Logger = slog.New(slog.DiscardHandler)
	addr := strings.TrimPrefix(w.proxyURL, "http://")
	req := fmt.Sprintf("CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test:%d\r\nProxy-Authorization: Basic YmVuY2g6\r\n\r\n", w.port, w.port)
	buf := make([]byte, 128)
	for b.Loop() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.WriteString(c, req); err != nil {
			b.Fatal(err)
		}
		if n, err := c.Read(buf); err != nil || !bytes.Contains(buf[:n], []byte(" 200 ")) {
			b.Fatalf("CONNECT: %q, %v", buf[:n], err)
		}
		c.Close()
	}
}
