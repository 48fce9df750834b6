package cmdclient_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
	"github.com/pcsync/pcsync/pkg/sandbox/wire"
)

// TestServerOfAnotherVersionRefused puts a fake server behind the stream
// that answers Hello as a server of another protocol version would: New
// refuses it with an error that says why, and the stream is closed.
func TestServerOfAnotherVersionRefused(t *testing.T) {
	tests := []struct {
		name   string
		answer wire.Frame
		want   string
	}{
		{"HelloOK of a newer version",
			wire.JSON(wire.HelloOK, 0, wire.HelloOKPayload{Version: wire.Version + 1, PID: 7}),
			"cmdclient: hello: the server speaks protocol version 2, this client 1: refused"},
		{"HelloOK without a version",
			wire.JSON(wire.HelloOK, 0, wire.HelloOKPayload{PID: 7}),
			"cmdclient: hello: the server speaks protocol version 0, this client 1: refused"},
		{"server refuses",
			wire.JSON(wire.Error, 0, wire.ErrorPayload{Message: "Hello: the client speaks protocol version 1, this server 2: refused"}),
			"cmdclient: hello: server refused Hello: Hello: the client speaks protocol version 1, this server 2: refused"},
	}
	if wire.Version != 1 {
		t.Fatalf("the want messages assume protocol version 1, not %d", wire.Version)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer server.Close()
			gotHello := make(chan wire.HelloPayload, 1)
			closed := make(chan error, 1)
			go func() {
				r := wire.NewReader(server)
				f, err := r.Read()
				var p wire.HelloPayload
				if err == nil {
					f.Decode(&p)
				}
				gotHello <- p
				wire.Write(server, tt.answer)
				_, err = r.Read() // the client closes the stream
				closed <- err
			}()
			open := func(context.Context) (io.ReadWriteCloser, error) { return client, nil }
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := cmdclient.New(ctx, open, cmdclient.Options{Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				c.Close()
				t.Fatal("New: nil error, want the server refused")
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("New's error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wire.HelloPayload{Version: wire.Version}, <-gotHello); diff != "" {
				t.Errorf("the client's Hello (-want +got):\n%s", diff)
			}
			select {
			case err := <-closed:
				if err == nil {
					t.Error("the client sent another frame after the refusal, want the stream closed")
				}
			case <-time.After(5 * time.Second):
				t.Error("the client did not close the refused stream")
			}
		})
	}
}
