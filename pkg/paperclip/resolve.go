package paperclip

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/pcsync/pcsync/pkg/config"
)

// ResolveAgent returns the name of the agent company c declares in m that
// Paperclip's agent id is: the agent pcsync's marker in its metadata names
// (pcsync creates the agents of a company with spec.paperclip.manage and
// marks each with its name). It answers "" with no error, and asks
// Paperclip nothing, for a company that does not manage its agents in
// Paperclip; "" with no error too for an agent Paperclip does not know, one
// of another company, one without pcsync's marker, or one whose marker
// names an agent the config no longer declares. An error is a question
// Paperclip did not answer.
func (r *Reconciler) ResolveAgent(ctx context.Context, m *config.Model, c *config.Company, id string) (string, error) {
	s := m.Settings.Spec.Paperclip
	if id == "" || !c.Spec.Paperclip.Manage || s == nil {
		return "", nil
	}
	token, err := r.Token(s)
	if err != nil {
		return "", err
	}
	cl, err := NewClient(ClientOptions{URL: s.URL, Token: token, HTTPClient: r.hc, UserAgent: r.opts.UserAgent})
	if err != nil {
		return "", err
	}
	a, err := cl.GetAgent(ctx, id)
	if apiErr := (*APIError)(nil); errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("paperclip agent %s of company %s: %w", id, c.Slug(), err)
	}
	mk, ok := a.marker()
	if !ok || a.CompanyID != c.Spec.ID {
		return "", nil
	}
	if _, declared := c.Agent(mk.Agent); !declared {
		return "", nil
	}
	return mk.Agent, nil
}
