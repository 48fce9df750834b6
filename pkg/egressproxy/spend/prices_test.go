package spend

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/adapters"
)

func TestPrice(t *testing.T) {
	tab := Shipped()
	over := tab
	if err := over.Set(adapters.ProviderAnthropic, "claude-sonnet-4-5*", Rate{Input: "2.5", Output: "12"}); err != nil {
		t.Fatal(err)
	}
	if err := over.Set(adapters.ProviderOpenAI, "*", Rate{Input: "0.00000001", Output: "1"}); err != nil {
		t.Fatal(err)
	}
	claude := tab
	if err := claude.Set(adapters.ProviderAnthropic, "claude*", Rate{Input: "10", Output: "0"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		table    Table
		provider adapters.Provider
		model    string
		want     Price
		known    bool
	}{
		{"prefix", tab, adapters.ProviderAnthropic, "claude-sonnet-4-5-20250929", Price{3e8, 15e8, 3e7, 375e6}, true},
		{"longest prefix", tab, adapters.ProviderAnthropic, "claude-opus-4-5-20251101", Price{5e8, 25e8, 5e7, 625e6}, true},
		{"shorter prefix", tab, adapters.ProviderAnthropic, "claude-opus-4-1-20250805", Price{15e8, 75e8, 15e7, 1875e6}, true},
		{"cache defaults to input", tab, adapters.ProviderOpenAI, "gpt-5-pro-2025-10-06", Price{15e8, 120e8, 15e8, 15e8}, true},
		{"mini before its family", tab, adapters.ProviderOpenAI, "gpt-5-mini", Price{25e6, 2e8, 25e5, 25e6}, true},
		{"unknown: fallback", tab, adapters.ProviderOpenAI, "gpt-9-ultra", Price{15e8, 120e8, 15e8, 15e8}, false},
		{"empty model: fallback", tab, adapters.ProviderGemini, "", Price{4e8, 18e8, 4e7, 4e8}, false},
		{"unknown provider: dearest", tab, "mistral", "x", Price{15e8, 120e8, 15e8, 1875e6}, false},
		{"override", over, adapters.ProviderAnthropic, "claude-sonnet-4-5-20250929", Price{25e7, 12e8, 25e7, 25e7}, true},
		{"override leaves the rest", over, adapters.ProviderAnthropic, "claude-sonnet-4-20250514", Price{3e8, 15e8, 3e7, 375e6}, true},
		{"override fallback", over, adapters.ProviderOpenAI, "gpt-9", Price{1, 1e8, 1, 1}, false},
		{"a company's pattern before a longer of pcsync's", claude, adapters.ProviderAnthropic, "claude-opus-4-1-20250805", Price{1e9, 0, 1e9, 1e9}, true},
		{"original untouched", tab, adapters.ProviderOpenAI, "gpt-9", Price{15e8, 120e8, 15e8, 15e8}, false},
	} {
		got, known := tc.table.Price(tc.provider, tc.model)
		if d := cmp.Diff(tc.want, got); d != "" || known != tc.known {
			t.Errorf("%s: known %v (want %v), price (-want +got):\n%s", tc.name, known, tc.known, d)
		}
	}
}

func TestCost(t *testing.T) {
	p, _ := Shipped().Price(adapters.ProviderAnthropic, "claude-sonnet-4-5")
	u := Usage{Input: 12, CacheWrite: 2000, CacheRead: 30000, Output: 345}
	// 12×$3 + 2000×$3.75 + 30000×$0.30 + 345×$15 per million tokens =
	// $0.021711 = 2.1711 cents.
	if got, want := p.Cost(u), MicroCents(2_171_100); got != want {
		t.Errorf("cost %d µ¢, want %d", got, want)
	}
	if got := p.Cost(u).Cents(); got != 3 {
		t.Errorf("cents %d, want 3 (rounded up)", got)
	}
	// A fraction of a micro-cent is one, never free.
	nano, _ := Shipped().Price(adapters.ProviderOpenAI, "gpt-5-nano")
	if got := nano.Cost(Usage{CacheRead: 1}); got != 1 {
		t.Errorf("one cached gpt-5-nano token: %d µ¢, want 1", got)
	}
}

func TestParseTableErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"openai: {models: {}}", "openai: no fallback price"},
		{"openai: {fallback: {input: -1, output: 1}}", `openai fallback: input: want dollars per million tokens, from 0 to 10000 with at most 8 decimals, not "-1"`},
		{"openai: {fallback: {input: 1, output: 0.000000001}}", `openai fallback: output: want dollars per million tokens, from 0 to 10000 with at most 8 decimals, not "1e-9"`},
		{"openai: {fallback: {input: 1, output: 1}, models: {x: {input: 1, output: 1, cached: 1}}}", `json: unknown field "cached"`},
	} {
		_, err := ParseTable([]byte(tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %s", tc.yaml, err, tc.want)
		}
	}
	var r Rate
	if err := json.Unmarshal([]byte(`{"input":1,"output":2}`), &r); err != nil || r.Input != "1" {
		t.Errorf("rate %+v %v", r, err)
	}
}
