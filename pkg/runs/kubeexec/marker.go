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
	"k8s.io/apimachinery/pkg/types"
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
	// UID is the UID the API server gave the run's Job, recorded with
	// Created. A Job under the run's name with another UID is not the one
	// pcsync created, whatever it carries (see checkOwner). Empty when the
	// create was not answered before the daemon stopped, and in journals of
	// a pcsync older than the check.
	UID types.UID `json:"uid,omitempty"`
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
// the run's marker m (ok says whether there is one) and, once the marker
// holds the UID the API server gave the run's Job, that UID. pcsync records
// the nonce before it creates the Job, so every Job it created, including
// one created by a daemon that stopped right after, carries the marker's
// nonce. The nonce can be copied, though, by whoever can read the Job: the
// UID cannot, so a Job deleted and created again under the run's name with
// the run's labels and annotations is told apart from pcsync's own. A Job
// without a marker, whose nonce is missing or different, or whose UID is
// not the recorded one, was not created by pcsync for this run: the error
// says so, and the caller neither adopts it, nor creates or repairs its
// Secret, nor deletes it.
//
// Compatibility: a marker without a nonce was written by a pcsync older
// than the nonce check; its Job is adopted as before. A marker without a
// UID (the daemon stopped before the create was answered, or the journal
// was written by a pcsync older than the UID check) is decided by the
// nonce alone.
func checkOwner(job *batchv1.Job, m marker, ok bool) error {
	if ok && m.Nonce == "" {
		return nil
	}
	got, has := job.Annotations[AnnotationNonce]
	nonceOK := ok && has && subtle.ConstantTimeCompare([]byte(got), []byte(m.Nonce)) == 1
	if nonceOK && (m.UID == "" || job.UID == m.UID) {
		return nil
	}
	var why string
	switch {
	case !ok:
		why = "pcsync has no record of creating a Job for this run"
	case !has:
		why = "it has no " + AnnotationNonce + " annotation"
	case !nonceOK:
		why = "its " + AnnotationNonce + " annotation does not match the nonce pcsync recorded for this run before creating its Job"
	default:
		why = fmt.Sprintf("it carries the run's nonce but its UID %s is not the UID %s of the Job pcsync created: the run's Job was deleted and this one created under its name, with its nonce copied", job.UID, m.UID)
	}
	return fmt.Errorf("a Job not created by pcsync holds the run's name Job/%s/%s (%s): pcsync does not adopt it, creates no Secret for it and leaves it in place; delete it, or find out who created it",
		job.Namespace, job.Name, why)
}
