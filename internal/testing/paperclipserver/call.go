package paperclipserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Call sends one request to the server's API as the board (local_trusted
// mode: no credentials), as an operator's hand in the UI would; in, when not
// nil, is sent as JSON and out, when not nil, receives the JSON answer. A
// status outside 2xx is an error quoting the body. ctx bounds the request.
func (s *Server) Call(ctx context.Context, method, path string, in, out any) error {
	return Do(ctx, http.DefaultClient, method, s.URL+path, nil, in, out)
}

// Do sends one request to a Paperclip API at url through hc, with header
// (credentials, Origin) when not nil, as Call does.
func Do(ctx context.Context, hc *http.Client, method, url string, header http.Header, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, url, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode %q: %w", method, url, tail(string(data), 300), err)
		}
	}
	return nil
}
