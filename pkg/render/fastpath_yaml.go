package render

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v2"

	"github.com/pcsync/pcsync/pkg/fastpath"
)

// Fast path: the YAML writer (see package fastpath).
//
// Stands in for: go-yaml v2's yaml.Marshal of each object, the emitter of
// sigs.k8s.io/yaml and so of kubectl, which is what the output must be
// byte for byte: the rendered manifests (Output.YAML, render --output-dir) and the
// resources handed to kustomize on the reference path.
//
// Measured win: rendering 1,000 companies without patches took 0.96 s of
// CPU, 1.38M allocations and 289 MB with go-yaml's encoder; with the writer
// (and sorting on precomputed keys, commit 59488aa) 0.19 s, 232k and 48 MB:
// 5x less CPU, 6x fewer bytes (docs/render.md, "Figures", GOMAXPROCS=1;
// commit 28e99b5 measured 4x on its own). BenchmarkRenderYAML in
// bench_test.go compares the two on rendered fleets; on 2026-11-25, 1,000
// companies at GOMAXPROCS=1: 0.67 s of CPU, 1.30M allocations and 314 MB
// with go-yaml, 0.12 s, 1.1k and 25 MB with the writer.
//
// Equivalence test: fastpath_yaml_test.go: TestYAMLWriterMatchesGoYAML,
// TestYAMLWriterRandom, TestYAMLWriterKeyOrder and FuzzYAMLWriter (tricky
// and random objects), TestYAMLMatchesReference (every golden case, the
// repository's configs and a configtest fleet, rendered fast and with
// Options.Reference) and TestMarshalObjectMatchesSigsYAML.
//
// Reference switch: Options.Reference makes every yamlWriter hand each
// object to yaml.Marshal (newYAMLWriter).

// yamlWriter encodes objects as YAML with sorted keys, giving exactly the
// bytes of go-yaml v2 (and so of sigs.k8s.io/yaml and kubectl), several
// times faster: it writes the block layout itself and leaves every
// decision about a scalar's style (plain, quoted, escaped) to go-yaml,
// asking it once per distinct scalar and remembering the answer.
//
// It covers what rendering produces: maps with string keys, []any,
// strings of printable ASCII, integers, floats, booleans and nil. For
// anything else (another Go type, a string with a line break, a tab or a
// non-ASCII character, a key longer than a YAML simple key may be, a
// line that go-yaml would fold at 80 columns) it reports false and the
// caller encodes the object with go-yaml.
//
// A yamlWriter is not safe for concurrent use; use one per goroutine.
type yamlWriter struct {
	// reference hands every object to go-yaml (Options.Reference).
	reference bool
	buf       []byte
	// values and keys remember how go-yaml writes a string as a mapping
	// value (or sequence item) and as a mapping key.
	values map[string]string
	keys   map[string]string
	// sorted is scratch space for sorting keys.
	sorted [][]string
}

// yamlBestWidth is go-yaml's preferred line width: a plain or quoted
// scalar that reaches past it is folded at a space.
const yamlBestWidth = 80

// yamlMaxSimpleKey is the longest key go-yaml writes as "key:"; longer
// ones get the "? key" form.
const yamlMaxSimpleKey = 128

// newYAMLWriter returns a writer; with reference set it is go-yaml's
// encoder and nothing else.
func newYAMLWriter(reference fastpath.Reference) *yamlWriter {
	return &yamlWriter{reference: bool(reference), values: map[string]string{}, keys: map[string]string{}}
}

// marshalObject encodes one object as YAML with sorted keys. It gives the
// bytes sigs.k8s.io/yaml gives (the same go-yaml v2 emitter, which sorts
// map keys), without its round trip through JSON.
func marshalObject(obj map[string]any) ([]byte, error) {
	return newYAMLWriter(false).appendObject(nil, obj)
}

// appendObject appends obj's YAML to dst.
func (w *yamlWriter) appendObject(dst []byte, obj map[string]any) ([]byte, error) {
	w.buf = dst
	if !w.reference && w.object(obj) {
		out := w.buf
		w.buf = nil
		return out, nil
	}
	w.buf = nil
	y, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return append(dst, y...), nil
}

// object writes a top-level mapping.
func (w *yamlWriter) object(obj map[string]any) bool {
	if len(obj) == 0 {
		w.buf = append(w.buf, "{}\n"...)
		return true
	}
	return w.mapping(obj, 0, false)
}

// mapping writes the entries of a non-empty map at indent. When inline,
// the first key continues the current line (after "- ").
func (w *yamlWriter) mapping(m map[string]any, indent int, inline bool) bool {
	keys, ok := w.sortedKeys(m)
	defer w.release(keys)
	if !ok {
		return false
	}
	for i, k := range keys {
		if i > 0 || !inline {
			w.indent(indent)
		}
		ks, ok := w.key(k)
		if !ok {
			return false
		}
		w.buf = append(w.buf, ks...)
		w.buf = append(w.buf, ':')
		col := indent + len(ks) + 1
		switch v := m[k].(type) {
		case map[string]any:
			if len(v) == 0 {
				w.buf = append(w.buf, " {}\n"...)
				continue
			}
			w.buf = append(w.buf, '\n')
			if !w.mapping(v, indent+2, false) {
				return false
			}
		case []any:
			if len(v) == 0 {
				w.buf = append(w.buf, " []\n"...)
				continue
			}
			w.buf = append(w.buf, '\n')
			// go-yaml does not indent a sequence that is a mapping value.
			if !w.sequence(v, indent, false) {
				return false
			}
		default:
			w.buf = append(w.buf, ' ')
			if !w.scalar(v, col+1) {
				return false
			}
			w.buf = append(w.buf, '\n')
		}
	}
	return true
}

// sequence writes the items of a non-empty list at indent, each "- item".
func (w *yamlWriter) sequence(s []any, indent int, inline bool) bool {
	for i, item := range s {
		if i > 0 || !inline {
			w.indent(indent)
		}
		w.buf = append(w.buf, "- "...)
		switch v := item.(type) {
		case map[string]any:
			if len(v) == 0 {
				w.buf = append(w.buf, "{}\n"...)
				continue
			}
			if !w.mapping(v, indent+2, true) {
				return false
			}
		case []any:
			if len(v) == 0 {
				w.buf = append(w.buf, "[]\n"...)
				continue
			}
			if !w.sequence(v, indent+2, true) {
				return false
			}
		default:
			if !w.scalar(v, indent+2) {
				return false
			}
			w.buf = append(w.buf, '\n')
		}
	}
	return true
}

func (w *yamlWriter) indent(n int) {
	for range n {
		w.buf = append(w.buf, ' ')
	}
}

// scalar writes a mapping value or sequence item that starts at column
// col.
func (w *yamlWriter) scalar(v any, col int) bool {
	switch x := v.(type) {
	case nil:
		w.buf = append(w.buf, "null"...)
	case string:
		s, ok := w.value(x)
		if !ok {
			return false
		}
		if col+len(s) > yamlBestWidth && strings.IndexByte(s, ' ') >= 0 {
			// go-yaml may fold the line at a space.
			return false
		}
		w.buf = append(w.buf, s...)
	case bool:
		w.buf = strconv.AppendBool(w.buf, x)
	case int:
		w.buf = strconv.AppendInt(w.buf, int64(x), 10)
	case int64:
		w.buf = strconv.AppendInt(w.buf, x, 10)
	case int32:
		w.buf = strconv.AppendInt(w.buf, int64(x), 10)
	case uint64:
		w.buf = strconv.AppendUint(w.buf, x, 10)
	case float64:
		s, ok := w.float(x)
		if !ok {
			return false
		}
		w.buf = append(w.buf, s...)
	default:
		return false
	}
	return true
}

// value is how go-yaml writes s as a mapping value or sequence item.
func (w *yamlWriter) value(s string) (string, bool) {
	if plainWord(s) {
		return s, true
	}
	if out, ok := w.values[s]; ok {
		return out, out != ""
	}
	out := ""
	if printableASCII(s) {
		// "a: <value>\n"
		if y, err := yaml.Marshal(map[string]string{"a": s}); err == nil {
			out = singleLine(string(y), "a: ")
		}
	}
	w.values[s] = out
	return out, out != ""
}

// key is how go-yaml writes s as a mapping key.
func (w *yamlWriter) key(s string) (string, bool) {
	if len(s) > yamlMaxSimpleKey {
		return "", false
	}
	if plainWord(s) {
		return s, true
	}
	if out, ok := w.keys[s]; ok {
		return out, out != ""
	}
	out := ""
	if printableASCII(s) {
		// "<key>: 0\n"
		if y, err := yaml.Marshal(map[string]int{s: 0}); err == nil {
			// A key that is not simple comes out as "? key\n: 0\n".
			if k, ok := strings.CutSuffix(string(y), ": 0\n"); ok && k != "" && !strings.Contains(k, "\n") && !strings.HasPrefix(k, "? ") {
				out = k
			}
		}
	}
	w.keys[s] = out
	return out, out != ""
}

// float is how go-yaml writes a float.
func (w *yamlWriter) float(f float64) (string, bool) {
	y, err := yaml.Marshal(map[string]float64{"a": f})
	if err != nil {
		return "", false
	}
	s := singleLine(string(y), "a: ")
	return s, s != ""
}

// singleLine returns the scalar of a one-line "prefix<scalar>\n", or ""
// when y is anything else.
func singleLine(y, prefix string) string {
	s, ok := strings.CutPrefix(y, prefix)
	if !ok {
		return ""
	}
	s, ok = strings.CutSuffix(s, "\n")
	if !ok || s == "" || strings.IndexByte(s, '\n') >= 0 {
		return ""
	}
	return s
}

// plainWord reports whether go-yaml writes s as is, unquoted, both as a
// key and as a value. s must start with a letter or digit and hold only
// letters, digits, "-._/" and colons that are not last (a colon before a
// space or at the end is an indicator); and it must not be something
// YAML 1.1 resolves to another type: a string with a slash never is, and
// one that starts with a letter is not when it is longer than every such
// word (true, null, off, ...). Numbers, dates and sexagesimals start with
// a digit and have no slash.
func plainWord(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	if !letter && !('0' <= c && c <= '9') {
		return false
	}
	slash := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_':
		case c == '/':
			slash = true
		case c == ':' && i < len(s)-1:
		default:
			return false
		}
	}
	return slash || letter && len(s) > 5
}

// printableASCII reports whether s holds only printable ASCII characters
// and spaces: strings go-yaml writes without line breaks or escapes that
// depend on where they stand.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return false
		}
	}
	return true
}

// sortedKeys returns m's keys in go-yaml's order (see yamlKeyLess), and
// false when that order is not well defined for these keys.
func (w *yamlWriter) sortedKeys(m map[string]any) ([]string, bool) {
	var keys []string
	if n := len(w.sorted); n > 0 {
		keys = w.sorted[n-1][:0]
		w.sorted = w.sorted[:n-1]
	}
	digits := false
	for k := range m {
		keys = append(keys, k)
		digits = digits || strings.ContainsAny(k, "0123456789") || !isASCIIString(k)
	}
	// Insertion sort: maps here are small.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && yamlKeyLess(keys[j], keys[j-1]); j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	if digits {
		// Comparing runs of digits as numbers is not transitive for some
		// keys ("2a" < "09" < "0x" < "2a"); go-yaml's order then depends
		// on the map's iteration order. Leave such maps to go-yaml.
		for i := range keys {
			for j := i + 1; j < len(keys); j++ {
				if !yamlKeyLess(keys[i], keys[j]) {
					return keys, false
				}
			}
		}
	}
	return keys, true
}

func (w *yamlWriter) release(keys []string) { w.sorted = append(w.sorted, keys) }

// yamlKeyLess orders string keys the way go-yaml v2 does: rune by rune;
// at the first difference letters compare as runes and sort after other
// runes, and runs of digits compare as numbers (then the shorter run, then
// the rune), so that "a2" < "a10". A key that is a prefix of another sorts
// first.
func yamlKeyLess(a, b string) bool {
	if isASCIIString(a) && isASCIIString(b) {
		return keyLess(a, b, func(s string, i int) rune { return rune(s[i]) }, len(a), len(b))
	}
	ar, br := []rune(a), []rune(b)
	return keyLess(ar, br, func(s []rune, i int) rune { return s[i] }, len(ar), len(br))
}

func keyLess[S any](a, b S, at func(S, int) rune, na, nb int) bool {
	for i := 0; i < na && i < nb; i++ {
		ca, cb := at(a, i), at(b, i)
		if ca == cb {
			continue
		}
		la, lb := unicode.IsLetter(ca), unicode.IsLetter(cb)
		if la && lb {
			return ca < cb
		}
		if la || lb {
			return lb
		}
		// Neither is a letter: compare the digit runs that start here as
		// numbers. A zero that continues a number with a non-zero digit
		// before it counts as a non-zero start.
		var va, vb int64
		if ca == '0' || cb == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(at(a, j)); j-- {
				if at(a, j) != '0' {
					va, vb = 1, 1
					break
				}
			}
		}
		ea := i
		for ; ea < na && unicode.IsDigit(at(a, ea)); ea++ {
			va = va*10 + int64(at(a, ea)-'0')
		}
		eb := i
		for ; eb < nb && unicode.IsDigit(at(b, eb)); eb++ {
			vb = vb*10 + int64(at(b, eb)-'0')
		}
		if va != vb {
			return va < vb
		}
		if ea != eb {
			return ea < eb
		}
		return ca < cb
	}
	return na < nb
}

func isASCIIString(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
