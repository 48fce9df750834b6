package spend_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
	"github.com/pcsync/pcsync/pkg/egressproxy/spend"
)

// hash is the run's token hash as the daemon names it on the proxy pod.
const hash = "0123456789abcdef0123456789abcdef01234567"

// oneRun is a Verifier of every token as the run of hash (the token
// itself is inject's to check; its own tests do).
type oneRun struct{}

func (oneRun) Verify(string, netip.Addr) (string, string) { return spend.RunOf(hash), "" }

// provider is a stand-in provider on loopback whose answers report
// usage: /stream as SSE; /held the same, held before its message_delta
// until release is closed; /json gzipped when the request accepts it.
type provider struct {
	srv      *httptest.Server
	stream   string
	json     string
	release  chan struct{}
	mu       sync.Mutex
	encoding []string
}

func newProvider(t *testing.T, stream, body string) *provider {
	p := &provider{stream: stream, json: body, release: make(chan struct{})}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.encoding = append(p.encoding, r.Header.Get("Accept-Encoding"))
		p.mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/held"):
			w.Header().Set("Content-Type", "text/event-stream")
			cut := strings.Index(p.stream, "event: message_delta")
			_, _ = io.WriteString(w, p.stream[:cut])
			w.(http.Flusher).Flush()
			<-p.release
			_, _ = io.WriteString(w, p.stream[cut:])
		case strings.HasSuffix(r.URL.Path, "/stream"):
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, p.stream)
		case strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			z := gzip.NewWriter(w)
			_, _ = io.WriteString(z, p.json)
			_ = z.Close()
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, p.json)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// releaseHeld ends the held stream.
func (p *provider) releaseHeld() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.release:
	default:
		close(p.release)
	}
}

// route is the credential route of one credential of provider pv toward
// up, with the spend gate of cfg, behind a loopback server.
func route(t *testing.T, pv adapters.Provider, up *provider, cfg spend.Config, opts ...spend.GateOptions) (*httptest.Server, *spend.Gate) {
	t.Helper()
	if cfg.AnnotationsFile == "" {
		cfg.AnnotationsFile = annotations(t, "")
	}
	cfg.Company = "acme"
	g, err := spend.NewGate(cfg, append(opts, spend.GateOptions{})[0])
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.srv.URL)
	r := adapters.Routes()[pv]
	kind := adapters.KeyAPIKey
	h, err := inject.NewHandler([]inject.Credential{{Name: "m", Route: r, Kind: kind, Upstream: u, Key: staticKey{}}},
		inject.Options{Company: "acme", Tokens: oneRun{}, Transport: up.srv.Client().Transport.(*http.Transport).Clone(), Spend: g})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// First: the server's Close waits for the held stream.
	t.Cleanup(up.releaseHeld)
	return srv, g
}

// annotations writes the proxy pod's annotations file: the run of hash
// is coder's, and more (lines of the kubelet's format) when not "".
func annotations(t *testing.T, more string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "annotations")
	if err := os.WriteFile(path, []byte(spend.AnnotationAgentPrefix+hash+`="coder"`+"\n"+more), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type staticKey struct{}

func (staticKey) Key() (string, error) { return "real-key", nil }

// call sends a request as a CLI does (gzip accepted) and returns its
// status and body.
func call(t *testing.T, pv adapters.Provider, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+inject.PathPrefix+"m"+path, strings.NewReader(`{}`))
	hd := adapters.Routes()[pv].Headers[adapters.KeyAPIKey]
	req.Header.Set(hd.Name, hd.Value("pcsync-run-token"))
	req.Header.Set("Accept-Encoding", "gzip, deflate, br")
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestGateRefusesOnceSpent: an agent whose monthly budget is what 5
// answers cost has its 6th request refused, in Anthropic's format, naming
// the budget and how to raise it; what was counted is the 5 answers'
// usage at the table's prices, to the micro-cent.
func TestGateRefusesOnceSpent(t *testing.T) {
	up := newProvider(t, spend.AnthropicStream, "")
	// One answer: 2.1711 cents (12×$3 + 2000×$3.75 + 30000×$0.30 + 345×$15
	// per million tokens); 4 are 8.68 cents, 5 are 10.86.
	srv, g := route(t, adapters.ProviderAnthropic, up, spend.Config{Agents: map[string]int64{"coder": 10}})
	for i := range 5 {
		if code, body := call(t, adapters.ProviderAnthropic, srv, "/v1/messages/stream"); code != http.StatusOK || body != spend.AnthropicStream {
			t.Fatalf("request %d: %d, body changed: %v", i+1, code, body != spend.AnthropicStream)
		}
	}
	code, body := call(t, adapters.ProviderAnthropic, srv, "/v1/messages/stream")
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusForbidden || e.Type != "error" || e.Error.Type != "permission_error" {
		t.Fatalf("6th request: %d %s", code, body)
	}
	month := time.Now().UTC()
	next := time.Date(month.Year(), month.Month()+1, 1, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
	want := "pcsync: budget spent: agent acme/coder has spent $0.11 of its monthly budget of $0.10; raise its budgetMonthlyCents in the Git config, or wait until " + next + " (UTC)"
	if e.Error.Message != want {
		t.Errorf("message:\n%s\nwant:\n%s", e.Error.Message, want)
	}
	got := g.Ledger().Totals()
	run := spend.RunOf(hash)
	if d := cmp.Diff(spend.Totals{Month: month.Format("2006-01"), Counts: spend.Counts{Company: 5 * 2_171_100,
		Agents: map[string]spend.MicroCents{"coder": 5 * 2_171_100}, Runs: map[string]spend.MicroCents{run: 5 * 2_171_100}}}, got); d != "" {
		t.Errorf("totals (-want +got):\n%s", d)
	}
	if len(up.encoding) != 5 {
		t.Errorf("the provider got %d requests, want 5 (the 6th refused at the proxy)", len(up.encoding))
	}
}

// TestGateProviders: each provider's answers are counted (OpenAI's
// gzipped one decoded on the way: the agent's Accept-Encoding is not
// passed on), and a run past its cap is refused in that provider's format.
func TestGateProviders(t *testing.T) {
	expensive := []spend.PriceOverride{
		{Provider: adapters.ProviderOpenAI, Model: "gpt-4o-mini*", Rate: spend.Rate{Input: "10000", Output: "1"}},
		{Provider: adapters.ProviderGemini, Model: "gemini-2.5-pro*", Rate: spend.Rate{Input: "10000", Output: "1"}},
	}
	for _, tc := range []struct {
		pv          adapters.Provider
		stream, doc string
		path        string
		cost        spend.MicroCents
		status      string
		format      string
	}{
		// 176 uncached input tokens at $10,000 a million, 1024 cached
		// (input's price too), 40 output at $1.
		{adapters.ProviderOpenAI, "", spend.OpenAIChat, "/v1/chat/completions", 1200*1_000_000 + 40*100, `"code":"budget_exceeded","message":"pcsync: budget spent`, `"type":"invalid_request_error"`},
		// 3000 + 1000 cached input at $10,000, 500 output at $1.
		{adapters.ProviderGemini, "", spend.GeminiJSON, "/v1beta/models/gemini-x:generateContent", 4000*1_000_000 + 500*100, `"message":"pcsync: budget spent`, `"status":"PERMISSION_DENIED"`},
	} {
		t.Run(string(tc.pv), func(t *testing.T) {
			up := newProvider(t, tc.stream, tc.doc)
			srv, g := route(t, tc.pv, up, spend.Config{RunCents: 1, Prices: expensive})
			if code, body := call(t, tc.pv, srv, tc.path); code != http.StatusOK || body != tc.doc {
				t.Fatalf("first request: %d %s", code, body)
			}
			if got := g.Ledger().Totals().Company; got != tc.cost {
				t.Errorf("counted %d µ¢, want %d", got, tc.cost)
			}
			code, body := call(t, tc.pv, srv, tc.path)
			if code != http.StatusForbidden || !strings.Contains(body, tc.status) || !strings.Contains(body, tc.format) || !strings.Contains(body, "raise spec.budget.runCents") {
				t.Errorf("second request: %d %s", code, body)
			}
			if up.encoding[0] != "gzip" {
				t.Errorf("the provider was asked for %q, want gzip (the transport's own)", up.encoding[0])
			}
		})
	}
}

// TestGateStreamingFinishes: a stream under way when the budget is spent
// finishes, and is counted; the next request is refused. What a stream
// reported is counted as it passes: the held one's message_start (1.66
// cents) before it ends.
func TestGateStreamingFinishes(t *testing.T) {
	up := newProvider(t, spend.AnthropicStream, "")
	srv, g := route(t, adapters.ProviderAnthropic, up, spend.Config{MonthlyCents: 2})
	type answer struct {
		code int
		body string
	}
	held := make(chan answer)
	go func() {
		code, body := call(t, adapters.ProviderAnthropic, srv, "/v1/messages/held")
		held <- answer{code, body}
	}()
	for len(up.encodings()) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if code, _ := call(t, adapters.ProviderAnthropic, srv, "/v1/messages/stream"); code != http.StatusOK {
		t.Fatalf("second request: %d", code)
	}
	if code, body := call(t, adapters.ProviderAnthropic, srv, "/v1/messages/stream"); code != http.StatusForbidden ||
		!strings.Contains(body, "company acme has spent $0.04 of its monthly budget of $0.02; raise spec.budget.monthlyCents") {
		t.Fatalf("third request: %d %s", code, body)
	}
	up.releaseHeld()
	if a := <-held; a.code != http.StatusOK || a.body != spend.AnthropicStream {
		t.Fatalf("held stream: %d, complete %v", a.code, a.body == spend.AnthropicStream)
	}
	if got := g.Ledger().Totals().Company; got != 2*2_171_100 {
		t.Errorf("counted %d µ¢, want both answers' %d", got, 2*2_171_100)
	}
}

func (p *provider) encodings() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.encoding...)
}

// TestLedgerMonth: the month starts again on the 1st in the company's
// time zone.
func TestLedgerMonth(t *testing.T) {
	now := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC) // 23:00 in Tokyo
	l, err := spend.NewLedger(spend.Config{Company: "acme", MonthlyCents: 1, TimeZone: "Asia/Tokyo"}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	l.Add("r", "a", spend.FromCents(1))
	ref := l.Check("r2", "b")
	if ref == nil || ref.Budget != spend.BudgetCompany || !strings.HasSuffix(ref.Message, "wait until 2026-12-01 (Asia/Tokyo)") {
		t.Fatalf("refusal %+v", ref)
	}
	now = now.Add(time.Hour) // midnight in Tokyo
	if ref := l.Check("r2", "b"); ref != nil {
		t.Fatalf("refused in a new month: %+v", ref)
	}
	if got := l.Totals(); got.Month != "2026-12" || got.Company != 0 {
		t.Errorf("totals %+v", got)
	}
	if _, err := spend.NewLedger(spend.Config{Company: "acme", TimeZone: "Mars/Olympus"}, nil); err == nil ||
		err.Error() != `spend acme: time zone "Mars/Olympus": unknown time zone Mars/Olympus` {
		t.Errorf("error %v", err)
	}
}

// TestGateRefusesWebSocket: a WebSocket upgrade, whose frames would pass
// uncounted, is answered 404 (Codex then uses HTTPS) and never reaches the
// provider.
func TestGateRefusesWebSocket(t *testing.T) {
	up := newProvider(t, "", spend.OpenAIChat)
	srv, _ := route(t, adapters.ProviderOpenAI, up, spend.Config{})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+inject.PathPrefix+"m/v1/responses", nil)
	req.Header.Set("Authorization", "Bearer pcsync-run-token")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "serves no WebSocket") || len(up.encodings()) != 0 {
		t.Errorf("%d %s; the provider got %d requests", resp.StatusCode, b, len(up.encodings()))
	}
}

// TestGateConcurrentStreams: one run's 4 streams admitted at once, before
// any has reported, all finish and are counted; the spend past the budget
// is theirs and no more (the figure against Paperclip's hard stop,
// which a $0.50 budget passed by 1,022 %), and the next request is
// refused.
func TestGateConcurrentStreams(t *testing.T) {
	up := newProvider(t, spend.AnthropicStream, "")
	srv, g := route(t, adapters.ProviderAnthropic, up, spend.Config{RunCents: 5})
	done := make(chan int, 4)
	for range 4 {
		go func() {
			code, body := call(t, adapters.ProviderAnthropic, srv, "/v1/messages/held")
			if body != spend.AnthropicStream {
				code = -code
			}
			done <- code
		}()
	}
	for len(up.encodings()) < 4 {
		time.Sleep(10 * time.Millisecond)
	}
	up.releaseHeld()
	for range 4 {
		if code := <-done; code != http.StatusOK {
			t.Fatalf("a stream: %d (negative: its body changed)", code)
		}
	}
	// 4 answers of 2.1711 cents: 8.6844 cents against a cap of 5, 174 %.
	if got, want := g.Ledger().Company(), spend.MicroCents(4*2_171_100); got != want {
		t.Errorf("counted %d µ¢, want the 4 streams' %d", got, want)
	}
	t.Logf("spent %.2f%% of the run's cap, all of it the 4 streams admitted before any reported", float64(g.Ledger().Company())/float64(spend.FromCents(5))*100)
	if code, body := call(t, adapters.ProviderAnthropic, srv, "/v1/messages/stream"); code != http.StatusForbidden ||
		!strings.Contains(body, "this run has spent $0.09 of company acme's cap of $0.05 a run") {
		t.Errorf("the next request: %d %s", code, body)
	}
}
