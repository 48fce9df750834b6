package spend

import (
	"fmt"
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
