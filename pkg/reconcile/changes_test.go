package reconcile

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func configMap(name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "paperclip-acme"}, "data": data}}
}

// TestDigestTellsObjectsApart: two objects have the same digest exactly
// when their JSON is the same.
func TestDigestTellsObjectsApart(t *testing.T) {
	tests := []struct {
		name string
		a, b map[string]any
		same bool
	}{
		{"equal", map[string]any{"k": "v", "n": int64(1)}, map[string]any{"n": int64(1), "k": "v"}, true},
		{"int and int64", map[string]any{"n": 1}, map[string]any{"n": int64(1)}, true},
		{"a value changed", map[string]any{"k": "v"}, map[string]any{"k": "w"}, false},
		{"a key and a value run together", map[string]any{"ab": "c"}, map[string]any{"a": "bc"}, false},
		{"a list split", map[string]any{"l": []any{"ab"}}, map[string]any{"l": []any{"a", "b"}}, false},
		{"a number and a string", map[string]any{"n": int64(1)}, map[string]any{"n": "1"}, false},
		{"null and absent", map[string]any{"n": nil}, map[string]any{}, false},
		{"true and false", map[string]any{"b": true}, map[string]any{"b": false}, false},
		{"a nested map", map[string]any{"m": map[string]any{"a": "b"}}, map[string]any{"m": map[string]any{"a": "c"}}, false},
		{"other types as JSON", map[string]any{"l": []string{"a"}}, map[string]any{"l": []string{"b"}}, false},
		// A map under lists of lists, as a NetworkPolicy's ports under its
		// rules: the encoder once ran out of sort buffers there (a panic).
		{"a map under nested lists", map[string]any{"l": []any{[]any{[]any{map[string]any{"a": "b", "c": "d"}}}}},
			map[string]any{"l": []any{[]any{[]any{map[string]any{"c": "d", "a": "b"}}}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _, _, _ := digestRender([]*unstructured.Unstructured{configMap("x", tt.a)}, nil)
			b, _, _, _ := digestRender([]*unstructured.Unstructured{configMap("x", tt.b)}, nil)
			if same := cmp.Equal(a, b); same != tt.same {
				t.Errorf("same digest = %v, want %v", same, tt.same)
			}
		})
	}
}

// TestChanges: the objects new or changed since the last apply, and
// whether one was removed.
func TestChanges(t *testing.T) {
	x, y := configMap("x", map[string]any{"k": "1"}), configMap("y", map[string]any{"k": "1"})
	x2 := configMap("x", map[string]any{"k": "2"})
	applied, _, _, _ := digestRender([]*unstructured.Unstructured{x, y}, nil)
	tests := []struct {
		name        string
		objs        []*unstructured.Unstructured
		wantChanged []string
		wantRemoved bool
	}{
		{"nothing changed", []*unstructured.Unstructured{x, y}, nil, false},
		{"one changed", []*unstructured.Unstructured{x2, y}, []string{"x"}, false},
		{"one added", []*unstructured.Unstructured{x, y, configMap("z", nil)}, []string{"z"}, false},
		{"one removed", []*unstructured.Unstructured{x2}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now, _, _, _ := digestRender(tt.objs, nil)
			changed, removed := changes(applied, now, nil, tt.objs)
			var names []string
			for _, o := range changed {
				names = append(names, o.GetName())
			}
			if diff := cmp.Diff(tt.wantChanged, names); diff != "" || removed != tt.wantRemoved {
				t.Errorf("changed (-want +got):\n%s\nremoved %v, want %v", diff, removed, tt.wantRemoved)
			}
		})
	}
}

// TestDigestTakesTheLastRendersDigests: an object of the last render (the
// same value, which a render cache hands back unchanged) keeps its digest
// without being encoded again; an equal object that is another value is
// digested; the whole render's digest follows the objects' digests.
func TestDigestTakesTheLastRendersDigests(t *testing.T) {
	x, y := configMap("x", map[string]any{"k": "1"}), configMap("y", map[string]any{"k": "1"})
	first, whole, _, last := digestRender([]*unstructured.Unstructured{x, y}, nil)
	marked := maps.Clone(last)
	marked[x] = digested{id: idOf(x), sum: [32]byte{1}} // a digest no encoding gives: seen only if taken from last
	tests := []struct {
		name      string
		objs      []*unstructured.Unstructured
		wantX     [32]byte
		wantWhole bool // the whole digest is the first render's
	}{
		{name: "the same values", objs: []*unstructured.Unstructured{x, y}, wantX: [32]byte{1}},
		{name: "equal values, new", objs: []*unstructured.Unstructured{x.DeepCopy(), y.DeepCopy()}, wantX: first[idOf(x)], wantWhole: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			per, got, _, byObject := digestRender(tt.objs, marked)
			if per[idOf(x)] != tt.wantX {
				t.Errorf("x's digest %x, want %x", per[idOf(x)], tt.wantX)
			}
			if (got == whole) != tt.wantWhole {
				t.Errorf("whole digest %s, the first render's %s: same %v, want %v", got, whole, got == whole, tt.wantWhole)
			}
			if len(byObject) != len(tt.objs) || byObject[tt.objs[1]].sum != first[idOf(y)] {
				t.Errorf("digests by object %v: want one per object, y's %x", byObject, first[idOf(y)])
			}
		})
	}
}
