//go:build integration

package paperclip_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/paperclipserver"
)

// server is the real Paperclip server the package's tests share, with the
// pcsync adapter installed.
var server *paperclipserver.Server

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute) // a bound for a hung server
	s, err := paperclipserver.Start(ctx, paperclipserver.Options{})
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "paperclip tests: start the real Paperclip server:", err)
		os.Exit(1)
	}
	server = s
	code := func() int {
		defer cancel()
		defer s.Stop()
		dir, err := os.MkdirTemp("", "pcsync-adapter-")
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		if err == nil {
			_, err = paperclipserver.BuildAdapter(ctx, dir)
		}
		if err == nil {
			defer os.RemoveAll(dir)
			err = call(ctx, http.MethodPost, "/api/adapters/install", map[string]any{"packageName": dir, "isLocalPath": true}, nil)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "paperclip tests: install the pcsync adapter:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// call sends one request to the server directly (as an operator's hand in
// the UI would), decoding the answer into out.
func call(ctx context.Context, method, path string, in, out any) error {
	return server.Call(ctx, method, path, in, out)
}

func mustCall(t *testing.T, method, path string, in, out any) {
	t.Helper()
	if err := call(context.Background(), method, path, in, out); err != nil {
		t.Fatal(err)
	}
}

// counter is a reverse proxy in front of the server that counts the
// requests pcsync sends, by method.
type counter struct {
	URL            string
	reads, writes  atomic.Int64
	authorizations atomic.Int64
}

func newCounter(t *testing.T) *counter {
	t.Helper()
	target, _ := url.Parse(server.URL)
	c := &counter{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			c.reads.Add(1)
		} else {
			c.writes.Add(1)
		}
		if r.Header.Get("Authorization") != "" {
			c.authorizations.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *counter) reset() (reads, writes int64) { return c.reads.Swap(0), c.writes.Swap(0) }
