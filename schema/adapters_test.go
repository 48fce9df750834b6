package schema

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// The schema holds the built-in adapter defaults; pkg/adapters states what
// each CLI needs. They must agree, so that a CLI never runs without a key or
// a host it needs.
func TestAdapterDefaultsAgreeWithAdapters(t *testing.T) {
	_, s := compile(t)
	b, err := s.LookupPath(AdapterDefaults()).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]adapters.Defaults
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]adapters.Defaults{}
	for typ, d := range adapters.BuiltinDefaults() {
		want[string(typ)] = d
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schema adapterDefaults disagree with pkg/adapters (-adapters +schema):\n%s", diff)
	}
}
