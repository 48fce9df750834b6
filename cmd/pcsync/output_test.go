package main

import (
	"bytes"
	"errors"
	"flag"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/golden"
	"github.com/pcsync/pcsync/pkg/apply"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/output")

var (
	refNS      = apply.ObjectRef{Version: "v1", Kind: "Namespace", Name: "paperclip-acme"}
	refPolicy  = apply.ObjectRef{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy", Namespace: "paperclip-acme", Name: "paperclip-deny-all"}
	refRole    = apply.ObjectRef{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role", Namespace: "paperclip-acme", Name: "paperclip-tenant-role"}
	refQuota   = apply.ObjectRef{Version: "v1", Kind: "ResourceQuota", Namespace: "paperclip-acme", Name: "paperclip-quota"}
	refCilium  = apply.ObjectRef{Group: "cilium.io", Version: "v2", Kind: "CiliumNetworkPolicy", Namespace: "paperclip-acme", Name: "paperclip-egress-fqdn"}
	refOldCM   = apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "paperclip-acme", Name: "old"}
	refOldNS   = apply.ObjectRef{Version: "v1", Kind: "Namespace", Name: "paperclip-gone"}
	refOldRole = apply.ObjectRef{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role", Namespace: "paperclip-gone", Name: "r"}
	refParent  = apply.ObjectRef{Version: "v1", Kind: "Secret", Namespace: "paperclip", Name: "pcsync"}
)

var hold = &apply.PruneHold{Reason: apply.HoldOverLimit, Tenants: []string{"paperclip-a", "paperclip-b"}, Fleet: 4, Limit: 1,
	Objects: 16, Token: "0123456789abcdef", PruneMax: "25%", PruneFloor: 0}

// TestOutput pins the bytes apply and diff print for a change set (stdout, stderr), in
// text and JSON, against testdata/output/*.golden (-update rewrites them).
func TestOutput(t *testing.T) {
	applied := &apply.ChangeSet{
		ApplySetID: "applyset-x-v1",
		Parent:     refParent,
		Objects: []apply.Change{
			{Ref: refNS, Action: apply.ActionCreated},
			{Ref: refPolicy, Action: apply.ActionUnchanged},
			{Ref: refRole, Action: apply.ActionConfigured},
			{Ref: refQuota, Action: apply.ActionRecreated},
			{Ref: refCilium, Action: apply.ActionFailed,
				Err: errors.New("CiliumNetworkPolicy/paperclip-acme/paperclip-egress-fqdn apply failed: x")},
			{Ref: refOldCM, Action: apply.ActionPruned, Prune: true},
			{Ref: refOldRole, Action: apply.ActionFailed, Prune: true, Err: errors.New("Role/paperclip-gone/r prune failed: forbidden")},
			{Ref: refOldNS, Action: apply.ActionRetained, Prune: true, Note: "holds objects that are not in the set: job/x"},
			{Ref: apply.ObjectRef{Version: "v1", Kind: "Namespace", Name: "team-shared"}, Action: apply.ActionReleased, Prune: true,
				Note: "adopted (pcsync.io/adopt), so let go instead of deleted: pcsync's fields were removed, the object stays"},
		},
		MutatingRequests: 5,
		ReadRequests:     12,
		Duration:         1234 * time.Millisecond,
	}
	dryRun := &apply.ChangeSet{
		ApplySetID: "applyset-x-v1",
		Parent:     refParent,
		DryRun:     true,
		Objects: []apply.Change{
			{Ref: refNS, Action: apply.ActionCreated},
			{Ref: refRole, Action: apply.ActionUnchanged},
			{Ref: refOldCM, Action: apply.ActionPruned, Prune: true},
		},
		PruneHeld:        hold,
		MutatingRequests: 2,
		ReadRequests:     9,
		Duration:         87 * time.Millisecond,
	}
	empty := &apply.ChangeSet{ApplySetID: "applyset-x-v1", Parent: refParent}
	diffed := &apply.ChangeSet{
		ApplySetID: "applyset-x-v1",
		Parent:     refParent,
		DryRun:     true,
		Objects: []apply.Change{
			{Ref: refNS, Action: apply.ActionCreated,
				Diff: "--- live/v1.Namespace.paperclip-acme\n+++ merged/v1.Namespace.paperclip-acme\n@@ -0,0 +1,3 @@\n+apiVersion: v1\n+kind: Namespace\n+metadata: {}\n"},
			{Ref: refPolicy, Action: apply.ActionUnchanged},
			{Ref: refRole, Action: apply.ActionConfigured,
				Diff: "--- live/x\n+++ merged/x\n@@ -1 +1 @@\n-a: 1\n+a: 2\n"},
			{Ref: refCilium, Action: apply.ActionFailed,
				Err: errors.New("CiliumNetworkPolicy/paperclip-acme/paperclip-egress-fqdn diff failed: no kind")},
			{Ref: refOldCM, Action: apply.ActionPruned, Prune: true, Diff: "--- live/v1.ConfigMap.paperclip-acme.old\n+++ merged/v1.ConfigMap.paperclip-acme.old\n@@ -1 +0,0 @@\n-kind: ConfigMap\n"},
		},
		PruneHeld:        hold,
		MutatingRequests: 3,
		ReadRequests:     11,
		Duration:         456 * time.Millisecond,
	}
	unchanged := &apply.ChangeSet{ApplySetID: "applyset-x-v1", Parent: refParent, DryRun: true,
		Objects: []apply.Change{{Ref: refNS, Action: apply.ActionUnchanged}}}

	tests := []struct {
		name  string
		write func(g *globalOptions, format string) error
	}{
		{"apply", func(g *globalOptions, f string) error { return writeReportTo(g, g.Stdout, f, applied) }},
		{"apply-dry-run", func(g *globalOptions, f string) error { return writeReportTo(g, g.Stdout, f, dryRun) }},
		{"apply-empty", func(g *globalOptions, f string) error { return writeReportTo(g, g.Stdout, f, empty) }},
		{"diff", func(g *globalOptions, f string) error { return writeDiffTo(g, g.Stdout, f, diffed) }},
		{"diff-unchanged", func(g *globalOptions, f string) error { return writeDiffTo(g, g.Stdout, f, unchanged) }},
	}
	for _, tt := range tests {
		for _, format := range []string{"text", "json"} {
			t.Run(tt.name+"-"+format, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				g := &globalOptions{Stdout: &stdout, Stderr: &stderr, Logger: slog.New(slog.DiscardHandler)}
				if err := tt.write(g, format); err != nil {
					t.Fatal(err)
				}
				got := "--- stdout\n" + stdout.String() + "--- stderr\n" + stderr.String()
				path := filepath.Join("testdata", "output", tt.name+"."+format+".golden")
				golden.File(t, path, []byte(got), *update)
			})
		}
	}
}
