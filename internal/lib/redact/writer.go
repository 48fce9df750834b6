package redact

import (
	"bytes"
	"io"
)

// DefaultLineBound is the longest partial line a LineWriter holds back
// before it writes part of it.
const DefaultLineBound = 64 << 10

// LineWriter redacts a stream line by line: it holds a partial line back
// until its end arrives, so that a secret split across two writes is still
// found, and writes each complete line redacted. A line longer than the
// bound is written in parts, each cut where no secret can straddle it (the
// cut leaves the last longest-value bytes, and any value or pattern match
// that crosses it, for the next part).
type LineWriter struct {
	w     io.Writer
	r     *Redactor
	bound int
	buf   []byte
}

// NewLineWriter returns a LineWriter that writes to w through r, holding
// back at most about bound bytes of a line (DefaultLineBound when bound is
// not positive).
func NewLineWriter(w io.Writer, r *Redactor, bound int) *LineWriter {
	if bound <= 0 {
		bound = DefaultLineBound
	}
	return &LineWriter{w: w, r: r, bound: bound}
}

// Write takes p; it writes the complete lines it now has. It always takes
// all of p: n is len(p) unless the underlying writer fails.
func (lw *LineWriter) Write(p []byte) (int, error) {
	lw.buf = append(lw.buf, p...)
	if i := bytes.LastIndexByte(lw.buf, '\n'); i >= 0 {
		if err := lw.emit(i + 1); err != nil {
			return 0, err
		}
	}
	if len(lw.buf) > lw.bound {
		if err := lw.emit(lw.cut()); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// cut is where an over-long partial line can be split safely.
func (lw *LineWriter) cut() int {
	c := len(lw.buf) - max(lw.r.longest()-1, 0)
	for moved := true; moved; {
		moved = false
		for _, s := range lw.r.spans(lw.buf) {
			if s[0] < c && c < s[1] {
				c, moved = s[0], true
			}
		}
	}
	if c <= 0 {
		// One match spans the whole buffer (a key of megabytes without a
		// space): write it anyway, the bound wins.
		c = max(len(lw.buf)-max(lw.r.longest()-1, 0), 1)
	}
	return c
}

// emit writes the first n bytes of the buffer, redacted, and keeps the rest.
func (lw *LineWriter) emit(n int) error {
	if n == 0 {
		return nil
	}
	out := lw.r.String(string(lw.buf[:n]))
	lw.buf = append(lw.buf[:0], lw.buf[n:]...)
	_, err := io.WriteString(lw.w, out)
	return err
}

// Pending is how many bytes are held back (a partial line).
func (lw *LineWriter) Pending() int { return len(lw.buf) }

// Flush writes what is held back, redacted, as it is (the stream ended in
// the middle of a line).
func (lw *LineWriter) Flush() error { return lw.emit(len(lw.buf)) }
