//go:build integration

package realnode

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// kubeletStep is a step of a pod's start that the kubelet logs at --v=4,
// found by a fragment of its line.
type kubeletStep struct{ name, fragment string }

// kubeletSteps are the steps of a pod's start, in order: the pod reaches
// the kubelet, its volumes are mounted (the volume manager's poll), its
// sandbox is made, its container started, and the status that says
// Running is sent (after the relist that sees the container).
var kubeletSteps = []kubeletStep{
	{"added", `"SyncLoop ADD"`},
	{"volumes", `"All volumes are attached and mounted for pod"`},
	{"sandbox", `"Created PodSandbox for pod"`},
	{"started", `reason="Started"`},
	{"running", `"Mark when the pod was running for the first time"`},
}

// kubeletPodRef finds the namespace/name a kubelet line is about.
var kubeletPodRef = regexp.MustCompile(`(?:pods=\["|pod="|object=")([a-z0-9-]+/[a-z0-9.-]+)"`)

// kubeletTimelines reads the real node's kubelet log (written at --v=4 when
// testcluster.KubeletVerbosityEnv is set) and returns, per pod
// (namespace/name), when each kubeletStep first happened; nil when the log
// has no such lines.
func kubeletTimelines(c *testcluster.Cluster) (map[string]map[string]time.Time, error) {
	f, err := os.Open(filepath.Join(c.WorkDir(), "logs", "kubelet.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]map[string]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	year := time.Now().Year()
	for sc.Scan() {
		line := sc.Text()
		m := kubeletPodRef.FindStringSubmatch(line)
		if m == nil || len(line) < 21 {
			continue
		}
		for _, s := range kubeletSteps {
			if !strings.Contains(line, s.fragment) {
				continue
			}
			// klog's header: Lmmdd hh:mm:ss.uuuuuu
			at, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
			if err != nil {
				break
			}
			at = at.AddDate(year, 0, 0)
			pod := out[m[1]]
			if pod == nil {
				pod = map[string]time.Time{}
				out[m[1]] = pod
			}
			if _, seen := pod[s.name]; !seen {
				pod[s.name] = at
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// kubeletShares is, for the pods whose name matches, the p50 of the time
// from the kubelet's ADD to each later step.
func kubeletShares(timelines map[string]map[string]time.Time, match func(pod string) bool) string {
	per := map[string][]time.Duration{}
	n := 0
	for pod, steps := range timelines {
		added, ok := steps["added"]
		if !ok || !match(pod) {
			continue
		}
		n++
		for _, s := range kubeletSteps[1:] {
			if at, ok := steps[s.name]; ok {
				per[s.name] = append(per[s.name], at.Sub(added))
			}
		}
	}
	if n == 0 {
		return "no pod in the kubelet's log"
	}
	var parts []string
	for _, s := range kubeletSteps[1:] {
		if len(per[s.name]) > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f ms", s.name, p50(per[s.name])))
		} else {
			parts = append(parts, s.name+" —")
		}
	}
	return fmt.Sprintf("kubelet ADD → %s (p50 of %d pods)", strings.Join(parts, ", "), n)
}
