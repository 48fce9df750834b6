package adapters

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes is the longest stdout line handed to a Parser. Real
// transcripts carry lines of hundreds of KB (whole files read by a tool); a
// longer line is dropped whole rather than parsed in part.
const MaxLineBytes = 64 << 20

// FeedLines reads r to its end and feeds every line to p, without its "\n"
// or "\r\n". Lines longer than MaxLineBytes are skipped. It does not call
// Finish. The error, if any, is r's, wrapped.
func FeedLines(p Parser, r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	skipping := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !skipping {
			if len(buf)+len(chunk) > MaxLineBytes+2 {
				buf, skipping = buf[:0], true
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the line goes on
		}
		if !skipping && len(buf) > 0 {
			p.Feed(trimEOL(buf))
		}
		buf, skipping = buf[:0], false
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("adapters: read agent output: %w", err)
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// LineWriter is an io.Writer that splits what is written into lines and
// feeds them to a Parser, so stdout can be teed to a log and a parser at
// once. Close feeds a last unterminated line. It is not safe for concurrent
// use.
type LineWriter struct {
	p        Parser
	buf      []byte
	skipping bool
}

// NewLineWriter returns a LineWriter feeding p.
func NewLineWriter(p Parser) *LineWriter { return &LineWriter{p: p} }

// Write feeds every complete line in b; it never fails.
func (w *LineWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if !w.skipping {
			if len(w.buf)+len(part) > MaxLineBytes {
				w.buf, w.skipping = w.buf[:0], true
			} else {
				w.buf = append(w.buf, part...)
			}
		}
		if i < 0 {
			break
		}
		if !w.skipping {
			w.p.Feed(bytes.TrimSuffix(w.buf, []byte("\r")))
		}
		w.buf, w.skipping = w.buf[:0], false
		b = b[i+1:]
	}
	return n, nil
}

// Close feeds the last line if it had no terminator.
func (w *LineWriter) Close() error {
	if len(w.buf) > 0 && !w.skipping {
		w.p.Feed(bytes.TrimSuffix(w.buf, []byte("\r")))
	}
	w.buf, w.skipping = nil, false
	return nil
}
