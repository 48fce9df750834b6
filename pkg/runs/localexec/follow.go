package localexec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/pcsync/pcsync/internal/lib/redact"
	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/runs"
)

const (
	// maxLine is the longest stdout line handed to the parser; longer
	// lines (a huge tool output) are skipped.
	maxLine = 32 << 20
	// stderrTailSize is how much of the end of stderr a result's error
	// classification sees.
	stderrTailSize = 16 << 10
)

// follower reads a run's stdout and stderr files as they grow: it feeds
// stdout lines to the parser, keeps the tail of stderr, and appends both to
// <name>.log. The parser always reads stdout from the start (so an adopting
// daemon parses the whole stream); the log continues where the previous
// daemon left it, as recorded in logpos.
//
// logpos holds how much of stdout and stderr is in the log and the log's
// size when that was recorded (three little-endian uint64). Appending to the
// log and recording the position are two writes: a daemon killed between
// them leaves more in the log than logpos says, and the next daemon cuts
// the log back to the recorded size before it copies from the recorded
// positions, so no line is in the log twice. (A logpos of 16 bytes, from an
// older daemon, has no size: the log is taken as it is.)
type follower struct {
	stdout, stderr *os.File
	logFile        *os.File
	// logOut redacts each stream's lines on their way to the log.
	logOut [2]*redact.LineWriter
	pos    *os.File
	files  localFiles
	// logged is how much of stdout [0] and stderr [1] is in the log.
	logged [2]int64
	// read is how much of each stream was read.
	read     [2]int64
	line     []byte
	skipping bool
	tail     []byte
	parser   adapters.Parser
	buf      []byte
	log      *slog.Logger
}

func newFollower(r *runs.Run, files localFiles, parser adapters.Parser, red *redact.Redactor, log *slog.Logger) (*follower, error) {
	f := &follower{files: files, parser: parser, buf: make([]byte, 32<<10), log: log}
	var err error
	if f.logFile, err = safefile.OpenWrite(r.Paths.Log(), safefile.Append, 0o600); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	for i := range f.logOut {
		f.logOut[i] = redact.NewLineWriter(f.logFile, red, 0)
	}
	if f.pos, err = safefile.OpenWrite(files.logpos(), safefile.ReadWrite, 0o600); err != nil {
		f.close()
		return nil, fmt.Errorf("open log position: %w", err)
	}
	var p [posSize]byte
	n, _ := f.pos.ReadAt(p[:], 0)
	if n >= 16 {
		f.logged[0] = int64(binary.LittleEndian.Uint64(p[:8]))
		f.logged[1] = int64(binary.LittleEndian.Uint64(p[8:16]))
	}
	if n == posSize {
		if err := f.cutLog(int64(binary.LittleEndian.Uint64(p[16:]))); err != nil {
			f.close()
			return nil, err
		}
	}
	if n == 0 {
		// A new run: the log may hold an earlier run's lines already (its
		// result was removed); what is there now is not this run's.
		if err := f.savePos(); err != nil {
			f.close()
			return nil, err
		}
	}
	return f, nil
}

// posSize is the size of logpos: stdout's and stderr's positions and the
// log's size.
const posSize = 24

// cutLog truncates the log to size, the size it had when logpos was last
// written: what lies beyond was appended by a daemon killed before it could
// record its position, and is copied again from the recorded positions.
func (f *follower) cutLog(size int64) error {
	fi, err := f.logFile.Stat()
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	if fi.Size() <= size {
		return nil
	}
	if err := f.logFile.Truncate(size); err != nil {
		return fmt.Errorf("log: cut back to the recorded position: %w", err)
	}
	f.log.Info("the run's log held lines past its recorded position (an earlier daemon was killed while copying); they are copied again",
		slog.Int64("bytes", fi.Size()-size))
	return nil
}

func (f *follower) close() {
	for _, c := range []*os.File{f.stdout, f.stderr, f.logFile, f.pos} {
		if c != nil {
			c.Close()
		}
	}
}

// open opens a stream file once it exists.
func (f *follower) open(i int) (*os.File, error) {
	p := &f.stdout
	name := f.files.stdout()
	if i == 1 {
		p, name = &f.stderr, f.files.stderr()
	}
	if *p == nil {
		fh, _, err := safefile.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		*p = fh
	}
	return *p, nil
}

// drain reads everything new in both streams.
func (f *follower) drain() error {
	moved := false
	for i := range 2 {
		fh, err := f.open(i)
		if err != nil {
			return err
		}
		if fh == nil {
			continue
		}
		for {
			n, err := fh.Read(f.buf)
			if n > 0 {
				f.take(i, f.buf[:n])
				moved = true
			}
			if errors.Is(err, io.EOF) || n == 0 {
				break
			}
			if err != nil {
				return fmt.Errorf("read output: %w", err)
			}
		}
	}
	if moved {
		return f.savePos()
	}
	return nil
}

// savePos records how much of each stream is in the log, and the log's
// size with it.
func (f *follower) savePos() error {
	fi, err := f.logFile.Stat()
	if err != nil {
		return fmt.Errorf("record log position: %w", err)
	}
	var p [posSize]byte
	binary.LittleEndian.PutUint64(p[:8], uint64(f.logged[0]))
	binary.LittleEndian.PutUint64(p[8:16], uint64(f.logged[1]))
	binary.LittleEndian.PutUint64(p[16:], uint64(fi.Size()))
	if _, err := f.pos.WriteAt(p[:], 0); err != nil {
		return fmt.Errorf("record log position: %w", err)
	}
	return nil
}

// take handles a chunk of stream i that starts at offset f.read[i].
func (f *follower) take(i int, chunk []byte) {
	start := f.read[i]
	f.read[i] += int64(len(chunk))
	if i == 0 {
		f.feed(chunk)
	} else {
		f.tail = append(f.tail, chunk...)
		if len(f.tail) > stderrTailSize {
			f.tail = append(f.tail[:0], f.tail[len(f.tail)-stderrTailSize:]...)
		}
	}
	// Append what the log does not have yet, redacted line by line; the
	// position counts only what was written (a partial line held back is
	// read again by the next daemon).
	if end := f.read[i]; end > f.logged[i]+int64(f.logOut[i].Pending()) {
		from := max(f.logged[i]+int64(f.logOut[i].Pending())-start, 0)
		if _, err := f.logOut[i].Write(chunk[from:]); err != nil {
			f.log.Warn("cannot append to the run's log", slog.Any("error", err))
			return
		}
		f.logged[i] = max(f.logged[i], end-int64(f.logOut[i].Pending()))
	}
}

// feed splits stdout into lines for the parser.
func (f *follower) feed(chunk []byte) {
	for len(chunk) > 0 {
		nl := bytes.IndexByte(chunk, '\n')
		if nl < 0 {
			if !f.skipping {
				f.line = append(f.line, chunk...)
				if len(f.line) > maxLine {
					f.log.Warn("stdout line longer than the parser limit; skipped", slog.Int("limit", maxLine))
					f.line, f.skipping = f.line[:0], true
				}
			}
			return
		}
		if !f.skipping {
			f.line = append(f.line, chunk[:nl]...)
			f.parser.Feed(bytes.TrimSuffix(f.line, []byte("\r")))
		}
		f.line, f.skipping = f.line[:0], false
		chunk = chunk[nl+1:]
	}
}

// finish hands a last unterminated line to the parser, writes the last
// partial lines of the log and returns the stderr tail.
func (f *follower) finish() string {
	for i, lw := range f.logOut {
		if lw.Pending() > 0 {
			n := int64(lw.Pending())
			if err := lw.Flush(); err != nil {
				f.log.Warn("cannot append to the run's log", slog.Any("error", err))
			} else {
				f.logged[i] += n
			}
		}
	}
	if err := f.savePos(); err != nil {
		f.log.Warn("cannot record the log position", slog.Any("error", err))
	}
	if len(f.line) > 0 && !f.skipping {
		f.parser.Feed(f.line)
		f.line = f.line[:0]
	}
	return string(f.tail)
}
