package inject

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/pcsync/pcsync/pkg/adapters"
)

type ctxKey struct{}

type forwarded struct {
	cred *Credential
	run  string
}

func withCredential(ctx context.Context, c *Credential, run string) context.Context {
	return context.WithValue(ctx, ctxKey{}, forwarded{cred: c, run: run})
}

// refusedByProvider replaces a provider's 401 or 403 with a 403 whose
// error, in the provider's format, names the credential: the CLI prints
// it, and the run's transcript says which key was refused. Always 403: the
// run's token was good, and Claude Code (2.1) retries a 401 from a base
// URL of its own for minutes without saying why, where it stops at a 403
// and prints the message.
func (h *Handler) refusedByProvider(resp *http.Response) error {
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	f, ok := resp.Request.Context().Value(ctxKey{}).(forwarded)
	if !ok {
		return nil
	}
	name := h.opts.Company + "/" + f.cred.Name
	h.metrics.count(f.cred.Name, outcomeProviderRefused)
	h.opts.Logger.Warn("credential refused by the provider", "company", h.opts.Company, "credential", f.cred.Name,
		"run", f.run, "upstream", f.cred.Upstream.Host, "status", resp.StatusCode)
	msg := "pcsync: the credential " + name + " was refused by " + f.cred.Upstream.Host +
		" (HTTP " + strconv.Itoa(resp.StatusCode) + "); check the key in its Secret"
	body := providerError(f.cred.Route.Provider, resp.StatusCode, msg)
	_ = resp.Body.Close()
	resp.StatusCode, resp.Status = http.StatusForbidden, "403 Forbidden"
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Encoding")
	return nil
}

// unauthenticated is how each provider's API names an authentication error.
var unauthenticated = adapters.ErrorKind{AnthropicType: "authentication_error", GeminiStatus: "UNAUTHENTICATED", OpenAICode: "invalid_api_key"}

// providerError is msg as the provider's API words an authentication error.
func providerError(p adapters.Provider, status int, msg string) []byte {
	return unauthenticated.ErrorBody(p, status, msg)
}

// upstreamFailed answers 502 when the upstream cannot be reached.
func (h *Handler) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	if f, ok := r.Context().Value(ctxKey{}).(forwarded); ok {
		h.metrics.count(f.cred.Name, outcomeUpstreamFailed)
		h.opts.Logger.Warn("credential upstream unreachable", "company", h.opts.Company, "credential", f.cred.Name,
			"upstream", f.cred.Upstream.Host, "error", err)
	}
	http.Error(w, "pcsync: the upstream of this credential cannot be reached", http.StatusBadGateway)
}
