package config_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

// keptEnv declares a Paperclip environment that keeps its leases and two
// agents that run in it.
const keptEnv = "  paperclip:\n    environments: [{name: k8s, reuseLease: true, runnerLifecycleMode: warm}, {name: once}]\n" +
	"  agents:\n    - {name: coder, adapter: claude_local, paperclip: {environment: k8s}}\n" +
	"    - {name: tester, adapter: claude_local, paperclip: {environment: k8s}}\n" +
	"    - {name: writer, adapter: claude_local, paperclip: {environment: once}}\n"

// spec.sandbox.suspend loads with its defaults (15 minutes, 10Gi, the
// cluster's StorageClass) or as declared; the quota's claims and storage
// are rendered where set; a quota that cannot hold a workspace claim for
// each agent whose environment keeps its leases (beside the sessions
// claim) is refused, naming the file, the line, the field and the quota's
// field; a bad idleSec is refused by the schema.
func TestLoadLeaseSuspend(t *testing.T) {
	for _, tc := range []struct {
		name, quota, suspend, extra string
		want                        *config.LeaseSuspend
		wantErr                     []string
	}{
		{name: "off", want: nil},
		{name: "defaults", suspend: "    suspend: {}\n", want: &config.LeaseSuspend{IdleSec: 900, Size: "10Gi"}},
		{name: "declared", suspend: "    suspend: {idleSec: 60, size: 2Gi, storageClassName: local-path}\n",
			want: &config.LeaseSuspend{IdleSec: 60, Size: "2Gi", StorageClassName: "local-path"}},
		{name: "quota holds", quota: "  quota: {persistentVolumeClaims: 2, requestsStorage: 4Gi}\n",
			suspend: "    suspend: {size: 2Gi}\n", want: &config.LeaseSuspend{IdleSec: 900, Size: "2Gi"}},
		{name: "too few claims", quota: "  quota: {persistentVolumeClaims: 1}\n", suspend: "    suspend: {size: 2Gi}\n",
			wantErr: []string{"acme.yaml:15:5: spec.sandbox.suspend: 2 kept lease(s) of 2Gi each need persistentVolumeClaims 2, more than the company's quota: Company acme spec.quota.persistentVolumeClaims (", "acme.yaml:7:35) is 1", "raise spec.quota.persistentVolumeClaims"}},
		{name: "too little storage with sessions", quota: "  quota: {requestsStorage: 20Gi}\n", suspend: "    suspend: {}\n",
			extra:   "  sessions: {size: 1Gi}\n",
			wantErr: []string{"acme.yaml:16:5: spec.sandbox.suspend: 2 kept lease(s) of 10Gi each and the sessions claim need requestsStorage 21Gi", "is 20Gi; lower spec.sandbox.suspend.size or raise spec.quota.requestsStorage"}},
		{name: "idleSec too short", suspend: "    suspend: {idleSec: 5}\n", wantErr: []string{"acme.yaml:14:24: spec.sandbox.suspend.idleSec: invalid value 5: must be at least 30"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"acme.yaml": companyDoc("acme") + tc.quota + tc.extra + keptEnv + "  sandbox:\n" + tc.suspend + "    refillDelaySec: 3\n",
			})
			m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
			if tc.wantErr != nil {
				for _, w := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Fatalf("got error %v, want one with %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c, _ := m.Company("acme")
			if diff := cmp.Diff(tc.want, c.LeaseSuspend()); diff != "" {
				t.Errorf("suspend (-want +got):\n%s", diff)
			}
			if got := c.KeptLeaseAgents(); got != 2 {
				t.Errorf("agents with kept leases: %d, want 2", got)
			}
		})
	}
}
