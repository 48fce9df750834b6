package testcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// installHint is what an error about a missing host program says to do.
const installHint = "install them with `apt-get install containerd runc containernetworking-plugins iproute2 iptables ipset` (hack/realnode/install.sh)"

// hostTools are the host programs the real node runs, found in PATH.
type hostTools struct {
	containerd, runc, ip string
}

// checkRealNodeHost reports everything the real node lacks on this machine, in one
// error: root, containerd, runc, the CNI plugins, ip, the Go toolchain (for the
// pause program), and cgroup hierarchies.
func checkRealNodeHost(o RealNodeOptions) (hostTools, error) {
	var missing []string
	var t hostTools
	if os.Geteuid() != 0 {
		missing = append(missing, "root (the kubelet and containerd mount, create network namespaces and cgroups)")
	}
	look := func(name string, dst *string, extra ...string) {
		p, err := exec.LookPath(name)
		if err != nil {
			for _, dir := range extra {
				if st, serr := os.Stat(filepath.Join(dir, name)); serr == nil && st.Mode()&0o111 != 0 {
					p, err = filepath.Join(dir, name), nil
					break
				}
			}
		}
		if err != nil {
			missing = append(missing, name+" (not in PATH)")
			return
		}
		if dst != nil {
			*dst = p
		}
	}
	look("containerd", &t.containerd)
	look("containerd-shim-runc-v2", nil)
	look("runc", &t.runc, "/usr/sbin", "/sbin")
	look("ip", &t.ip, "/usr/sbin", "/sbin")
	look("go", nil)
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		p := filepath.Join(o.CNIBinDir, plugin)
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, "CNI plugin "+p)
		}
	}
	if len(cgroupMounts()) == 0 {
		missing = append(missing, "cgroup hierarchies (none mounted under /sys/fs/cgroup)")
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("this machine lacks %s; %s", strings.Join(missing, ", "), installHint)
	}
	return t, nil
}

// mountInfo is one line of /proc/self/mountinfo.
type mountInfo struct {
	point, fsType string
}

// mounts lists the mount points of this mount namespace.
func mounts() ([]mountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("mounts: %w", err)
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - type source super
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		m := mountInfo{point: unescapeMount(fields[4])}
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) {
				m.fsType = fields[i+1]
				break
			}
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mounts: %w", err)
	}
	return out, nil
}

// unescapeMount decodes the octal escapes (\040 for a space) of mountinfo paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupMounts returns the mount points of the cgroup (v1) and cgroup2 hierarchies.
func cgroupMounts() []string {
	ms, err := mounts()
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range ms {
		if (m.fsType == "cgroup" || m.fsType == "cgroup2") && !seen[m.point] {
			seen[m.point] = true
			out = append(out, m.point)
		}
	}
	return out
}

// prepareCgroups creates the kubelet's cgroupRoot, /<cgroupParent>, in every
// hierarchy (the kubelet refuses a root that does not exist); in the cpuset
// hierarchy it gets its parent's CPUs and memory nodes, without which no task can
// join it.
func prepareCgroups() error {
	for _, mp := range cgroupMounts() {
		dir := filepath.Join(mp, cgroupParent)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(mp, f))
			if err != nil {
				continue // not the cpuset hierarchy (or cgroup2, where they are inherited)
			}
			if cur, err := os.ReadFile(filepath.Join(dir, f)); err == nil && strings.TrimSpace(string(cur)) != "" {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
				return fmt.Errorf("cgroup %s: %s: %w", dir, f, err)
			}
		}
	}
	return nil
}

// setupNodeBridge creates the bridge with no ports that holds the node IP as a /32.
func setupNodeBridge(ipBin, nodeIP string) error {
	for _, args := range [][]string{
		{"link", "add", nodeBridge, "type", "bridge"},
		{"addr", "add", nodeIP + "/32", "dev", nodeBridge},
		{"link", "set", nodeBridge, "up"},
	} {
		if out, err := exec.Command(ipBin, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("node IP: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// sweepNode removes what a real node leaves on the host when it stops, or when a
// run crashed without stopping it: the processes in its cgroups (containers),
// containerd's shims, every mount under the node directories (the kubelet's bind
// mount of its root and the volumes under it, container root filesystems, network
// namespaces), the cgroups themselves, both bridges, the CNI cache files of its
// network and the provisioner's volumes (volumesDir). dirs are node directories (<work dir>/realnode) to unmount under; shims
// are recognised by their containerd socket under a ".../realnode/containerd/"
// directory. Every step is attempted; the errors are joined.
func sweepNode(ipBin string, dirs []string, logf func(string, ...any)) error {
	var errs []error
	killed := killCgroupTasks()
	shims := killShims()
	if killed+shims > 0 {
		logf("testcluster: real node sweep: killed %d container processes and %d shims", killed, shims)
	}
	n, err := unmountUnder(dirs)
	if err != nil {
		errs = append(errs, err)
	}
	if n > 0 {
		logf("testcluster: real node sweep: unmounted %d mounts", n)
	}
	if err := removeVolumes(dirs); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	for _, br := range []string{podBridge, nodeBridge} {
		if _, err := os.Stat(filepath.Join("/sys/class/net", br)); err != nil {
			continue
		}
		if out, err := exec.Command(ipBin, "link", "del", br).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %w: %s", br, err, strings.TrimSpace(string(out))))
		}
	}
	cache, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", cniNetwork+"-*"))
	cache = append(cache, filepath.Join("/var/lib/cni/networks", cniNetwork))
	for _, p := range cache {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("CNI cache: %w", err))
		}
	}
	return errors.Join(errs...)
}

// cgroupDirs returns the directories of the node's cgroup subtree in every
// hierarchy, deepest first.
func cgroupDirs() []string {
	var dirs []string
	for _, mp := range cgroupMounts() {
		root := filepath.Join(mp, cgroupParent)
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// killCgroupTasks SIGKILLs every process in the node's cgroups until none is left
// (or 10 s pass) and returns how many it killed.
func killCgroupTasks() int {
	killed := map[int]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		found := false
		for _, dir := range cgroupDirs() {
			data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(data)) {
				pid, err := strconv.Atoi(f)
				if err != nil || pid <= 1 {
					continue
				}
				found = true
				killed[pid] = true
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if !found || time.Now().After(deadline) {
			return len(killed)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeCgroups removes the node's cgroup subtree, deepest first. A cgroup
// becomes removable a moment after its last task died, so it retries for a while.
func removeCgroups() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, dir := range cgroupDirs() {
			if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
				left = append(left, dir)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroups still in use: %s", strings.Join(left, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killShims SIGKILLs the containerd shims of any real node (their command line
// names a containerd socket in a ".../realnode/containerd/" directory) and returns
// how many there were. Shims outlive containerd, so nothing else ends them.
func killShims() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		if strings.Contains(string(data), "/realnode/containerd/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	}
	return n
}

// unmountUnder lazily unmounts every mount point at or under one of dirs, deepest
// first, until none is left (a bind mount can hide others), and returns how many
// it unmounted.
func unmountUnder(dirs []string) (int, error) {
	n := 0
	for round := 0; round < 10; round++ {
		ms, err := mounts()
		if err != nil {
			return n, err
		}
		var points []string
		for _, m := range ms {
			for _, d := range dirs {
				if d != "" && (m.point == d || strings.HasPrefix(m.point, d+"/")) {
					points = append(points, m.point)
					break
				}
			}
		}
		if len(points) == 0 {
			return n, nil
		}
		sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
		var errs []error
		for _, p := range points {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
				continue
			}
			n++
		}
		if len(errs) > 0 {
			return n, errors.Join(errs...)
		}
	}
	return n, fmt.Errorf("mounts under %s remain after 10 rounds of unmounting", strings.Join(dirs, ", "))
}

// nodeProcess returns the PID of a process in the node's cgroups (a
// container's) whose program is prog, 0 if none.
func nodeProcess(prog string) int {
	for _, dir := range cgroupDirs() {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			cmd, err := os.ReadFile(filepath.Join("/proc", f, "cmdline"))
			if err == nil && strings.HasPrefix(string(cmd), prog+"\x00") {
				return pid
			}
		}
	}
	return 0
}

// rss returns a process's resident memory in bytes (0 if unknown).
func rss(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
