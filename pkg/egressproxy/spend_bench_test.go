package egressproxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
	"github.com/pcsync/pcsync/pkg/egressproxy/spend"
)

// BenchmarkSpend: 500 streamed Messages answers (60 SSE events, 9 KiB,
// Anthropic's shape) through the proxy's credential route, with spend
// counting on and off, and straight to the stand-in. Reports the time to
// the answer's first byte, p50 (goal: on ≤ off + 0.5 ms), and the proxy's
// CPU per request: this process's CPU around a request through the proxy
// less around one straight to the stand-in (the client's and the
// stand-in's share), on over off (goal ≤ 1.1).
func BenchmarkSpend(b *testing.B) {
	stream := benchStream(60)
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range stream {
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	b.Cleanup(up.Close)
	off, on := spendRoute(b, up, false), spendRoute(b, up, true)
	direct := &http.Client{Transport: up.Client().Transport}
	kinds := []func() time.Duration{
		func() time.Duration { return ttfb(b, direct, up.URL+"/v1/messages", "") },
		func() time.Duration { return ttfb(b, http.DefaultClient, off+"/v1/messages", "pcsync-run-x") },
		func() time.Duration { return ttfb(b, http.DefaultClient, on+"/v1/messages", "pcsync-run-x") },
	}
	const n = 500
	for b.Loop() {
		// Interleaved, each request's CPU taken around it: the machine's
		// load, which drifts, weighs on the three alike.
		var cpu [3]time.Duration
		var first [3][]time.Duration
		for i := range n {
			for j := range kinds {
				k := (i + j) % len(kinds)
				before := cpuNow(b)
				first[k] = append(first[k], kinds[k]())
				cpu[k] += cpuNow(b) - before
			}
		}
		tOff, tOn := p50(first[1]), p50(first[2])
		b.ReportMetric(ms(tOff), "ttfb-p50-off-ms")
		b.ReportMetric(ms(tOn), "ttfb-p50-on-ms")
		b.ReportMetric(ms(tOn-tOff), "ttfb-p50-added-ms")
		b.ReportMetric(float64(cpu[1]-cpu[0])/n/1e3, "proxy-cpu-off-us/req")
		b.ReportMetric(float64(cpu[2]-cpu[0])/n/1e3, "proxy-cpu-on-us/req")
		b.ReportMetric(float64(cpu[2]-cpu[0])/float64(cpu[1]-cpu[0]), "cpu-on/off")
	}
}

// benchStream is a streamed answer of n events: message_start, n-3 text
// deltas, message_delta, message_stop.
func benchStream(n int) []string {
	evs := []string{"event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"usage":{"input_tokens":1200,"cache_creation_input_tokens":0,"cache_read_input_tokens":24000,"output_tokens":1}}}` + "\n\n"}
	for i := range n - 3 {
		evs = append(evs, "event: content_block_delta\ndata: "+fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word %d of the answer, with some \"quoted\" text and more words."}}`, i)+"\n\n")
	}
	return append(evs, "event: message_delta\ndata: "+`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":400}}`+"\n\n",
		"event: message_stop\ndata: "+`{"type":"message_stop"}`+"\n\n")
}

// spendRoute serves a proxy with the credential route of one anthropic
// credential toward up, counting spend or not; it returns the route's URL.
func spendRoute(b *testing.B, up *httptest.Server, counting bool) string {
	dir := b.TempDir()
	ann := filepath.Join(dir, "annotations")
	if err := os.WriteFile(ann, []byte(spend.AnnotationAgentPrefix+strings.Repeat("a", 40)+`="coder"`+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	u, _ := url.Parse(up.URL)
	opts := inject.Options{Company: "acme", Tokens: benchTokens{}, Logger: log, Transport: up.Client().Transport.(*http.Transport).Clone()}
	if counting {
		g, err := spend.NewGate(spend.Config{Company: "acme", MonthlyCents: 1 << 40, AnnotationsFile: ann}, spend.GateOptions{Logger: log})
		if err != nil {
			b.Fatal(err)
		}
		opts.Spend = g
	}
	h, err := inject.NewHandler([]inject.Credential{{Name: "claude", Route: adapters.Routes()[adapters.ProviderAnthropic],
		Kind: adapters.KeyAPIKey, Upstream: u, Key: benchKey{}}}, opts)
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(allow.List{Company: "acme", Hosts: []string{"api.anthropic.com"}}, Options{Logger: log, Credentials: h})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = p.Serve(ctx, ln) }()
	b.Cleanup(cancel)
	return "http://" + ln.Addr().String() + inject.PathPrefix + "claude"
}

type benchTokens struct{}

func (benchTokens) Verify(string, netip.Addr) (string, string) { return strings.Repeat("a", 12), "" }

type benchKey struct{}

func (benchKey) Key() (string, error) { return "sk-ant-bench", nil }

// ttfb posts a request and returns the time to its answer's first byte,
// reading the rest.
func ttfb(b *testing.B, c *http.Client, u, token string) time.Duration {
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"model":"claude-sonnet-4-5","stream":true}`))
	req.Header.Set("x-api-key", token)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	one := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, one); err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("POST %s: %d, %v", u, resp.StatusCode, err)
	}
	d := time.Since(start)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
	return d
}

func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
