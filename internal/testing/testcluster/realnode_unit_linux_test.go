package testcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

func TestUnescapeMount(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/plain/path", "/plain/path"},
		{`/with\040space`, "/with space"},
		{`/tab\011and\134backslash`, "/tab\tand\\backslash"},
		{`/short\04`, `/short\04`},
	}
	for _, tt := range tests {
		if got := unescapeMount(tt.in); got != tt.want {
			t.Errorf("unescapeMount(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestMachineLock takes the real-node lock, sees a second taker wait and give up
// with its context, naming the holder, then take it once it is released; a lock
// released without a clean stop hands the node directory to the next holder.
func TestMachineLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "realnode.lock")
	ctx := context.Background()
	first, err := lockMachine(ctx, path, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"", "/work/a/realnode"} {
		if dir != "" {
			if err := first.record(dir); err != nil {
				t.Fatal(err)
			}
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = lockMachine(short, path, t.Logf)
		cancel()
		want := fmt.Sprintf("pid %d (%s)", os.Getpid(), cmp.Or(dir, "starting"))
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), want) {
			t.Fatalf("second lock while held: %v, want a deadline error naming %q", err, want)
		}
	}

	if err := first.release(false); err != nil { // as a crash would leave it
		t.Fatal(err)
	}
	second, err := lockMachine(ctx, path, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff("/work/a/realnode", second.previousDir()); diff != "" {
		t.Errorf("previous dir after an unclean release (-want +got):\n%s", diff)
	}
	if err := second.release(true); err != nil {
		t.Fatal(err)
	}
	third, err := lockMachine(ctx, path, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer third.release(true)
	if got := third.previousDir(); got != "" {
		t.Errorf("previous dir after a clean release = %q, want none", got)
	}
}

// TestRealNodeConfigs checks the generated configuration files for what the node
// depends on.
func TestRealNodeConfigs(t *testing.T) {
	p := newNodePaths("/w/realnode")
	cd := containerdConfig(p, "/usr/lib/cni", "/usr/sbin/runc", "127.0.0.1:5000/pcsync/pause:x")
	kc := kubeletConfig(kubeletConfigParams{paths: p, caFile: "/w/pki/ca.crt", nodeIP: "10.200.0.1", port: 10250, healthPort: 10248, taint: true})
	hosts := registryHostsFile("127.0.0.1:5000")
	mirror := mirrorHostsFile("ghcr.io", "127.0.0.1:5000")
	for _, tt := range []struct{ name, text, want string }{
		{"containerd", cd, `restrict_oom_score_adj = true`},
		{"containerd", cd, `SystemdCgroup = false`},
		{"containerd", cd, `sandbox_image = "127.0.0.1:5000/pcsync/pause:x"`},
		{"containerd", cd, `config_path = "/w/realnode/containerd/certs.d"`},
		{"containerd", cd, `address = "/w/realnode/containerd/containerd.sock"`},
		{"kubelet", kc, `cgroupDriver: cgroupfs`},
		{"kubelet", kc, `failCgroupV1: false`},
		{"kubelet", kc, `address: "10.200.0.1"`},
		{"kubelet", kc, `registerWithTaints: [{key: "pcsync.io/real-node", value: "true", effect: NoSchedule}]`},
		{"hosts.toml", hosts, `server = "http://127.0.0.1:5000"`},
		{"ghcr.io hosts.toml", mirror, `server = "https://ghcr.io"`},
		{"ghcr.io hosts.toml", mirror, `[host."http://127.0.0.1:5000"]`},
	} {
		if !strings.Contains(tt.text, tt.want) {
			t.Errorf("%s config lacks %q:\n%s", tt.name, tt.want, tt.text)
		}
	}
	if n := len(DefaultRealNodeOptions().LockPath); n == 0 {
		t.Error("no default lock path")
	}
}

// TestRealNodeHostCheckNamesWhatIsMissing: a missing CNI plugin directory makes
// the check fail, naming each plugin and the packages to install.
func TestRealNodeHostCheckNamesWhatIsMissing(t *testing.T) {
	o := DefaultRealNodeOptions()
	o.CNIBinDir = filepath.Join(t.TempDir(), "no-cni")
	_, err := checkRealNodeHost(o)
	if err == nil {
		t.Fatal("no error for a missing CNI bin dir")
	}
	for _, want := range []string{"CNI plugin " + filepath.Join(o.CNIBinDir, "bridge"), "host-local", "loopback",
		"apt-get install containerd runc containernetworking-plugins"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// A node's stop (and a later start's sweep of a crashed run) removes the
// volumes the provisioner left, whoever owns their files, and nothing else
// of the node directory.
func TestRemoveVolumes(t *testing.T) {
	node := t.TempDir()
	vol := filepath.Join(volumesDir(node), "pvc-1_ns_data", "dir")
	if err := os.MkdirAll(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(vol, "file")
	if err := os.WriteFile(file, []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(file, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	keep := filepath.Join(node, "kubelet")
	if err := os.Mkdir(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := removeVolumes([]string{node, "", filepath.Join(t.TempDir(), "gone")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(volumesDir(node)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after removeVolumes: %v, want it gone", volumesDir(node), err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("removeVolumes removed more than the volumes: %v", err)
	}
}
