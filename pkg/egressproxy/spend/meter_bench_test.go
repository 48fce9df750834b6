package spend

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// BenchmarkMeter: the usage read from a streamed Messages answer of 60
// events (11 KiB) given in reads of 200 bytes: the meter's own cost, per
// answer and per byte (go test -bench Meter -benchmem).
func BenchmarkMeter(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(anthropicSSE)
	for i := range 57 {
		sb.WriteString("event: content_block_delta\ndata: " + fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word %d of the answer, with some \"quoted\" text and more words."}}`, i) + "\n\n")
	}
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		t := newTap(adapters.ProviderAnthropic, true)
		for i := 0; i < len(body); i += 200 {
			t.write(body[i:min(i+200, len(body))])
		}
		if u := t.end(); u.Output != 345 {
			b.Fatalf("usage %+v", u)
		}
	}
}

// BenchmarkGate: what the gate adds to one streamed answer as the proxy
// serves it: Admit (the run's agent, the budgets), then the answer's 60
// events (11 KiB) each written and flushed through the metered writer, then
// done (the usage priced and counted). The proxy's own CPU for the same
// answer with counting off is BenchmarkSpend's proxy-cpu-off-us/req (in
// package egressproxy); this is the part counting adds, measured alone.
func BenchmarkGate(b *testing.B) {
	dir := b.TempDir()
	ann := dir + "/annotations"
	if err := os.WriteFile(ann, []byte(AnnotationAgentPrefix+strings.Repeat("a", 40)+`="coder"`+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	g, err := NewGate(Config{Company: "acme", MonthlyCents: 1 << 40, AnnotationsFile: ann}, GateOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	events := []string{anthropicSSE}
	for i := range 57 {
		events = append(events, "event: content_block_delta\ndata: "+fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word %d of the answer, with some \"quoted\" text and more words."}}`, i)+"\n\n")
	}
	raw := make([][]byte, len(events))
	for i, ev := range events {
		raw[i] = []byte(ev)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	w := &discardWriter{h: http.Header{}}
	for b.Loop() {
		mw, done, ok := g.Admit(w, req, adapters.ProviderAnthropic, strings.Repeat("a", 12))
		if !ok {
			b.Fatal("refused")
		}
		mw.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range raw {
			_, _ = mw.Write(ev)
			mw.(http.Flusher).Flush()
		}
		done()
	}
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}
