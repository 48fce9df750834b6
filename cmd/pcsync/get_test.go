package main

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/golden"
	cs "github.com/pcsync/pcsync/pkg/companystatus"
)

// statusFixture is three companies' statuses as the daemon writes them:
// Ready at a commit, failing (a message of two lines), suspended.
func statusFixture() ([]cs.CompanyStatus, time.Time) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-50 * time.Hour))
	commit := "4e5b0c2a9d7f6e1b3c8a0f9e2d4c6b8a1f3e5d7c"
	mk := func(name string, ready metav1.ConditionStatus, reason, msg, rev string, suspended bool) cs.CompanyStatus {
		s := cs.CompanyStatus{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "pcsync-system", CreationTimestamp: created,
			Generation: 1, Labels: map[string]string{cs.LabelOwner: "applyset-x-v1"}},
			Spec: cs.Spec{Namespace: "paperclip-" + name, ID: name + "-id"}}
		s.Status = cs.Status{ObservedGeneration: 1, Revision: rev, LastAttemptedRevision: commit, Suspended: suspended,
			Conditions: []metav1.Condition{{Type: cs.ConditionReady, Status: ready, Reason: reason, Message: msg,
				ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}}
		return s
	}
	return []cs.CompanyStatus{
		mk("acme", "True", cs.ReasonSucceeded, "applied revision "+commit, commit, false),
		mk("globex", "False", cs.ReasonFailed, "Namespace/paperclip-globex: not owned by pcsync\nand more", "", false),
		mk("initech", "False", cs.ReasonSuspended, "suspended in the config (spec.suspend)", "sha256:9f86d081884c7d65", true),
	}, now
}

// TestGetCompaniesOutput: pcsync get companies prints kubectl's table
// (with NAMESPACE for -A), one object as YAML or JSON, several as a List.
func TestGetCompaniesOutput(t *testing.T) {
	tests := []struct {
		name, format string
		all          bool
		n            int
	}{
		{"table", "table", false, 3},
		{"table-all-namespaces", "table", true, 3},
		{"table-none", "table", false, 0},
		{"one", "yaml", false, 1},
		{"list", "json", false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list, now := statusFixture()
			var out bytes.Buffer
			if err := writeStatuses(&out, tt.format, list[:tt.n], tt.all, now); err != nil {
				t.Fatal(err)
			}
			golden.File(t, filepath.Join("testdata", "get", tt.name+".golden"), out.Bytes(), *update)
		})
	}
}
