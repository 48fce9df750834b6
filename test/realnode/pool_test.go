//go:build integration

package realnode

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/lib/podwait"
	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/render"
	"github.com/pcsync/pcsync/pkg/sandbox"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// A pool of 5 and 20 acquires at once: exactly 5 leases get a member (a
// pod of the pool, already Ready), 15 start cold, no pod is any two
// leases'; the pool refills with new pods, none of them a claimed one.
func TestPoolClaimRace(t *testing.T) {
	p := pushImages(t)
	e := newPoolEnv(t, p, "  quota: {pods: 40, limitsEphemeralStorage: 1Ti}\n  sandbox:\n    warmPool:\n      - {adapterType: claude_local, count: 5, agent: pinned}\n")
	m := e.manager(t, nil)
	e.waitPool(t, m, "5 Ready members", func(ready, _ int) bool { return ready == 5 })
	warm := map[string]bool{}
	for _, pod := range e.members(t) {
		warm[pod.Name] = true
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ids := make([]string, 20)
	errs := make([]error, 20)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := e.acquire(ctx, m, "")
			ids[i], errs[i] = info.ID, err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("acquires: %v", err)
	}
	t.Cleanup(func() {
		for _, id := range ids {
			_, _ = m.Release(context.Background(), sandbox.ReleaseParams{ID: id, Cancel: true})
		}
	})
	claimed := 0
	for _, id := range ids {
		if warm[id] {
			claimed++
		}
	}
	if distinct := len(slices.Compact(slices.Sorted(slices.Values(ids)))); distinct != 20 || claimed != 5 {
		t.Errorf("20 acquires got %d distinct pods, %d of them pool members; want 20 and 5 (ids %v)", distinct, claimed, ids)
	}
	e.waitPool(t, m, "the pool refilled", func(ready, members int) bool { return ready == 5 && members == 5 })
	for _, pod := range e.members(t) {
		if warm[pod.Name] || slices.Contains(ids, pod.Name) {
			t.Errorf("member %s after the refill was a claimed member or a lease's pod", pod.Name)
		}
	}
}

// A member is selected by the tenant's deny-all policy and by no egress
// policy until a lease claims it; then the egress policy selects it, and
// it carries the lease's labels. Its spec holds no env of a run and no
// Secret.
func TestPoolEgressUntilClaimed(t *testing.T) {
	p := pushImages(t)
	e := newPoolEnv(t, p, "  sandbox:\n    warmPool:\n      - {adapterType: claude_local, count: 1, agent: pinned}\n")
	m := e.manager(t, nil)
	e.waitPool(t, m, "1 Ready member", func(ready, _ int) bool { return ready == 1 })
	member := e.members(t)[0]

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	selects := func(policy string, l map[string]string) bool {
		np, err := e.c.Client().NetworkingV1().NetworkPolicies(e.ns).Get(ctx, policy, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		return sel.Matches(labels.Set(l))
	}
	if selects(render.EgressAllowName, member.Labels) || !selects(render.DenyAllName, member.Labels) {
		t.Errorf("member %s (labels %v): egress-allow selects it %v, deny-all %v; want false, true",
			member.Name, member.Labels, selects(render.EgressAllowName, member.Labels), selects(render.DenyAllName, member.Labels))
	}
	for _, c := range member.Spec.Containers {
		for _, env := range c.Env {
			if env.Name != "HOME" && env.Name != "TMPDIR" || env.ValueFrom != nil {
				t.Errorf("member container %s has env %s", c.Name, env.Name)
			}
		}
		if len(c.EnvFrom) > 0 {
			t.Errorf("member container %s has envFrom %v", c.Name, c.EnvFrom)
		}
	}
	for _, v := range member.Spec.Volumes {
		if v.Secret != nil || v.Projected != nil {
			t.Errorf("member volume %s is a Secret or projected", v.Name)
		}
	}

	info, err := e.acquire(ctx, m, "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release(context.Background(), sandbox.ReleaseParams{ID: info.ID, Cancel: true})
	if info.ID != member.Name {
		t.Fatalf("lease %s, want the member %s", info.ID, member.Name)
	}
	pod, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !selects(render.EgressAllowName, pod.Labels) || pod.Labels[leasepod.LabelLease] != info.ID || pod.Labels[pool.Label] != "" {
		t.Errorf("claimed pod labels %v: want the egress policy's role, the lease label and no pool label", pod.Labels)
	}
	if pod.Annotations[leasepod.AnnotationExpiresAt] == "" || *pod.Spec.ActiveDeadlineSeconds >= *member.Spec.ActiveDeadlineSeconds {
		t.Errorf("claimed pod: expiry annotation %q, activeDeadlineSeconds %d (the member's %d); want the lease's, lowered",
			pod.Annotations[leasepod.AnnotationExpiresAt], *pod.Spec.ActiveDeadlineSeconds, *member.Spec.ActiveDeadlineSeconds)
	}
	r, err := m.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "sh", Args: []string{"-c", "echo claimed"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "claimed\n" {
		t.Errorf("execute on the claimed member: %q %q", r.Stdout, r.Stderr)
	}
}

// A quota of 2 pods and a pool of 2: a lease whose pod no pool makes (a
// user's image) finds no room, so the pool gives up a member for it, and
// again for a second; the third lease, with the pool empty, is refused
// with quota_full. Egress mode standard: in mode proxy the egress proxy's
// pod would take a place of the quota (and validate refuses this one).
func TestPoolQuotaPressure(t *testing.T) {
	p := pushImages(t)
	e := newPoolEnv(t, p, "  egress: {mode: standard}\n  quota: {pods: 2}\n  sandbox:\n    warmPool:\n      - {adapterType: claude_local, count: 2, agent: pinned}\n")
	m := e.manager(t, func(o *sandbox.Options) { o.Pool.QuotaBackoff = 10 * time.Minute })
	e.waitPool(t, m, "2 Ready members", func(ready, _ int) bool { return ready == 2 })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i, want := range []int{1, 0} {
		info, err := e.acquire(ctx, m, p.Foreign)
		if err != nil {
			t.Fatalf("lease %d of the user's image: %v", i+1, err)
		}
		defer m.Release(context.Background(), sandbox.ReleaseParams{ID: info.ID, Cancel: true})
		if n := len(e.members(t)); n != want {
			t.Errorf("after lease %d: %d members, want %d", i+1, n, want)
		}
	}
	_, err := e.acquire(ctx, m, p.Foreign)
	var ue *sandbox.UserError
	if !errors.As(err, &ue) || ue.Code != sandbox.CodeQuotaFull {
		t.Errorf("third lease: %v, want a quota_full refusal", err)
	}
}

// A daemon SIGKILLed while it refills its pool (its pod creates slowed)
// leaves members that the next daemon adopts: it ends with exactly the
// declared count, the killed daemon's members among them, and no other
// pod in the namespace.
func TestPoolDaemonKilledMidRefill(t *testing.T) {
	p := pushImages(t)
	e := newPoolEnv(t, p, "  sandbox:\n    warmPool:\n      - {adapterType: claude_local, count: 4, agent: pinned}\n")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), poolDaemonConfig+"="+e.dir, poolDaemonKubeconfig+"="+e.c.KubeconfigPath(), poolDaemonState+"="+e.stateDir)
	cmd.Stdout, cmd.Stderr = testWriter{t}, testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(e.members(t)) == 0 {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the daemon created no member in 2m")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	before := e.members(t)
	if len(before) >= 4 {
		t.Fatalf("the daemon was killed with %d members: not mid-refill", len(before))
	}

	m := e.manager(t, nil)
	e.waitPool(t, m, "4 Ready members", func(ready, members int) bool { return ready == 4 && members == 4 })
	time.Sleep(3 * time.Second) // a resync or two: nothing more may come
	after := e.members(t)
	// Every pod but the tenant's egress proxy (egress mode proxy).
	all, err := e.c.Client().CoreV1().Pods(e.ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: agentpod.LabelRole + "!=" + agentpod.RoleEgressProxy})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pod := range after {
		names = append(names, pod.Name)
	}
	if len(after) != 4 || len(all.Items) != 4 {
		t.Errorf("after the restart: %d members, %d pods in the namespace; want 4 and 4", len(after), len(all.Items))
	}
	for _, pod := range before {
		if !slices.Contains(names, pod.Name) {
			t.Errorf("the killed daemon's member %s was not adopted (members now %v)", pod.Name, names)
		}
	}
}

// A pool's life in the daemon: a restarted daemon adopts its Ready
// members (no new pod); a changed image replaces every member; removing
// the company drains the pool.
func TestPoolLife(t *testing.T) {
	p := pushImages(t)
	pool := func(image string) string {
		return "  sandbox:\n    warmPool:\n      - {image: " + image + ", count: 2, agent: pinned}\n"
	}
	claude := images.Ref(p.Registry, images.Agent("claude"), imageTag)
	e := newPoolEnv(t, p, pool(claude))
	m := e.manager(t, nil)
	e.waitPool(t, m, "2 Ready members", func(ready, _ int) bool { return ready == 2 })
	first := memberNames(e.members(t))
	m.Close()

	m = e.manager(t, nil)
	e.waitPool(t, m, "the adopted members", func(ready, _ int) bool { return ready == 2 })
	time.Sleep(3 * time.Second)
	if got := memberNames(e.members(t)); !slices.Equal(got, first) {
		t.Errorf("after a restart the members are %v, want the adopted %v", got, first)
	}

	e.write(t, "", pool(p.Foreign), true)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		members, replaced := e.members(t), 0
		for _, pod := range members {
			if !slices.Contains(first, pod.Name) && agentpod.ContainerImage(&pod, leasepod.ContainerName) == p.Foreign && pod.Status.Phase == corev1.PodRunning {
				replaced++
			}
		}
		if len(members) == 2 && replaced == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image changed 3m ago; members %v, %d of them new and running of %s", memberNames(members), replaced, p.Foreign)
		}
		time.Sleep(100 * time.Millisecond)
	}

	e.write(t, "", "", false)
	deadline = time.Now().Add(2 * time.Minute)
	for len(e.members(t)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the company is removed and %d members remain", len(e.members(t)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func memberNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// Two deployments of pcsync on one cluster (daemons of two owners, their
// ApplySet IDs) leave each other's pools alone: beside a daemon keeping a
// pool of 2, a daemon of another owner whose config declares no company
// drains a member of its own that no pool of its declares, and leaves the
// first one's members as they were.
func TestPoolOwners(t *testing.T) {
	p := pushImages(t)
	e := newPoolEnv(t, p, "  sandbox:\n    warmPool:\n      - {adapterType: claude_local, count: 2, agent: pinned}\n")
	m := e.manager(t, func(o *sandbox.Options) { o.Pool.Owner = "deployment-a" })
	e.waitPool(t, m, "2 Ready members", func(ready, _ int) bool { return ready == 2 })
	members := e.members(t)
	before := memberNames(members)
	for _, pod := range members {
		if got := pod.Labels[pool.LabelOwner]; got != "deployment-a" {
			t.Errorf("member %s has owner %q, want deployment-a", pod.Name, got)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A member of deployment-b that no pool of deployment-b declares.
	orphan := members[0].DeepCopy()
	orphan.ObjectMeta = metav1.ObjectMeta{Name: "orphan-of-b", Namespace: e.ns, Labels: orphan.Labels, Annotations: orphan.Annotations}
	orphan.Labels[pool.LabelOwner] = "deployment-b"
	orphan.Status = corev1.PodStatus{}
	if _, err := e.c.Client().CoreV1().Pods(e.ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deployment-b: Settings only, its own state.
	dir := t.TempDir()
	settings, err := os.ReadFile(filepath.Join(e.dir, "settings.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "settings.yaml"), settings, 0o644); err != nil {
		t.Fatal(err)
	}
	model, err := loadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := sandbox.DefaultOptions(t.TempDir())
	o.Pool.Lease.Namespace = "default" // the pools' Lease: a namespace every cluster has
	o.Pool.Owner, o.Pool.Resync, o.Logger = "deployment-b", 100*time.Millisecond, discardLogger()
	other, err := sandbox.New(ctx, e.c.RESTConfig(), func() *config.Model { return model }, o)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := podwait.Gone(ctx, e.c.Client(), e.ns, orphan.Name); err != nil {
		t.Fatalf("deployment-b did not drain its own undeclared member: %v", err)
	}
	if got := memberNames(e.members(t)); !slices.Equal(got, before) {
		t.Errorf("with deployment-b running, deployment-a's members are %v, want %v", got, before)
	}
}

// A member that is not Ready within the ReadyDeadline (its image is in no
// registry: it stays pulling) is replaced by a new one, and the daemon says
// why; the replaced member is deleted.
func TestPoolMemberNotReady(t *testing.T) {
	p := pushImages(t)
	missing := missingImage(p)
	e := newPoolEnv(t, p, "  sandbox:\n    warmPool:\n      - {image: "+missing+", count: 1, agent: pinned}\n")
	var log lockedbuf.Buffer
	e.manager(t, func(o *sandbox.Options) {
		o.Pool.ReadyDeadline, o.Pool.Resync = 3*time.Second, 200*time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	seen := map[string]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		for _, pod := range e.members(t) {
			seen[pod.Name] = true
		}
		if len(seen) >= 2 && strings.Contains(log.String(), "not Ready within 3s") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members seen %v in 2m, none replaced for not being Ready; log:\n%s", seen, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var first string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "warm pool member removed") && strings.Contains(l, "not Ready within 3s") {
			_, rest, _ := strings.Cut(l, "pod="+e.ns+"/")
			first, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	if first == "" || !seen[first] {
		t.Fatalf("the removal does not name a member seen (%v):\n%s", seen, log.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := podwait.Gone(ctx, e.c.Client(), e.ns, first); err != nil {
		t.Errorf("the member not Ready in time is not deleted: %v", err)
	}
}

// missingImage is an image of the env's registry that nobody pushed.
func missingImage(p pushed) string { return p.Registry + "/no-such-image:1" }
