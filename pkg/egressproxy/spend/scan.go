package spend

import "bytes"

// scanner reads one JSON document (or several in a row) a chunk at a time
// and keeps the scalar values found at the paths it wants, without
// keeping the document: only the object path it is in, and the bytes of a
// key or of a wanted value. It is lenient: it does not check the grammar,
// and a document it cannot follow yields what it found before.
type scanner struct {
	fields *fieldSet
	// found are the values of the wanted paths, by slot; seen marks them.
	found [numSlots]string
	seen  [numSlots]bool

	stack []frame
	// tok is the key or wanted value being read; capture tells whether
	// the current string or scalar is kept, and its slot.
	tok     []byte
	inStr   bool
	escape  bool
	inLit   bool
	capture bool
	isKey   bool
	slot    slot
	// ended is set when a top-level object or array closes.
	ended bool
}

// frame is an object or array the scanner is in. An object's path is its
// keys from the document's root, dot-separated, arrays not counted; a
// path no wanted field lies under is skipPath.
type frame struct {
	object    bool
	path      string
	key       string
	expectKey bool
}

// skipPath is the path of a frame under which nothing is wanted.
const skipPath = "\x00"

// maxTok bounds a kept key or value; a longer one is not a wanted one.
const maxTok = 256

func newScanner(f *fieldSet) *scanner {
	return &scanner{fields: f, stack: make([]frame, 0, 16), tok: make([]byte, 0, 64)}
}

// reset forgets the document read so far, and what was found.
func (s *scanner) reset() {
	s.stack = s.stack[:0]
	s.tok = s.tok[:0]
	s.inStr, s.escape, s.inLit, s.capture, s.isKey, s.ended = false, false, false, false, false, false
	s.found = [numSlots]string{}
	s.seen = [numSlots]bool{}
}

// write reads the next bytes of the document.
func (s *scanner) write(p []byte) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if s.inStr {
			i = s.string(p, i)
			continue
		}
		if s.inLit {
			if isLitByte(c) {
				s.keep(c)
				continue
			}
			s.endValue()
		}
		s.structural(c)
	}
}

// string reads string bytes from p[i:] and returns the index of the last
// one read; the string's closing quote ends it.
func (s *scanner) string(p []byte, i int) int {
	for ; i < len(p); i++ {
		c := p[i]
		switch {
		case s.escape:
			s.escape = false
			s.keep(c)
		case c == '\\':
			s.escape = true
			s.keep(c)
		case c == '"':
			s.inStr = false
			s.endString()
			return i
		default:
			if !s.capture {
				// Skip to the next quote or backslash: most bytes of a
				// response are text no one wants.
				i += indexEither(p[i:], '"', '\\') - 1
				continue
			}
			s.keep(c)
		}
	}
	return i
}

func (s *scanner) keep(c byte) {
	if s.capture && len(s.tok) < maxTok {
		s.tok = append(s.tok, c)
	}
}

// structural reads a byte outside a string or scalar.
func (s *scanner) structural(c byte) {
	switch c {
	case ' ', '\t', '\n', '\r':
	case '{', '[':
		s.push(c == '{')
	case '}', ']':
		if len(s.stack) > 0 {
			s.stack = s.stack[:len(s.stack)-1]
			s.ended = len(s.stack) == 0
		}
	case ',':
		if t := s.top(); t != nil && t.object {
			t.expectKey = true
		}
	case ':':
		if t := s.top(); t != nil && t.object {
			t.expectKey = false
		}
	case '"':
		s.inStr = true
		t := s.top()
		s.isKey = t != nil && t.object && t.expectKey
		s.startValue()
	default:
		s.inLit = true
		s.isKey = false
		s.startValue()
		s.keep(c)
	}
}

// startValue starts a key, string or scalar: a key is always kept, a
// value when its path is wanted.
func (s *scanner) startValue() {
	s.tok = s.tok[:0]
	if s.isKey {
		s.capture = true
		return
	}
	s.slot, s.capture = s.wanted()
}

// wanted is the slot of the value about to be read, if it is wanted.
func (s *scanner) wanted() (slot, bool) {
	t := s.top()
	if t == nil || !t.object || t.path == skipPath || t.key == otherKey {
		return 0, false
	}
	sl, ok := s.fields.slots[pathKey{t.path, t.key}]
	return sl, ok
}

func (s *scanner) endString() {
	if s.isKey {
		if t := s.top(); t != nil {
			t.key = s.fields.name(s.tok)
		}
		s.capture = false
		return
	}
	s.endValue()
}

// endValue records a wanted value (JSON null is none).
func (s *scanner) endValue() {
	s.inLit = false
	if s.capture && string(s.tok) != "null" {
		s.found[s.slot] = string(s.tok)
		s.seen[s.slot] = true
	}
	s.capture = false
}

// push enters an object or array; an object's path is its parent's path
// and key when some wanted field lies under it.
func (s *scanner) push(object bool) {
	path := ""
	if t := s.top(); t != nil {
		path = t.path
		switch {
		case t.object && t.key == otherKey:
			path = skipPath
		case t.object && path != skipPath:
			path = s.fields.child(path, t.key)
		}
	}
	s.stack = append(s.stack, frame{object: object, path: path, expectKey: object})
}

func (s *scanner) top() *frame {
	if len(s.stack) == 0 {
		return nil
	}
	return &s.stack[len(s.stack)-1]
}

// indexEither is the index in p of the first a or b, or len(p): two
// vectorised scans rather than a loop over each byte.
func indexEither(p []byte, a, b byte) int {
	n := bytes.IndexByte(p, a)
	if n < 0 {
		n = len(p)
	}
	if m := bytes.IndexByte(p[:n], b); m >= 0 {
		return m
	}
	return n
}

func isLitByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '+' || c == '.'
}
