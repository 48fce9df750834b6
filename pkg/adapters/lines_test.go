package adapters

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// recorder is a Parser that keeps the lines it is fed.
type recorder struct{ lines []string }

func (r *recorder) Feed(line []byte)                { r.lines = append(r.lines, string(line)) }
func (r *recorder) Finish(p ProcessOutcome) Outcome { return Outcome{} }

func TestFeedLines(t *testing.T) {
	long := strings.Repeat("a", 700<<10) // longer than any buffer
	in := "one\r\ntwo\n\n" + long + "\nlast"
	for _, r := range map[string]io.Reader{
		"whole":     strings.NewReader(in),
		"one byte":  iotest.OneByteReader(strings.NewReader(in)),
		"half read": iotest.HalfReader(strings.NewReader(in)),
	} {
		var rec recorder
		if err := FeedLines(&rec, r); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"one", "two", "", long, "last"}, rec.lines); diff != "" {
			t.Errorf("lines (-want +got):\n%.500s", diff)
		}
	}
	boom := errors.New("boom")
	var rec recorder
	err := FeedLines(&rec, io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "read agent output") {
		t.Errorf("error = %v, want boom wrapped", err)
	}
}

func TestLineWriter(t *testing.T) {
	var rec recorder
	w := NewLineWriter(&rec)
	for _, chunk := range []string{"par", "tial\nsecond\r\n", "", "\nthi", "rd"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"partial", "second", "", "third"}, rec.lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// A real transcript with a 300 KB line parses the same through FeedLines
// and through a LineWriter fed in odd-sized chunks.
func TestLongLinesReachTheParser(t *testing.T) {
	big := strings.Repeat("y", 300<<10)
	stream := `{"type":"system","subtype":"init","session_id":"s-1","model":"m"}` + "\n" +
		`{"type":"user","message":{"content":[{"type":"tool_result","content":"` + big + `"}]}}` + "\n" +
		`{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-1","usage":{"input_tokens":1,"output_tokens":2}}` + "\n"
	p1 := claude{}.NewParser(ParserOptions{})
	if err := FeedLines(p1, strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	p2 := claude{}.NewParser(ParserOptions{})
	w := NewLineWriter(p2)
	data := []byte(stream)
	for len(data) > 0 {
		n := min(len(data), 4093)
		_, _ = w.Write(data[:n])
		data = data[n:]
	}
	_ = w.Close()
	o1, o2 := p1.Finish(exit(0)), p2.Finish(exit(0))
	if diff := cmp.Diff(o1, o2); diff != "" {
		t.Errorf("FeedLines and LineWriter differ (-feed +writer):\n%s", diff)
	}
	if val(o1.Summary) != "done" || o1.Usage == nil || o1.Usage.OutputTokens != 2 {
		t.Errorf("outcome = %+v, want summary done and 2 output tokens", o1)
	}
}

func TestOverlongLineIsDropped(t *testing.T) {
	var rec recorder
	in := io.MultiReader(strings.NewReader("before\n"), bytes.NewReader(bytes.Repeat([]byte("z"), MaxLineBytes+10)),
		strings.NewReader("\nafter\n"))
	if err := FeedLines(&rec, in); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"before", "after"}, rec.lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	var rec2 recorder
	w := NewLineWriter(&rec2)
	_, _ = w.Write([]byte("before\n"))
	chunk := bytes.Repeat([]byte("z"), 1<<20)
	for i := 0; i <= MaxLineBytes>>20; i++ {
		_, _ = w.Write(chunk)
	}
	_, _ = w.Write([]byte("\nafter\n"))
	_ = w.Close()
	if diff := cmp.Diff([]string{"before", "after"}, rec2.lines); diff != "" {
		t.Errorf("LineWriter lines (-want +got):\n%s", diff)
	}
}
