//go:build integration

package realnode

import (
	"context"
	"testing"
	"time"
)

// Rounds of the credential benchmark; the route and the straight peer
// alternate within each round, and the one that goes first alternates
// from round to round, so that a drift of the machine's load hits both.
const (
	credTTFBRounds  = 5   // × credTTFBPerRound streamed requests each
	credTTFBPerRnd  = 20  // credTTFBRounds × this = 100
	credRunRounds   = 5   // runs of credRunRequests each
	credRunRequests = 200 // a run's requests, sequential on one connection
	credTokens      = 50  // the proxy's live tokens in the memory figure
)

// BenchmarkCredentials: the credential route (the agent's pod → the
// tenant's proxy, which checks the run's token and forwards over TLS
// with the key) against its peer, the same pod straight to the stand-in
// Anthropic API over TLS with the key; both with the enforcer on the real
// node, the client a Node.js script in the run's pod on one keep-alive
// connection, the stand-in streaming a short Messages response (SSE,
// each event flushed). Figures: the time to the first byte of the stream
// p50/p99 over 100 requests, a run's 200 requests' whole time, and the
// proxy's RSS with 1 live token and with 50.
func BenchmarkCredentials(b *testing.B) {
	e := newCredBenchEnv(b)
	ctx := context.Background()
	for range b.N {
		cpu0, rcpu0 := e.cpu(ctx, b, proxyContainer), e.cpu(ctx, b, relayContainer)
		ttfb := e.alternate(ctx, b, credTTFBRounds, "ttfb", credTTFBPerRnd)
		cpu1, rcpu1, split1 := e.cpu(ctx, b, proxyContainer), e.cpu(ctx, b, relayContainer), e.cpuSplit(ctx, b)
		b.Run("ttfb-100", func(b *testing.B) {
			reportP(b, "time to the first byte of a streamed Messages response, 100 requests on a kept-alive connection: the credential route (proxy) vs straight (direct)",
				ttfb["route"].ttfb, ttfb["straight"].ttfb)
			reportFloor(b, ttfb["route"].ttfb, ttfb["relay"].ttfb, ttfb["straight"].ttfb)
			b.Logf("whole streamed response: p50 route %.2f ms, relay %.2f ms, straight %.2f ms (the stand-in pauses %d × %s)",
				p50(ttfb["route"].total), p50(ttfb["relay"].total), p50(ttfb["straight"].total), sseDeltas, sseGap)
			units := float64(len(ttfb["route"].ttfb) + credTTFBRounds) // and one warm-up a round
			reportCPU(b, "proxy", cpu0, cpu1, units, "req")
			reportCPU(b, "relay", rcpu0, rcpu1, units, "req")
		})
		runs := e.alternate(ctx, b, credRunRounds, "run", credRunRequests)
		cpu2, rcpu2, split2 := e.cpu(ctx, b, proxyContainer), e.cpu(ctx, b, relayContainer), e.cpuSplit(ctx, b)
		b.Run("run-200", func(b *testing.B) {
			reportWhole(b, runs["route"].whole, runs["relay"].whole, runs["straight"].whole)
			units := float64(len(runs["route"].whole) * credRunRequests)
			reportCPU(b, "proxy", cpu1, cpu2, units, "req")
			reportCPU(b, "relay", rcpu1, rcpu2, units, "req")
			reportSplit(b, split1, split2, units)
		})
		one := e.rss(ctx, b)
		token := e.addTokens(ctx, b, credTokens-1)
		many := e.routeOnly(ctx, b, token)
		fifty := e.rss(ctx, b)
		b.Run("proxy-rss", func(b *testing.B) {
			b.ReportMetric(one, "1token-MiB")
			b.ReportMetric(fifty, "50tokens-MiB")
			b.ReportMetric(p50(many.ttfb), "50tokens-ttfb-p50-ms")
			b.Logf("the proxy container's RSS after the route's requests: %.1f MiB with 1 live token, %.1f MiB with %d (%+.1f MiB); the route's ttfb p50 with %d tokens %.2f ms (p99 %.2f ms, %d requests; with 1: %.2f ms); load %s",
				one, fifty, credTokens, fifty-one, credTokens, p50(many.ttfb), p99(many.ttfb), len(many.ttfb), p50(ttfb["route"].ttfb), loadavg())
		})
	}
}

// credModes are the client's contenders: the credential route, the bare
// relay on the same hop, and straight to the stand-in.
var credModes = []string{"route", "relay", "straight"}

// alternate runs the client's op for each contender, rounds times,
// rotating which goes first, and returns each one's figures.
func (e *credBenchEnv) alternate(ctx context.Context, b *testing.B, rounds int, op string, n int) map[string]sseTimes {
	b.Helper()
	out := map[string]sseTimes{}
	for r := range rounds {
		for k := range credModes {
			mode := credModes[(r+k)%len(credModes)]
			t, err := e.clientRun(ctx, mode, "", op, n)
			if err != nil {
				b.Fatal(err)
			}
			o := out[mode]
			o.ttfb, o.total, o.whole = append(o.ttfb, t.ttfb...), append(o.total, t.total...), append(o.whole, t.whole...)
			out[mode] = o
		}
	}
	return out
}

// routeOnly runs the ttfb op through the route with token, as many
// requests as the ttfb figure's.
func (e *credBenchEnv) routeOnly(ctx context.Context, b *testing.B, token string) sseTimes {
	b.Helper()
	var all sseTimes
	for range credTTFBRounds {
		t, err := e.clientRun(ctx, "route", token, "ttfb", credTTFBPerRnd)
		if err != nil {
			b.Fatal(err)
		}
		all.ttfb, all.total = append(all.ttfb, t.ttfb...), append(all.total, t.total...)
	}
	return all
}

// reportWhole reports a run's whole time through the route, the relay
// and straight (p50 over the rounds), the route's ratio to straight and
// its cost per request, and the relay's (the hop's share of it).
func reportWhole(b *testing.B, route, relay, straight []time.Duration) {
	b.Helper()
	r, f, s := p50(route), p50(relay), p50(straight)
	b.ReportMetric(r, "route-p50-ms")
	b.ReportMetric(f, "relay-p50-ms")
	b.ReportMetric(s, "straight-p50-ms")
	b.ReportMetric(r/s, "ratio")
	b.ReportMetric(f/s, "relay-ratio")
	b.ReportMetric((r-s)/credRunRequests, "per-request-delta-ms")
	b.ReportMetric((f-s)/credRunRequests, "relay-per-request-delta-ms")
	b.Logf("a run's %d sequential streamed requests (one keep-alive connection, its set-up included), whole time: route p50 %.1f ms vs straight %.1f ms (%.3f×, %+.2f ms a request); the bare relay on the same hop %.1f ms (%.3f×, %+.2f ms a request); %d runs each; load %s",
		credRunRequests, r, s, r/s, (r-s)/credRunRequests, f, f/s, (f-s)/credRunRequests, len(route), loadavg())
}

// reportSplit reports the proxy's CPU per request in user and kernel
// time (the kernel's tick-based split, so over many requests): the
// kernel's share is the network stack's and netfilter's work on
// the proxy's packets, the user's pcsync's own.
func reportSplit(b *testing.B, before, after cpuUserSys, units float64) {
	b.Helper()
	u, k := float64(after.user-before.user)/1e6/units, float64(after.sys-before.sys)/1e6/units
	b.ReportMetric(u, "proxy-user-ms/req")
	b.ReportMetric(k, "proxy-sys-ms/req")
	b.Logf("the proxy's CPU per request: %.2f ms user, %.2f ms kernel", u, k)
}
