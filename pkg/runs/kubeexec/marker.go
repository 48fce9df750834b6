package kubeexec

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	batchv1 "k8s.io/api/batch/v1"
)

// markerFile is the per-run marker file of older versions of pcsync,
// <state>/runs/<name>/kubernetes.json; the journal takes them in.
const markerFile = "kubernetes.json"

// marker is what the executor records of a run before its Job is created
// (a start record of the journal). A daemon that finds the marker but no
// Job knows the run was started (or about to be) and must not be started
// again: the Job was deleted, or removed by its TTL while no daemon
// watched, or the daemon stopped between the two steps. It holds no
// secrets.
type marker struct {
	RunID     string    `json:"runId"`
	Namespace string    `json:"namespace"`
	Job       string    `json:"job"`
	Request   string    `json:"request"`
	CreatedAt time.Time `json:"createdAt"`
	// Nonce is the random value the run's Job carries in AnnotationNonce;
	// only pcsync knows it before the Job exists. Markers written before
	// pcsync recorded nonces have none (see checkOwner).
	Nonce string `json:"nonce,omitempty"`
	// Created is set once the run's Job and Secret were created (the API
	// server answered both creates): from then on a missing Job means the
	// Job is gone, never that it was not created yet, and an adopted Job
	// needs no Secret repair.
	Created bool `json:"created,omitempty"`
	// Result is the run's result file. A marker whose result exists is
	// dropped when the journal is opened: the daemon that wrote the result
	// stopped before it dropped the marker.
	Result string `json:"result,omitempty"`
}

// maxMarkerBytes is the most a per-run marker file is read; a marker is a
// few hundred bytes.
const maxMarkerBytes = 1 << 20

// removeLegacyMarker deletes a per-run marker file and, when it is empty,
// the run's state directory.
func removeLegacyMarker(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("run marker %s: %w", path, err)
	}
	_ = os.Remove(filepath.Dir(path)) // fails, harmlessly, when not empty
	return nil
}

// newNonce returns a fresh run nonce (128 random bits, base32).
func newNonce() string { return rand.Text() }

// checkOwner returns nil when job is the run's own: it carries the nonce of
// the run's marker m (ok says whether there is one). pcsync records the
// nonce before it creates the Job, so every Job it created, including one
// created by a daemon that stopped right after, carries the marker's nonce.
// A Job without a marker, or whose nonce is missing or different, was not
// created by pcsync for this run: the error says so, and the caller neither
// adopts it, nor creates or repairs its Secret, nor deletes it. A marker
// without a nonce was written by a pcsync older than the check; its Job is
// adopted as before.
func checkOwner(job *batchv1.Job, m marker, ok bool) error {
	if ok && m.Nonce == "" {
		return nil
	}
	got, has := job.Annotations[AnnotationNonce]
	if ok && has && subtle.ConstantTimeCompare([]byte(got), []byte(m.Nonce)) == 1 {
		return nil
	}
	why := "its " + AnnotationNonce + " annotation does not match the nonce pcsync recorded for this run before creating its Job"
	switch {
	case !ok:
		why = "pcsync has no record of creating a Job for this run"
	case !has:
		why = "it has no " + AnnotationNonce + " annotation"
	}
	return fmt.Errorf("a Job not created by pcsync holds the run's name Job/%s/%s (%s): pcsync does not adopt it, creates no Secret for it and leaves it in place; delete it, or find out who created it",
		job.Namespace, job.Name, why)
}
