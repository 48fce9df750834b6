package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	frames := []Frame{
		{Type: Hello, Payload: []byte(`{"version":1}`)},
		{Type: Stdout, ID: 7, Payload: []byte("hello\n")},
		{Type: StdinClose, ID: 0xfffffffe},
		{Type: Stderr, ID: 3, Payload: bytes.Repeat([]byte{0xff}, MaxPayload)},
		JSON(Exit, 9, ExitPayload{ExitCode: 137, Signal: "SIGKILL", TimedOut: true}),
	}
	var buf bytes.Buffer
	for _, f := range frames {
		if err := Write(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&buf)
	var got []Frame
	for {
		f, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	if diff := cmp.Diff(frames, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
	var exit ExitPayload
	if err := got[4].Decode(&exit); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ExitPayload{ExitCode: 137, Signal: "SIGKILL", TimedOut: true}, exit); diff != "" {
		t.Errorf("exit (-want +got):\n%s", diff)
	}
}

func TestReadErrors(t *testing.T) {
	header := func(typ Type, id, n uint32) []byte {
		b := make([]byte, HeaderSize)
		b[0] = byte(typ)
		binary.BigEndian.PutUint32(b[1:5], id)
		binary.BigEndian.PutUint32(b[5:9], n)
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, io.EOF},
		{"short header", []byte{1, 0, 0}, io.ErrUnexpectedEOF},
		{"short payload", append(header(Stdout, 1, 10), "abc"...), io.ErrUnexpectedEOF},
		{"too large", header(Stdout, 1, MaxPayload+1), ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tt.in)).Read()
			if !errors.Is(err, tt.want) {
				t.Errorf("Read() error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestWriteTooLarge(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, Frame{Type: Stdout, ID: 1, Payload: make([]byte, MaxPayload+1)})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Write() error = %v, want ErrTooLarge", err)
	}
	if buf.Len() != 0 {
		t.Errorf("Write wrote %d bytes of an oversized frame", buf.Len())
	}
}

func TestTypeString(t *testing.T) {
	tests := []struct {
		typ  Type
		want string
	}{
		{Hello, "Hello"}, {Shutdown, "Shutdown"}, {HelloOK, "HelloOK"}, {Bye, "Bye"}, {Type(200), "Type(200)"},
	}
	for _, tt := range tests {
		if got := tt.typ.String(); got != tt.want {
			t.Errorf("Type(%d).String() = %q, want %q", uint8(tt.typ), got, tt.want)
		}
	}
}
