package paperclip

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pcsync/pcsync/internal/lib/redact"
)

// Client calls Paperclip's HTTP API. It is safe for concurrent use; it
// counts the requests it sends (Reads, Writes). The board API key is sent
// as "Authorization: Bearer" and is never part of an error.
type Client struct {
	base   *url.URL
	token  string
	hc     *http.Client
	ua     string
	reads  atomic.Int64
	writes atomic.Int64
}

// ClientOptions configure a Client.
type ClientOptions struct {
	// URL is the base URL of Paperclip's API (Settings spec.paperclip.url).
	URL string
	// Token is a board API key; empty sends no Authorization header
	// (Paperclip's local_trusted mode).
	Token string
	// HTTPClient sends the requests; nil means one with a 30 s timeout.
	HTTPClient *http.Client
	// UserAgent is sent with every request. Default "pcsync".
	UserAgent string
}

// NewClient returns a client for opts.
func NewClient(opts ClientOptions) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(opts.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("paperclip: invalid URL %q: want http(s)://host[:port]", opts.URL)
	}
	if u.User != nil {
		return nil, errors.New("paperclip: the URL must not hold a user or password; use tokenEnv or tokenFile")
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	ua := opts.UserAgent
	if ua == "" {
		ua = "pcsync"
	}
	return &Client{base: u, token: opts.Token, hc: hc, ua: ua}, nil
}

// Reads and Writes are the numbers of read (GET) and write requests sent.
func (c *Client) Reads() int64  { return c.reads.Load() }
func (c *Client) Writes() int64 { return c.writes.Load() }

// APIError is a request Paperclip refused (any status but 2xx).
type APIError struct {
	Method, Path string
	Status       int
	// Message is Paperclip's error message (its JSON "error"), or the start
	// of the body.
	Message string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("Paperclip answered %s %s with %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	switch e.Status {
	case http.StatusUnauthorized:
		msg += " (check the board API key of Settings spec.paperclip.tokenEnv or tokenFile)"
	case http.StatusForbidden:
		msg += " (the board API key may not do this)"
	}
	if strings.Contains(e.Message, "Unknown adapter type: "+AdapterType) {
		msg += " (install the pcsync adapter in Paperclip first: docs/paperclip.md, section 1)"
	}
	return msg
}

// ListAgents returns a company's agents.
func (c *Client) ListAgents(ctx context.Context, companyID string) ([]Agent, error) {
	var out []Agent
	err := c.do(ctx, http.MethodGet, "/api/companies/"+url.PathEscape(companyID)+"/agents", nil, &out)
	return out, err
}

// GetAgent returns one agent by its id.
func (c *Client) GetAgent(ctx context.Context, id string) (*Agent, error) {
	var out Agent
	if err := c.do(ctx, http.MethodGet, "/api/agents/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateAgent creates an agent in a company.
func (c *Client) CreateAgent(ctx context.Context, companyID string, body map[string]any) (*Agent, error) {
	var out Agent
	if err := c.do(ctx, http.MethodPost, "/api/companies/"+url.PathEscape(companyID)+"/agents", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListEnvironments returns a company's environments.
func (c *Client) ListEnvironments(ctx context.Context, companyID string) ([]Environment, error) {
	var out []Environment
	err := c.do(ctx, http.MethodGet, "/api/companies/"+url.PathEscape(companyID)+"/environments", nil, &out)
	return out, err
}

// CreateEnvironment creates an environment in a company.
func (c *Client) CreateEnvironment(ctx context.Context, companyID string, body map[string]any) (*Environment, error) {
	var out Environment
	if err := c.do(ctx, http.MethodPost, "/api/companies/"+url.PathEscape(companyID)+"/environments", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateEnvironment changes an environment of a company (Paperclip wants
// the company named when several exist).
func (c *Client) UpdateEnvironment(ctx context.Context, companyID, id string, body map[string]any) (*Environment, error) {
	var out Environment
	path := "/api/environments/" + url.PathEscape(id) + "?companyId=" + url.QueryEscape(companyID)
	if err := c.do(ctx, http.MethodPatch, path, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateAgent patches an agent.
func (c *Client) UpdateAgent(ctx context.Context, id string, body map[string]any) (*Agent, error) {
	var out Agent
	if err := c.do(ctx, http.MethodPatch, "/api/agents/"+url.PathEscape(id), body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PauseAgent pauses an agent (its active runs are cancelled by Paperclip).
func (c *Client) PauseAgent(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/api/agents/"+url.PathEscape(id)+"/pause", nil, nil)
}

// ResumeAgent resumes a paused agent.
func (c *Client) ResumeAgent(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/api/agents/"+url.PathEscape(id)+"/resume", nil, nil)
}

// maxBody bounds what is read of a response.
const maxBody = 32 << 20

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	u := *c.base
	p, query, _ := strings.Cut(path, "?")
	u.Path = strings.TrimRight(u.Path, "/") + p
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if method == http.MethodGet {
		c.reads.Add(1)
	} else {
		c.writes.Add(1)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return unreachableError{c.scrub(fmt.Errorf("Paperclip at %s is unreachable: %w", c.base.Redacted(), unwrapURLError(err)))}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return c.scrub(fmt.Errorf("%s %s: read the answer: %w", method, path, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &APIError{Method: method, Path: path, Status: resp.StatusCode}
		var body struct {
			Error   any    `json:"error"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &body) == nil && (body.Error != nil || body.Message != "") {
			switch v := body.Error.(type) {
			case string:
				e.Message = v
			case nil:
				e.Message = body.Message
			default:
				b, _ := json.Marshal(v)
				e.Message = string(b)
			}
		} else {
			e.Message = strings.TrimSpace(string(data))
		}
		if len(e.Message) > 500 {
			e.Message = e.Message[:500] + "…"
		}
		e.Message = c.scrubString(e.Message)
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// ErrUnreachable matches (errors.Is) a request that Paperclip's API did not
// answer at all: refused, timed out, no route, a name that does not
// resolve; not an answer with an error status.
var ErrUnreachable = errors.New("Paperclip is unreachable")

// unreachableError is a request's error that matches ErrUnreachable.
type unreachableError struct{ err error }

func (e unreachableError) Error() string        { return e.err.Error() }
func (e unreachableError) Unwrap() error        { return e.err }
func (e unreachableError) Is(target error) bool { return target == ErrUnreachable }

// unwrapURLError drops *url.Error's "Get \"<url>\": " prefix: the caller
// names the server and the request itself.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// scrub replaces the token in an error's text, should anything have echoed it.
func (c *Client) scrub(err error) error {
	if c.token == "" || err == nil || !strings.Contains(err.Error(), c.token) {
		return err
	}
	return errors.New(c.scrubString(err.Error()))
}

func (c *Client) scrubString(s string) string {
	if c.token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.token, redact.Marker)
}
