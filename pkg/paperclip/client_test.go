package paperclip

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestErrUnreachable: a request that gets no answer (nothing listens)
// matches ErrUnreachable; an answer with an error status does not.
func TestErrUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"down for maintenance"}`, http.StatusServiceUnavailable)
	}))
	defer failing.Close()

	tests := []struct {
		name, url string
		want      bool
	}{
		{"nothing listens", closed, true},
		{"an error status", failing.URL, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(ClientOptions{URL: tt.url, Token: "board-key"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.ListAgents(context.Background(), "company-1")
			if err == nil {
				t.Fatal("ListAgents succeeded")
			}
			if got := errors.Is(err, ErrUnreachable); got != tt.want {
				t.Errorf("errors.Is(%v, ErrUnreachable) = %v, want %v", err, got, tt.want)
			}
		})
	}
}
