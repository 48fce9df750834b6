package apply

import (
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	marker "github.com/pcsync/pcsync/internal/lib/redact"
)

// ErrImmutable marks an apply that failed because it would change an immutable field
// (errors.Is). Force deletes and recreates such objects.
var ErrImmutable = errors.New("immutable field")

// ErrEmptyRender is matched (errors.Is) by the *PruneRefusedError of an Apply with
// Prune and no objects while the set has members, unless approved.
var ErrEmptyRender = errors.New("refusing to prune: nothing was rendered")

// ErrMassPrune is matched (errors.Is) by the *PruneRefusedError of an Apply whose
// prune would remove every tenant or more tenants than the limit, unless approved.
var ErrMassPrune = errors.New("refusing to prune more than the prune limit")

// ErrPartialNoParent is matched (errors.Is) by the error of an Apply with
// Partial when the ApplySet parent does not exist: only a full Apply may
// write the inventory from nothing.
var ErrPartialNoParent = errors.New("a partial apply needs the ApplySet parent; apply in full")

// ConflictError is an apply refused because other field managers own fields the
// configuration sets (without ForceConflicts). ForceConflicts takes them back.
type ConflictError struct {
	// Conflicts maps each other manager to the fields (e.g. ".data.key") it owns.
	Conflicts map[string][]string
}

// Error names every manager and its fields, e.g.
// `conflict with field manager "kubectl-edit" on .rules; apply without --force-conflicts=false to take the fields back`.
func (e *ConflictError) Error() string {
	managers := make([]string, 0, len(e.Conflicts))
	for m := range e.Conflicts {
		managers = append(managers, m)
	}
	sort.Strings(managers)
	parts := make([]string, 0, len(managers))
	for _, m := range managers {
		fields := append([]string(nil), e.Conflicts[m]...)
		sort.Strings(fields)
		parts = append(parts, fmt.Sprintf("field manager %q on %s", m, strings.Join(fields, ", ")))
	}
	return "conflict with " + strings.Join(parts, "; ") + "; apply without --force-conflicts=false to take the fields back"
}

var conflictManager = regexp.MustCompile(`conflict with "([^"]*)"`)

// explainApplyError turns API errors of an apply into errors that say what happened
// and what to do.
func explainApplyError(err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err
	}
	st := status.Status()
	switch {
	case st.Reason == metav1.StatusReasonConflict && st.Details != nil && hasConflictCauses(st.Details.Causes):
		ce := &ConflictError{Conflicts: map[string][]string{}}
		for _, c := range st.Details.Causes {
			if c.Type != metav1.CauseTypeFieldManagerConflict {
				continue
			}
			mgr := "unknown"
			if sm := conflictManager.FindStringSubmatch(c.Message); sm != nil {
				mgr = sm[1]
			}
			ce.Conflicts[mgr] = append(ce.Conflicts[mgr], c.Field)
		}
		return ce
	case st.Reason == metav1.StatusReasonInvalid && isImmutableMessage(st):
		return fmt.Errorf("%w: %s; pass --force to delete and recreate the object", ErrImmutable, immutableFields(st))
	}
	return err
}

func hasConflictCauses(causes []metav1.StatusCause) bool {
	for _, c := range causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			return true
		}
	}
	return false
}

var immutableRE = regexp.MustCompile(`(?i)immutable|cannot change|updates to .* are forbidden|may not be changed`)

func isImmutableMessage(st metav1.Status) bool {
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if immutableRE.MatchString(c.Message) {
				return true
			}
		}
	}
	return immutableRE.MatchString(st.Message)
}

// immutableFields names the fields of an immutable-field error and the server's
// reason, without the values (which may be secret).
func immutableFields(st metav1.Status) string {
	var parts []string
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if !immutableRE.MatchString(c.Message) {
				continue
			}
			msg := c.Message
			// "Invalid value: <value>: field is immutable" → keep the reason only.
			if i := strings.LastIndex(msg, ": "); i >= 0 && strings.HasPrefix(msg, "Invalid value") {
				msg = msg[i+2:]
			}
			parts = append(parts, c.Field+": "+msg)
		}
	}
	if len(parts) == 0 {
		return "a field that cannot be changed in place differs"
	}
	return strings.Join(parts, "; ")
}

// redactedError hides Secret values (with pcsync's one redaction marker) in an error's message.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact removes the values of a Secret's data (encoded and decoded) from err's
// message. Errors about other kinds pass unchanged.
func redact(err error, obj *unstructured.Unstructured) error {
	if err == nil || obj == nil || obj.GetKind() != "Secret" || obj.GetAPIVersion() != "v1" {
		return err
	}
	msg := err.Error()
	data, _, _ := unstructured.NestedMap(obj.Object, "data")
	var secrets []string
	for _, v := range data {
		s, ok := v.(string)
		if !ok {
			continue
		}
		secrets = append(secrets, s)
		if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
			secrets = append(secrets, string(dec))
		}
	}
	// Longest first, so that a value inside another is not left half-masked.
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	changed := false
	for _, s := range secrets {
		if len(s) < 3 || !strings.Contains(msg, s) {
			continue
		}
		msg = strings.ReplaceAll(msg, s, marker.Marker)
		changed = true
	}
	if !changed {
		return err
	}
	return &redactedError{msg: msg, err: err}
}
