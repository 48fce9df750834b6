//go:build integration

package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/imagebuild"
	"github.com/pcsync/pcsync/internal/paperclipinstall"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testimages"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/result"
)

const (
	// paperclipNamespace is deploy/paperclip's namespace.
	paperclipNamespace = "paperclip"
	// paperclipImage is the name of Paperclip's published image, which
	// deploy/paperclip runs (pinned to imagebuild.PaperclipVersion).
	paperclipImage = "ghcr.io/paperclipai/paperclip"
)

// pushPaperclip builds the stand-in of Paperclip's published image
// (imagebuild.PaperclipStandIn: paperclipai from npm on pcsync's base, with
// the published image's user, data directory, port and environment) and
// pushes it to the real node's registry as ref.
func pushPaperclip(t *testing.T, reg *testcluster.Registry, ref string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	built, err := testimages.Build(ctx, []string{images.Base}, imageTag)
	if err != nil {
		t.Fatal(err)
	}
	o := imagebuild.DefaultOptions()
	o.Version = imageTag
	start := time.Now()
	img, err := imagebuild.PaperclipStandIn(ctx, o, built[images.Base], imagebuild.PaperclipVersion)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Push(ctx, ref, img); err != nil {
		t.Fatal(err)
	}
	t.Logf("Paperclip stand-in %s built and pushed in %s", ref, time.Since(start).Round(time.Millisecond))
}

// mirrorImage is where the test pushes the stand-in of the public image
// that deploy/ names as ref: the real node's containerd pulls it from its
// registry (testcluster.RealNode.MirrorRef).
func mirrorImage(t *testing.T, node *testcluster.RealNode, ref string) string {
	t.Helper()
	m, ok := node.MirrorRef(ref)
	if !ok {
		t.Fatalf("the real node mirrors no registry of %s", ref)
	}
	return m
}

// retagStandIns pushes the stand-in images of pushImages (p.Registry) again
// with tag, the version of the pcsync that make images built: the daemon
// looks its agents' images up at its own version.
func retagStandIns(t *testing.T, reg *testcluster.Registry, p pushed, tag string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{images.Agent("claude"), images.Pcsync} {
		img, err := reg.Image(ctx, images.Ref(p.Registry, name, imageTag))
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Push(ctx, images.Ref(p.Registry, name, tag), img); err != nil {
			t.Fatal(err)
		}
	}
}

// readyAfterCreate is how long after its Deployment's creation the pod
// became Ready (the API's 1 s resolution).
func readyAfterCreate(ctx context.Context, t *testing.T, c *testcluster.Cluster, pod corev1.Pod) time.Duration {
	t.Helper()
	d, err := c.Client().AppsV1().Deployments(paperclipNamespace).Get(ctx, "paperclip-server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.LastTransitionTime.Sub(d.CreationTimestamp.Time)
		}
	}
	return 0
}

// deploy/paperclip applied as its README's walkthrough has a user apply it,
// word for word (make images, an overlay setting pcsync's image, the config
// repository and the public URL, kubectl apply -k), on the real node, with
// the public images deploy/ names taken from the node's mirror: the stand-in
// of Paperclip's published image (pushPaperclip) and git-sync's substitute
// (pushGitSync). The pod (Paperclip, pcsync, git-sync) becomes Ready and the
// sidecar applies the Company committed to Git, and a new commit's Company
// after it; a replaced pod starts on the same data, keeping the
// BETTER_AUTH_SECRET its init container made once; a claude_local agent
// declared in Git runs in pcsync's sandbox on the real node.
func TestPaperclipOverlay(t *testing.T) {
	c, node, _, _ := deployNode(t)
	p := pushImages(t)
	const server = "deploy/paperclip/paperclip-server.yaml"
	pushGitSync(t, node.Registry(), mirrorImage(t, node, deployImage(t, server, gitSyncImage)))
	pushPaperclip(t, node.Registry(), mirrorImage(t, node, deployImage(t, server, paperclipImage)))
	tag := makeVersion(t)
	retagStandIns(t, node.Registry(), p, tag)
	c.OnlyRealNode(t)
	// A bound for a hung test, not a timed assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	prefix := "pc-" + randomSuffix(t) + "-"
	tenant := prefix + "acme"
	apiHost, _ := node.APIServerHost()
	repo := newGitServer(t, apiHost)
	repo.commit("settings and acme", map[string]string{
		"settings.yaml": overlaySettings(t, prefix, p.Registry, false),
		"acme.yaml":     gitSyncCompany(t, node, "acme"),
	})
	hostVolume(t, c, paperclipNamespace, "paperclip-data", corev1.ReadWriteOnce)
	spool := hostVolume(t, c, paperclipNamespace, "paperclip-spool", corev1.ReadWriteOnce)

	objs := paperclipWalkthrough(repo.url).follow(t, c, node.Registry().Host()+"/walkthrough")
	t.Cleanup(func() {
		cleanupDeployment(t, c, objs, tenant)
		deleteNamespace(t, c, prefix+"initech")
		deleteNamespace(t, c, prefix+"globex")
	})
	pods, err := waitDeploymentReady(ctx, c, paperclipNamespace, "paperclip-server", 1)
	if err != nil {
		t.Fatalf("Deployment %s/paperclip-server: %v\n%s", paperclipNamespace, err, podsReport(c, paperclipNamespace))
	}
	t.Logf("deploy/paperclip: pod %s Ready (paperclip, pcsync, git-sync) %s after its Deployment was created",
		pods[0].Name, readyAfterCreate(ctx, t, c, pods[0]))
	checkSelfInstall(ctx, t, c, pods[0].Name, "adapter installed")
	if err := waitNamespace(ctx, c, tenant); err != nil {
		t.Fatalf("tenant %s of the Company committed to Git: %v\n%s", tenant, err, podsReport(c, paperclipNamespace))
	}
	t.Logf("tenant %s applied by the sidecar", tenant)

	// A new commit: git-sync swaps its link, the sidecar reconciles.
	second := prefix + "initech"
	pushed := time.Now()
	hash := repo.commit("add initech", map[string]string{"initech.yaml": gitSyncCompany(t, node, "initech")})
	if err := waitNamespace(ctx, c, second); err != nil {
		t.Fatalf("tenant %s of commit %s: %v\n%s", second, hash, err, podsReport(c, paperclipNamespace))
	}
	t.Logf("commit %.12s → tenant %s applied by the sidecar in %s (GITSYNC_PERIOD %s)", hash, second, time.Since(pushed).Round(time.Millisecond), gitSyncPeriod)

	// Paperclip's first admin wakes a pcsync agent through Paperclip.
	// Its board API key goes into the Secret deploy/paperclip mounts for
	// pcsync, which the next step's pod starts with.
	board := newPaperclipBoard(ctx, t, c, pods[0])
	storeBoardKey(ctx, t, c, board.key)
	agent := checkPcsyncWake(ctx, t, c, board, tenant)

	// The pod replaced while a run is in flight: the next one starts on
	// the same data volume, its init container keeping the
	// BETTER_AUTH_SECRET the first one made and the adapter's record.
	checkAuthSecretLog(ctx, t, c, pods[0].Name, "BETTER_AUTH_SECRET: made in")
	next := checkReplacedMidRun(ctx, t, c, board, agent, pods[0], tenant, spool)
	checkAuthSecretLog(ctx, t, c, next.Name, "BETTER_AUTH_SECRET: kept in")
	checkSelfInstall(ctx, t, c, next.Name, "adapter kept")

	// The stock road: a claude_local agent and pcsync's sandbox
	// environment declared in Git, its CLI in a lease pod on the real node.
	checkSandboxFromGit(ctx, t, c, node, board, repo, prefix, p.Registry, tag)
}

// checkReplacedMidRun replaces deploy/paperclip's pod while a run of a's
// agent runs as a Job (the stand-in runs 25 s), and checks that nothing is
// lost: the new pod's daemon adopts the Job (one Job, one result in the
// spool), Paperclip ends the run its old process lost without booking it,
// and the agent's next wake reports it and books its spend once.
func checkReplacedMidRun(ctx context.Context, t *testing.T, c *testcluster.Cluster, b *paperclipBoard, a paperclipAgent, pod corev1.Pod, tenant, spool string) corev1.Pod {
	t.Helper()
	slow := b.assign(ctx, t, a, "please succeed-slowly")
	if err := waitRunPodRunning(ctx, c, tenant, slow); err != nil {
		t.Fatalf("run %s: %v\n%s", slow, err, podsReport(c, tenant))
	}
	replaced := time.Now()
	if err := c.Client().CoreV1().Pods(paperclipNamespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s: %v", pod.Name, err)
	}
	next, err := waitReplaced(ctx, c, pod.Name)
	if err != nil {
		t.Fatalf("Deployment %s/paperclip-server after its pod was deleted: %v\n%s", paperclipNamespace, err, podsReport(c, paperclipNamespace))
	}
	t.Logf("pod %s replaced mid-run by %s, Ready %s after the delete", pod.Name, next.Name, time.Since(replaced).Round(time.Millisecond))
	b.at(next)
	lost := b.waitRun(ctx, t, slow)
	t.Logf("Paperclip ended the run its old process lost (%s) as %s (%s)", slow, lost.Status, deref(lost.ErrorCode))
	if lost.Status == "succeeded" {
		t.Fatalf("run %s: Paperclip reports it succeeded, but its process was gone before the Job ended", slow)
	}
	b.checkSpend(ctx, t, a, 0, "the lost run not booked by Paperclip itself")
	b.done(ctx, t)
	// Its Job ends in pcsync (the stand-in runs 25 s), and the new daemon
	// writes its result; the agent's next wake reports it.
	lostName := strings.ToLower(slow)
	res, err := waitSpoolResult(ctx, spool, lostName)
	if err != nil {
		t.Fatalf("run %s: %v\n%s", slow, err, podsReport(c, tenant))
	}
	if res.Status != result.StatusSucceeded {
		t.Errorf("run %s: pcsync's result %s (%s), want succeeded", slow, res.Status, deref(res.ErrorMessage))
	}

	after := b.waitRun(ctx, t, b.assign(ctx, t, a, "please succeed"))
	if after.Status != "succeeded" {
		t.Fatalf("the next run %s: %s (%s)", after.ID, after.Status, deref(after.Error))
	}
	log := b.runLog(ctx, t, after.ID)
	for _, w := range []string{"run " + lostName + " of this agent finished in pcsync while Paperclip was not waiting",
		"booked the spend of run " + lostName + " in Paperclip"} {
		if !strings.Contains(log, w) {
			t.Errorf("the log of run %s does not say %q:\n%.3000s", after.ID, w, log)
		}
	}
	b.checkSpend(ctx, t, a, 5, "and the lost run's $0.05 once")
	if jobs := runJobs(ctx, t, c, tenant, slow); len(jobs) != 1 {
		t.Errorf("run %s: Jobs %v, want the one the new daemon adopted", slow, jobs)
	}
	files, _ := filepath.Glob(filepath.Join(spool, "*"+lostName+"*"+result.Suffix))
	if len(files) != 1 {
		t.Errorf("run %s: result files %v in the spool, want one", slow, files)
	}
	return next
}

// waitSpoolResult waits for the result file of the run named name in the
// spool (the adapter's request is named after the run), and reads it.
func waitSpoolResult(ctx context.Context, spool, name string) (result.RunResult, error) {
	for {
		files, _ := filepath.Glob(filepath.Join(spool, "*"+name+"*"+result.Suffix))
		if len(files) == 1 {
			return result.Read(files[0])
		}
		select {
		case <-ctx.Done():
			return result.RunResult{}, fmt.Errorf("no result in the spool (%v): %w", files, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitRunPodRunning waits for the pod of a Paperclip run's Job to run.
func waitRunPodRunning(ctx context.Context, c *testcluster.Cluster, tenant, runID string) error {
	sel := metav1.ListOptions{LabelSelector: "paperclip.io/run-id=" + strings.ToLower(runID)}
	for {
		l, err := c.Client().CoreV1().Pods(tenant).List(ctx, sel)
		if err == nil && len(l.Items) > 0 && l.Items[0].Status.Phase == corev1.PodRunning {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("its Job's pod is not running: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// checkSelfInstall checks, in a Ready pod's logs, that pcsync installed
// itself into Paperclip: the init container pcsync-paperclip-install
// logged action for the adapter, Paperclip loaded the adapter and
// activated the plugin from the paths it was given, and pcsync's
// PaperclipLoaded condition turned true from their hellos, at the
// versions in place. The condition does not gate readiness, so the
// hellos may come after the pod is Ready: each log is read again until it
// says so (a wait bounded by a minute, not a timed assertion).
func checkSelfInstall(ctx context.Context, t *testing.T, c *testcluster.Cluster, pod, action string) {
	t.Helper()
	logs := func(container, want string) string {
		var out []byte
		for deadline := time.Now().Add(time.Minute); ; {
			var err error
			out, err = c.Client().CoreV1().Pods(paperclipNamespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
			if err != nil {
				t.Errorf("pod %s: logs of %s: %v", pod, container, err)
			}
			if err != nil || strings.Contains(string(out), want) || time.Now().After(deadline) {
				return string(out)
			}
			time.Sleep(time.Second)
		}
	}
	adapter := readPackage(t, "../../integrations/paperclip/package.json")
	plugin := readPackage(t, "../../integrations/paperclip-sandbox/package.json")
	for _, w := range []struct{ container, want string }{
		{"pcsync-paperclip-install", `"msg":"` + action + `"`},
		{"pcsync-paperclip-install", `"version":"` + adapter.Version + `"`},
		{"paperclip", `Loaded external adapters from plugin store`},
		{"paperclip", `/pcsync-paperclip/adapter`},
		{"paperclip", `plugin activated successfully`},
		{"pcsync", fmt.Sprintf("Paperclip loaded pcsync's adapter %s %s and plugin %s %s", adapter.Name, adapter.Version, plugin.Name, plugin.Version)},
	} {
		if got := logs(w.container, w.want); !strings.Contains(got, w.want) {
			t.Errorf("pod %s: container %s logged no %q:\n%s", pod, w.container, w.want, testcluster.LastLines(got, 40))
		}
	}
}

// readPackage reads an npm package's name and version.
func readPackage(t *testing.T, path string) paperclipinstall.Package {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p paperclipinstall.Package
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// checkAuthSecretLog checks that a pod's init container
// paperclip-auth-secret logged want.
func checkAuthSecretLog(ctx context.Context, t *testing.T, c *testcluster.Cluster, pod, want string) {
	t.Helper()
	log, err := c.Client().CoreV1().Pods(paperclipNamespace).GetLogs(pod, &corev1.PodLogOptions{Container: "paperclip-auth-secret"}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(log), want) {
		t.Errorf("pod %s: init container paperclip-auth-secret logged %q (%v), want %q", pod, log, err, want)
	}
}

// waitReplaced waits for the Deployment paperclip-server to have one Ready
// pod other than old, and returns it.
func waitReplaced(ctx context.Context, c *testcluster.Cluster, old string) (corev1.Pod, error) {
	for {
		pods, err := waitDeploymentReady(ctx, c, paperclipNamespace, "paperclip-server", 1)
		if err != nil {
			return corev1.Pod{}, err
		}
		if pods[0].Name != old {
			return pods[0], nil
		}
		select {
		case <-ctx.Done():
			return corev1.Pod{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
