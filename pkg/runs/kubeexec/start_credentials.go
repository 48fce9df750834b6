package kubeexec

import (
	"context"
	"fmt"

	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/secretcheck"
)

// checkCredentials starts, for a run that uses its company's credentials
// (Input.Credentials), the check that their Secrets exist
// (secretcheck.Guard: one dry-run create per Secret, none while a Secret
// found is trusted). It runs beside journalStart's write; credentialsExist
// waits for its answer. It comes after the waits for a slot and a place in
// the window, so the answer is fresh when the Job is created.
func (s *start) checkCredentials(ctx context.Context) error {
	if s.in.Credentials == nil {
		return nil
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	s.credentials = done
	s.did(func() error { cancel(); return nil })
	go func() {
		defer cancel()
		done <- untilAnswered(cctx, s.log, "dry-run create of the credentials' Secrets in "+s.ns, func() error {
			return s.e.credentials.Check(cctx, s.ns, s.in.Company, s.in.Agent.Adapter)
		})
	}()
	return nil
}

// credentialsExist waits for checkCredentials' answer. A credential whose
// Secret does not exist fails the run with auth_required (its key cannot
// be given to the CLI), naming the Secret, the credential and how to
// create it; no Job, so no pod, is created.
func (s *start) credentialsExist(ctx context.Context) error {
	if s.credentials == nil {
		return nil
	}
	var err error
	select {
	case err = <-s.credentials:
	case <-ctx.Done():
		return ctx.Err()
	}
	switch {
	case err == nil:
		return nil
	case secretcheck.IsMissing(err):
		return &runs.StartError{Code: result.ErrAuthRequired, Err: fmt.Errorf("no Job created: %w", err)}
	}
	return fmt.Errorf("no Job created: %w", err)
}
