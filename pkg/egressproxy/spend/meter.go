package spend

import (
	"io"
	"mime"
	"sync"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// Meter reads a response's body through, unchanged and unbuffered, and
// reads the provider's usage from it as it passes: each SSE event's data,
// or the JSON body. Once the body ends or is closed, done gets the usage
// (once; a body closed early gets what was reported until then).
type Meter struct {
	body io.ReadCloser
	tap  *tap
	once sync.Once
	done func(Usage)
}

// NewMeter meters body, a response of provider p whose Content-Type is
// contentType (text/event-stream: server-sent events; else JSON).
func NewMeter(p adapters.Provider, contentType string, body io.ReadCloser, done func(Usage)) *Meter {
	return &Meter{body: body, tap: newTap(p, isSSE(contentType)), done: done}
}

// Read implements io.Reader.
func (m *Meter) Read(p []byte) (int, error) {
	n, err := m.body.Read(p)
	if n > 0 {
		m.tap.write(p[:n])
	}
	if err != nil {
		m.finish()
	}
	return n, err
}

// Close implements io.Closer.
func (m *Meter) Close() error {
	err := m.body.Close()
	m.finish()
	return err
}

func (m *Meter) finish() {
	m.once.Do(func() { m.done(m.tap.end()) })
}

// isSSE tells whether a Content-Type is server-sent events'.
func isSSE(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "text/event-stream"
}

// tap reads usage from a body given in chunks: SSE events, each event's
// data lines one JSON document, or one JSON body (or a JSON array).
type tap struct {
	provider adapters.Provider
	sse      bool
	scan     *scanner
	tally    tally

	// The SSE line being read: its field name so far, and where in the
	// line the reader is.
	state    lineState
	field    [8]byte
	fieldLen int
	// dataLines counts the data lines of the current event.
	dataLines int
	lastCR    bool
	// grew is set when an event or the body's end made a count grow.
	grew bool
}

type lineState int

const (
	lineStart lineState = iota
	lineField
	lineValueStart
	lineData
	lineSkip
)

func newTap(p adapters.Provider, sse bool) *tap {
	f := providerFields[p]
	if f == nil {
		f = newFieldSet(nil)
	}
	return &tap{provider: p, sse: sse, scan: newScanner(f)}
}

func (t *tap) write(p []byte) {
	if !t.sse {
		t.scan.write(p)
		if t.scan.ended {
			// The body's document is whole: its usage is known before
			// its last bytes go on.
			t.scan.ended = false
			t.grew = t.tally.add(t.scan) || t.grew
		}
		return
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if t.lastCR && c == '\n' {
			t.lastCR = false
			continue
		}
		t.lastCR = c == '\r'
		if c == '\r' || c == '\n' {
			t.endLine()
			continue
		}
		if t.state == lineSkip {
			// A line that is not data (event:, id:, a comment).
			i += indexEither(p[i:], '\n', '\r') - 1
			continue
		}
		if t.state == lineData {
			// Feed the rest of the line at once.
			j := i + indexEither(p[i:], '\n', '\r')
			t.scan.write(p[i:j])
			i = j - 1
			continue
		}
		t.lineByte(c)
	}
}

// lineByte reads a byte of an SSE line's field name, or of a value that
// is not data.
func (t *tap) lineByte(c byte) {
	switch t.state {
	case lineStart, lineField:
		t.state = lineField
		if c == ':' {
			t.state = lineSkip
			if string(t.field[:t.fieldLen]) == "data" {
				t.state = lineValueStart
			}
			return
		}
		if t.fieldLen < len(t.field) {
			t.field[t.fieldLen] = c
			t.fieldLen++
		} else {
			t.state = lineSkip
		}
	case lineValueStart:
		t.startData()
		if c != ' ' {
			t.scan.write([]byte{c})
		}
	}
}

// startData begins a data line: a second one of an event continues its
// document after a newline.
func (t *tap) startData() {
	t.state = lineData
	if t.dataLines > 0 {
		t.scan.write([]byte{'\n'})
	}
	t.dataLines++
}

func (t *tap) endLine() {
	switch {
	case t.state == lineStart:
		t.dispatch()
	case t.state == lineValueStart:
		// "data:" with nothing after it: an empty data line.
		t.startData()
	case t.state == lineField && string(t.field[:t.fieldLen]) == "data":
		t.startData()
	}
	t.state, t.fieldLen = lineStart, 0
}

// dispatch ends an event: its document's usage is tallied.
func (t *tap) dispatch() {
	if t.dataLines > 0 {
		t.grew = t.tally.add(t.scan) || t.grew
	}
	t.scan.reset()
	t.dataLines = 0
}

// reuse makes t a new tap of p's answers, keeping its buffers.
func (t *tap) reuse(p adapters.Provider) {
	f := providerFields[p]
	if f == nil {
		f = newFieldSet(nil)
	}
	scan := t.scan
	scan.reset()
	scan.fields = f
	*t = tap{provider: p, scan: scan}
}

// takeGrew tells whether a count grew since it was last asked.
func (t *tap) takeGrew() bool {
	g := t.grew
	t.grew = false
	return g
}

// end ends the body and returns its usage.
func (t *tap) end() Usage {
	if t.sse {
		if t.state != lineStart {
			t.endLine()
		}
		t.dispatch()
	} else {
		t.scan.endValue()
		t.tally.add(t.scan)
	}
	return t.tally.usage(t.provider)
}
