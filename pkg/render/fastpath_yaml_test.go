package render

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	yaml "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/golden"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/fastpath"
)

// trickyStrings are scalars whose YAML style go-yaml decides in every
// possible way: plain, single- and double-quoted, literal, folded.
var trickyStrings = []string{
	"", " ", "a", "ab", "abcde", "abcdef", "x1", "1", "01", "0o17", "0x1F", "1_000", "1e3", "-1", "+1", ".5", "1.", ".inf", "-.Inf", ".NaN",
	"true", "True", "TRUE", "false", "yes", "Yes", "no", "No", "on", "On", "off", "OFF", "y", "Y", "n", "N", "null", "Null", "NULL", "~",
	"12:30", "1:20:30", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2002-12-14 21:59:43", "<<", "=", "-", "--", "---", "...", "- x",
	"a: b", "a:b", "a :b", ":a", "a:", "#x", "x #y", "x#y", "?", "?x", "x?", "!x", "&a", "*a", "|", ">", "%x", "@x", "`x", "'q'", `"dq"`,
	"[x]", "{x}", "x,y", "a b", "a  b", " lead", "trail ", "line\nbreak", "trail\n", "\n", "tab\there", "é ü", "Ω", "\u0085", "\u2028",
	"\x01", "\x7f", "a\\b", `a"b`, "a'b", "250m", "2Gi", "10.0.0.0/8", "2001:db8::/32", "::1", "api.anthropic.com", "arn:aws:iam::1:role/x",
	"k8s:io.kubernetes.pod.namespace", "kubernetes.io/metadata.name", "k8s-app", "paperclip-tenant-sa", "pod-security.kubernetes.io/enforce",
	"requests.nvidia.com/gpu", "example.com/policy-tier", "ghcr.io/paperclipai/agent-runtime-claude:v1", "*.example.com", "x*", "a/b/c",
	"ABCDEF", "Abcdef", "abc-def", "abc_def", "abc.def", "abc/def", "abc1234", "A1b2C3d4", "_private", "-dash", ".dot", "/slash",
	strings.Repeat("x", 79), strings.Repeat("x", 81), strings.Repeat("y", 129), strings.Repeat("word ", 20), "short words that fit",
	strings.Repeat("a ", 39) + "b", strings.Repeat("a ", 40) + "b", strings.Repeat("ab ", 30), "a10", "a2", "a02", "a002", "b1", "B1", "1a",
	"10a", "2a", "a-1", "a-10", "a.9", "a.10", "x0y", "x00y", "x01y", "x1y", "x10y",
	"1/2", "10:30/x", "a:b", "a:", "a::b", "1:2", "1:20", "0/0", "a/:", "x:/", ":/", "1e3/", "2001-12-14/x", "true/", "y/", "abcdef:",
	"abcdef:g", "a1b2c3:4", "10.0.0.0/24", "1.2.3.4", "1_0/x", "0x1F/", "9", "12345678", "123456:7", "1-2", "1.2.3", "abc:def/ghi",
}

// TestYAMLWriterMatchesGoYAML compares the writer with go-yaml v2 on
// scalars of every style, in every position, at several depths.
func TestYAMLWriterMatchesGoYAML(t *testing.T) {
	for _, s := range trickyStrings {
		objs := []map[string]any{
			{"k": s},
			{s: "v"},
			{s: map[string]any{s: s}},
			{"l": []any{s, map[string]any{s: []any{s}}, []any{s, []any{s}}}},
			{"m": map[string]any{"n": map[string]any{"o": map[string]any{"p": s, "q": []any{map[string]any{"r": s, s: 1}}}}}},
			{strings.Repeat("k", 40): map[string]any{strings.Repeat("j", 30): s}},
		}
		for _, obj := range objs {
			compareYAML(t, obj)
		}
	}
}

// TestYAMLWriterRandom compares the writer with go-yaml v2 on random
// objects built from tricky keys and scalars.
func TestYAMLWriterRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		compareYAML(t, randomMap(r, 0))
	}
}

func randomMap(r *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range r.IntN(6) {
		m[randomString(r)] = randomValue(r, depth+1)
	}
	return m
}

func randomValue(r *rand.Rand, depth int) any {
	n := 10
	if depth > 4 {
		n = 7
	}
	switch r.IntN(n) {
	case 0, 1, 2:
		return randomString(r)
	case 3:
		return []any{int64(r.IntN(70000) - 100), int(r.Int64()), -r.Int64()}[r.IntN(3)]
	case 4:
		return []any{0.0, 1.5, -2.25, 1e21, 1e-7, 3.0, math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat64, 100.0}[r.IntN(11)]
	case 5:
		return r.IntN(2) == 0
	case 6:
		return nil
	case 7, 8:
		return randomMap(r, depth)
	default:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randomValue(r, depth+1)
		}
		return l
	}
}

func randomString(r *rand.Rand) string {
	switch r.IntN(4) {
	case 0:
		return trickyStrings[r.IntN(len(trickyStrings))]
	case 1:
		// Natural-order keys: letters, digits and separators.
		const alphabet = "ab09z1-._/:AZ éx0"
		b := make([]rune, 1+r.IntN(8))
		rs := []rune(alphabet)
		for i := range b {
			b[i] = rs[r.IntN(len(rs))]
		}
		return string(b)
	case 2:
		words := []string{"alpha", "beta", "10", "x", "-", "k8s", ": ", "#", "'", "\"", "a b"}
		var b strings.Builder
		for range 1 + r.IntN(12) {
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.String()
	default:
		return fmt.Sprintf("name-%d.example.com/%d", r.IntN(1000), r.IntN(20))
	}
}

func compareYAML(t *testing.T, obj map[string]any) {
	t.Helper()
	want, wantErr := yaml.Marshal(obj)
	got, err := marshalObject(obj)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("error %v, go-yaml's %v", err, wantErr)
	}
	if !newYAMLWriter(false).object(obj) {
		// The writer left the object to go-yaml, which is then its output.
		// (go-yaml's key order is not transitive for some keys, "2a" <
		// "09" < "0x" < "2a", and then its output follows the map's random
		// iteration order: two calls may differ.)
		return
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Fatalf("object %#v (-go-yaml +writer):\n%s", obj, diff)
	}
}

// FuzzYAMLWriter compares the writer with go-yaml v2 on fuzzed keys and
// values.
func FuzzYAMLWriter(f *testing.F) {
	for i, s := range trickyStrings {
		f.Add(s, trickyStrings[(i+7)%len(trickyStrings)], int64(i))
	}
	f.Fuzz(func(t *testing.T, k, v string, n int64) {
		compareYAML(t, map[string]any{
			k:   v,
			"x": map[string]any{k: []any{v, n, map[string]any{v: k, k: n}}},
			v:   []any{[]any{k}, map[string]any{}, []any{}},
		})
	})
}

// TestYAMLWriterKeyOrder compares the key order with go-yaml's on keys
// that mix letters, digits and other runes.
func TestYAMLWriterKeyOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		m := map[string]any{}
		for range 2 + r.IntN(8) {
			m[randomString(r)] = int64(1)
		}
		compareYAML(t, m)
	}
}

// TestYAMLMatchesReference is the equivalence test of fastpath_yaml.go on
// what render produces: the objects of every config of the corpus (see
// referenceCorpus), rendered on both paths of fastpath_batch.go, encoded
// by the writer and by go-yaml (Options.Reference), as one stream and
// per company, must be the same bytes.
func TestYAMLMatchesReference(t *testing.T) {
	for _, c := range referenceCorpus(t) {
		for _, reference := range []fastpath.Reference{false, true} {
			out, err := Render(c.m, Options{Reference: reference})
			if err != nil {
				continue // the refused patches: nothing to encode
			}
			streams := [][]*unstructured.Unstructured{out.Objects}
			for _, co := range out.Companies {
				streams = append(streams, co.Objects)
			}
			for i, objs := range streams {
				fast, err := encodeYAML(objs, false)
				if err != nil {
					t.Fatal(err)
				}
				ref, err := encodeYAML(objs, true)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(string(ref), string(fast)); diff != "" {
					t.Errorf("%s (objects rendered with Reference=%t), stream %d: the writer differs from go-yaml (-go-yaml +writer):\n%s",
						c.name, reference, i, diff)
				}
			}
		}
	}
}

// TestYAMLWriterFastPath checks that the rendered objects of every golden
// case (base objects and kustomize's output) take the writer's own path,
// not the fallback to go-yaml, and that the bytes agree.
func TestYAMLWriterFastPath(t *testing.T) {
	for _, dir := range golden.Dirs(t, "../../testdata/render") {
		m, err := config.Load(context.Background(), filepath.Join(dir, "config"), config.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, reference := range []fastpath.Reference{false, true} {
			out, err := Render(m, Options{Reference: reference})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range out.Objects {
				w := newYAMLWriter(false)
				if !w.object(o.Object) {
					t.Errorf("%s: %s %s: the writer falls back to go-yaml", filepath.Base(dir), o.GetKind(), o.GetName())
				}
				compareYAML(t, o.Object)
			}
		}
	}
}

// TestMarshalObjectMatchesSigsYAML proves that the direct encoder gives
// the bytes of sigs.k8s.io/yaml (what kubectl and kustomize print), also
// for strings that need quoting.
func TestMarshalObjectMatchesSigsYAML(t *testing.T) {
	strs := []string{"", "1", "20", "1.5", "1e3", "0x1F", "0o17", "true", "yes", "on", "no", "Off", "null", "~", "*", "a: b", "- x",
		"#x", "x #y", " lead", "trail ", "2001-12-14", "12:30", "é ü", "line\nbreak", "tab\there", "<b>&</b>", "'q'", `"dq"`,
		"250m", "2Gi", "10.0.0.0/8", "2001:db8::/32", "api.anthropic.com", "arn:aws:iam::1:role/x", "k8s:io.kubernetes.pod.namespace"}
	for _, s := range strs {
		obj := map[string]any{
			"metadata": map[string]any{"name": s, "labels": map[string]any{s: s, "b": "c", "a": "d"}},
			"list":     []any{s, int64(53), map[string]any{"k": s, "n": int64(-1)}, []any{}, map[string]any{}},
			"flag":     true,
			"float":    1.25,
		}
		want, err := sigsyaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("string %q (-sigs.k8s.io/yaml +direct):\n%s", s, diff)
		}
	}
}
