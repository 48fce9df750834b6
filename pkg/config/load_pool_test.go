package config_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

// A company's warm pools load as declared, each with the image its
// members run: its own, or its adapter type's; a pool that fills the
// quota exactly (its members and the egress proxy's pod) is allowed.
func TestLoadWarmPool(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  images: {allowList: ['registry.example/*']}\n",
		"acme.yaml": companyDoc("acme") + "  quota: {pods: 6}\n  agents:\n    - {name: coder, adapter: claude_local}\n" +
			"  sandbox:\n    warmPool:\n      - {adapterType: codex_local, count: 2}\n      - {image: registry.example/tools, count: 3, agent: coder}\n",
	})
	m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := m.Company("acme")
	want := []config.WarmPool{{AdapterType: "codex_local", Count: 2}, {Image: "registry.example/tools", Count: 3, Agent: "coder"}}
	if diff := cmp.Diff(want, c.Spec.Sandbox.WarmPool); diff != "" {
		t.Errorf("warm pools (-want +got):\n%s", diff)
	}
	var images []string
	for _, p := range c.Spec.Sandbox.WarmPool {
		images = append(images, m.WarmPoolImage(p))
	}
	if diff := cmp.Diff([]string{"pcsync-agent-codex:dev", "registry.example/tools"}, images); diff != "" {
		t.Errorf("pool images (-want +got):\n%s", diff)
	}
}

// A company's refillDelaySec is the delay its claims hold its refills
// for (3 s when unset, none when 0); a negative one or one over 600 is refused,
// naming the file, the line and the field.
func TestLoadRefillDelay(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		want        time.Duration
		wantErr     string
	}{
		{name: "unset", want: 3 * time.Second},
		{name: "0", field: "    refillDelaySec: 0\n", want: 0},
		{name: "10s", field: "    refillDelaySec: 10\n", want: 10 * time.Second},
		{name: "negative", field: "    refillDelaySec: -1\n", wantErr: "acme.yaml:8:21: spec.sandbox.refillDelaySec: invalid value"},
		{name: "over 600", field: "    refillDelaySec: 601\n", wantErr: "acme.yaml:8:21: spec.sandbox.refillDelaySec: invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"acme.yaml": companyDoc("acme") + "  sandbox:\n" + tc.field + "    warmPool: [{adapterType: claude_local, count: 1}]\n",
			})
			m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c, _ := m.Company("acme")
			if got := c.RefillDelay(); got != tc.want {
				t.Errorf("refill delay %s, want %s", got, tc.want)
			}
		})
	}
}

// A warm pool's members of an image without pcsync carry the sandbox's
// helper container, whose requests count against the quota too: three
// members fit a quota of 1 CPU of requests (3 × 250m and the egress
// proxy's 100m) with pcsync's own image, not with another (3 × 100m more).
func TestWarmPoolQuotaCountsTheHelper(t *testing.T) {
	for _, tc := range []struct {
		name, pool string
		wantErr    bool
	}{
		{"pcsync's own image", "{adapterType: claude_local, count: 3}", false},
		{"an image without pcsync", "{image: registry.example/tools, count: 3}", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  images: {allowList: ['registry.example/*']}\n",
				"acme.yaml":     companyDoc("acme") + "  quota: {requestsCpu: \"1\"}\n  sandbox:\n    warmPool:\n      - " + tc.pool + "\n",
			})
			_, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
			switch {
			case tc.wantErr && (err == nil || !strings.Contains(err.Error(), "requestsCpu 1150m, more than the company's quota")):
				t.Errorf("err = %v, want the members' and the helpers' requestsCpu 1150m refused", err)
			case !tc.wantErr && err != nil:
				t.Errorf("err = %v, want none", err)
			}
		})
	}
}
