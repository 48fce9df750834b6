package inject

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// slowConn pauses after each write, as a loaded proxy's sending goroutine
// may: the provider's answer then comes before the transport is done with
// the request's body.
type slowConn struct{ net.Conn }

func (c slowConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	time.Sleep(50 * time.Millisecond)
	return n, err
}

// TestStreamsWhileTheBodyIsSent: a streamed answer that starts before the
// transport has finished with the request's body (its last read, past
// Content-Length) reaches the client whole, on a kept-alive connection,
// request after request.
func TestStreamsWhileTheBodyIsSent(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{"message_start", "content_block_delta", "message_stop"} {
			_, _ = io.WriteString(w, "event: "+ev+"\ndata: {}\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}))
	t.Cleanup(up.Close)
	tr := up.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs}
	dial := (&net.Dialer{}).DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return slowConn{c}, nil
	}
	srv, token := claudeRoute(t, up.URL, tr)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/credentials/claude/v1/messages",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("x-api-key", token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || !strings.HasSuffix(string(body), "event: message_stop\ndata: {}\n\n") {
			t.Fatalf("request %d: the stream was cut (%v) after %q", i, err, body)
		}
	}
}
