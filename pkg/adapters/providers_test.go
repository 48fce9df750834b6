package adapters

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProvidersKeyEnvForwarded: every variable a provider's key is given
// in is one the adapters that use the provider forward, and each route's
// base-URL variable too, so that a key variable the daemon replaces is
// one the CLI reads.
func TestProvidersKeyEnvForwarded(t *testing.T) {
	routes := Routes()
	for _, at := range Types() {
		d := BuiltinDefaults()[at]
		for _, p := range Providers(at) {
			r, ok := routes[p]
			if !ok {
				t.Fatalf("%s: provider %s has no route", at, p)
			}
			found := false
			for _, keys := range r.KeyEnv {
				for _, k := range keys {
					found = found || slices.Contains(d.EnvKeys, k)
				}
			}
			if !found {
				t.Errorf("%s forwards none of provider %s's key variables %v (it forwards %v)", at, p, r.KeyEnv, d.EnvKeys)
			}
		}
	}
}

func TestRoutesComplete(t *testing.T) {
	for p, r := range Routes() {
		if r.Provider != p || r.Host == "" || r.BaseURLEnv == "" {
			t.Errorf("route %s: %+v", p, r)
		}
		for kind, keys := range r.KeyEnv {
			if _, ok := r.Headers[kind]; !ok || len(keys) == 0 {
				t.Errorf("route %s: key kind %s has variables %v and header %v", p, kind, keys, r.Headers[kind])
			}
		}
	}
}

func TestHeaderValue(t *testing.T) {
	tests := []struct {
		h    Header
		want string
	}{
		{Header{Name: "x-api-key"}, "k"},
		{Header{Name: "Authorization", Scheme: "Bearer"}, "Bearer k"},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, tc.h.Value("k")); diff != "" {
			t.Errorf("%+v: (-want +got)\n%s", tc.h, diff)
		}
	}
}

func TestProvidersOf(t *testing.T) {
	tests := map[Type][]Provider{
		ClaudeLocal: {ProviderAnthropic}, CodexLocal: {ProviderOpenAI}, GeminiLocal: {ProviderGemini},
		CursorLocal: nil, OpencodeLocal: {ProviderAnthropic, ProviderOpenAI},
		PiLocal: {ProviderAnthropic, ProviderGemini, ProviderOpenAI},
	}
	for at, want := range tests {
		if diff := cmp.Diff(want, Providers(at)); diff != "" {
			t.Errorf("Providers(%s) (-want +got)\n%s", at, diff)
		}
	}
}
