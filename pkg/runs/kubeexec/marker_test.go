package kubeexec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestCheckOwner: a Job is the run's own only when it carries the nonce of
// the run's marker and, when the marker holds one, the UID of the Job
// pcsync created; anything else under the run's name is a conflict whose
// message names the Job. Markers without a nonce or without a UID (older
// versions) fall back to what they hold.
func TestCheckOwner(t *testing.T) {
	job := func(ann map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "acme-ceo-r1-0123abcd", Annotations: ann}}
	}
	withNonce := func(n string) *batchv1.Job {
		return job(map[string]string{AnnotationRequest: "r1.json", AnnotationNonce: n})
	}
	withUID := func(j *batchv1.Job, uid types.UID) *batchv1.Job {
		j.UID = uid
		return j
	}
	const conflict = "a Job not created by pcsync holds the run's name Job/acme/acme-ceo-r1-0123abcd"
	tests := []struct {
		name   string
		job    *batchv1.Job
		marker marker
		ok     bool
		want   string // "" when owned; else a part of the error
	}{
		{"own Job", withNonce("n1"), marker{Nonce: "n1"}, true, ""},
		{"wrong nonce", withNonce("n2"), marker{Nonce: "n1"}, true, "does not match the nonce"},
		{"empty nonce annotation", withNonce(""), marker{Nonce: "n1"}, true, "does not match the nonce"},
		{"no nonce annotation", job(map[string]string{AnnotationRequest: "r1.json"}), marker{Nonce: "n1"}, true, "has no pcsync.io/run-nonce annotation"},
		{"no annotations", job(nil), marker{Nonce: "n1"}, true, "has no pcsync.io/run-nonce annotation"},
		{"no marker", withNonce("n1"), marker{}, false, "pcsync has no record of creating a Job for this run"},
		{"no marker, no nonce", job(nil), marker{}, false, "pcsync has no record"},
		{"marker from before nonces", job(nil), marker{RunID: "r1"}, true, ""},
		{"own Job, its UID recorded", withUID(withNonce("n1"), "u1"), marker{Nonce: "n1", Created: true, UID: "u1"}, true, ""},
		{"re-created with the nonce copied", withUID(withNonce("n1"), "u2"), marker{Nonce: "n1", Created: true, UID: "u1"},
			true, "its UID u2 is not the UID u1 of the Job pcsync created: the run's Job was deleted and this one created under its name, with its nonce copied"},
		{"recorded UID, wrong nonce", withUID(withNonce("n2"), "u1"), marker{Nonce: "n1", Created: true, UID: "u1"}, true, "does not match the nonce"},
		{"created record from before UIDs", withUID(withNonce("n1"), "u2"), marker{Nonce: "n1", Created: true}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkOwner(tt.job, tt.marker, tt.ok)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("checkOwner: %v, want the Job adopted", err)
				}
				return
			}
			if err == nil {
				t.Fatal("checkOwner adopted a look-alike Job")
			}
			for _, part := range []string{conflict, tt.want, "creates no Secret"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not say %q", err, part)
				}
			}
		})
	}
}

// TestNewNonce: nonces are long and never repeat.
func TestNewNonce(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		n := newNonce()
		if len(n) < 26 || seen[n] {
			t.Fatalf("nonce %q: too short or repeated", n)
		}
		seen[n] = true
	}
	if diff := cmp.Diff(1000, len(seen)); diff != "" {
		t.Errorf("distinct nonces (-want +got):\n%s", diff)
	}
}
