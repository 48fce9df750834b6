package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pcsync/pcsync/internal/lib/kube"
)

// TestDoctorSkipNetworkCheck: doctor takes the daemon's --skip-network-check;
// its old --skip-network still works, warns on stderr (stdout stays one
// JSON document with -o json), and is out of the help.
func TestDoctorSkipNetworkCheck(t *testing.T) {
	kubeconfig, _ := recordingServer(t)
	const notice = "warning: --skip-network is deprecated: use --skip-network-check"
	tests := []struct {
		args       []string
		wantSkip   bool
		wantNotice bool
	}{
		{nil, false, false},
		{[]string{"--skip-network-check"}, true, false},
		{[]string{"--skip-network"}, true, true},
		{[]string{"--skip-network-check=false"}, false, false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := newDoctorCmd(&globalOptions{Kube: kube.DefaultFlags()})
			if err := cmd.ParseFlags(tt.args); err != nil {
				t.Fatal(err)
			}
			if skip, err := cmd.Flags().GetBool("skip-network-check"); err != nil || skip != tt.wantSkip {
				t.Errorf("--skip-network-check is %v (%v), want %v", skip, err, tt.wantSkip)
			}
			// The cluster fails the checks (exit 1); the output is what matters.
			code, stdout, stderr := pcsync(t, append([]string{"doctor", "--kubeconfig", kubeconfig, "-o", "json"}, tt.args...)...)
			var report map[string]any
			if err := json.Unmarshal([]byte(stdout), &report); code != 1 || err != nil {
				t.Errorf("exit %d, want 1; stdout is not one JSON document (%v):\n%s", code, err, stdout)
			}
			if got := strings.Contains(stderr, notice); got != tt.wantNotice {
				t.Errorf("deprecation notice %v, want %v; stderr:\n%s", got, tt.wantNotice, stderr)
			}
		})
	}
	var help bytes.Buffer
	cmd := newDoctorCmd(&globalOptions{Kube: kube.DefaultFlags()})
	cmd.SetOut(&help)
	if err := cmd.Help(); err != nil {
		t.Fatal(err)
	}
	if h := help.String(); !strings.Contains(h, "--skip-network-check") || strings.Contains(h, "--skip-network ") {
		t.Errorf("doctor's help, want --skip-network-check and not --skip-network:\n%s", h)
	}
}
