//go:build integration

package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testimages"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/result"
)

const (
	// gitSyncImage is the image deploy/base's git-sync container names,
	// without its tag.
	gitSyncImage = "registry.k8s.io/git-sync/git-sync"
	// gitSyncPeriod is GITSYNC_PERIOD in the test's overlay.
	gitSyncPeriod = 3 * time.Second
	// baseNamespace is deploy/base's namespace, kept as it is.
	baseNamespace = "pcsync-system"
)

// pushGitSync builds the git-sync substitute (testdata/git-sync-substitute.sh:
// Debian's git on pcsync's base image; k8s.io/git-sync's module is not served
// by the Go module proxy, so git-sync itself cannot be built here) with it as
// the image's entrypoint, pushes it to the real node's registry as ref and
// returns ref.
func pushGitSync(t *testing.T, reg *testcluster.Registry, ref string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := testimages.DefaultStandInOptions()
	o.Tag, o.User = imageTag, "65533:65533"
	o.Files = map[string]string{"usr/local/bin/git-sync": mustRead("testdata/git-sync-substitute.sh")}
	o.Entrypoint = []string{"/usr/bin/tini", "--", "/usr/local/bin/git-sync"}
	if _, err := testimages.StandIn(ctx, reg, ref, o); err != nil {
		t.Fatal(err)
	}
	return ref
}

// deploy/base applied as docs/how-to/install.md's walkthrough has a user apply it,
// word for word (make images, an overlay setting pcsync's image and the
// config repository, kubectl apply -k), its git-sync following a Git
// repository that the test serves (Git's http-backend): both replicas
// become Ready with git-sync beside pcsync, the leader applies the Company
// committed to Git, a second commit is picked up through git-sync's
// symlink swap, and a run dropped into the spool volume (a PersistentVolume
// the test provides for deploy/base's claim) becomes a Job on the real node
// whose result the daemon writes beside it; pcsync get companies shows the
// commit the daemon applied to each company. git-sync is the substitute of
// pushGitSync, at the image deploy/base names (the node's mirror).
func TestDeployBaseGitSync(t *testing.T) {
	c, node, apiHost, _ := deployNode(t)
	p := pushImages(t)
	pushGitSync(t, node.Registry(), mirrorImage(t, node, deployImage(t, "deploy/base/deployment.yaml", gitSyncImage)))
	retagStandIns(t, node.Registry(), p, makeVersion(t))
	c.OnlyRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	prefix := "gs-" + randomSuffix(t) + "-"
	first, second := prefix+"acme", prefix+"initech"
	repo := newGitServer(t, apiHost)
	repo.commit("settings and acme", map[string]string{
		"settings.yaml": gitSyncDoc(t, "Settings", "fleet", map[string]any{
			"namespacePrefix": prefix, "images": map[string]any{"registry": p.Registry}}),
		"acme.yaml": gitSyncCompany(t, node, "acme"),
	})
	spoolDir := hostVolume(t, c, baseNamespace, "pcsync-spool", corev1.ReadWriteMany)

	objs := baseWalkthrough(repo.url).follow(t, c, node.Registry().Host()+"/walkthrough")
	t.Cleanup(func() {
		cleanupDeployment(t, c, objs, first)
		deleteNamespace(t, c, second)
	})
	start := time.Now()
	pods, err := waitDeploymentReady(ctx, c, baseNamespace, "pcsync", 2)
	if err != nil {
		t.Fatalf("Deployment %s/pcsync: %v\n%s", baseNamespace, err, podsReport(c, baseNamespace))
	}
	t.Logf("deploy/base: 2 replicas Ready (pcsync and git-sync) after the walkthrough")
	for _, pod := range pods {
		if _, _, body, err := waitReadyz(ctx, c, baseNamespace, pod.Name); err != nil {
			t.Fatalf("pod %s: /readyz: %v; last answer %s\n%s", pod.Name, err, body, podLogs(c, baseNamespace, pod.Name))
		}
	}
	if err := waitNamespace(ctx, c, first); err != nil {
		t.Fatalf("tenant %s of the Company committed to Git: %v\n%s", first, err, podsReport(c, baseNamespace))
	}
	t.Logf("tenant %s (committed before apply) applied %s after the walkthrough", first, time.Since(start).Round(time.Millisecond))

	// A new commit: git-sync swaps its link, the daemon reconciles.
	pushed := time.Now()
	hash := repo.commit("add initech", map[string]string{"initech.yaml": gitSyncCompany(t, node, "initech")})
	if err := waitNamespace(ctx, c, second); err != nil {
		t.Fatalf("tenant %s of commit %s: %v\n%s", second, hash, err, podsReport(c, baseNamespace))
	}
	t.Logf("commit %.12s → tenant %s applied in %s (GITSYNC_PERIOD %s)", hash, second, time.Since(pushed).Round(time.Millisecond), gitSyncPeriod)

	// pcsync get companies, as a user runs it, shows the commit the daemon
	// applied to each company, Ready (their CompanyStatus objects).
	table := waitGetCompanies(ctx, t, c, baseNamespace, map[string]string{"acme": hash, "initech": hash})
	t.Logf("pcsync get companies -n %s:\n%s", baseNamespace, table)

	// A run dropped into the spool volume, as the Paperclip server writes it.
	dropped := time.Now()
	dropRun(t, spoolDir, "gs-run-1", "acme", "please succeed")
	r := waitResult(ctx, t, spoolDir, "gs-run-1")
	if r.Status != result.StatusSucceeded {
		t.Fatalf("run gs-run-1: status %s (%s: %s), want succeeded\n%s", r.Status, deref(r.ErrorCode), deref(r.ErrorMessage), podsReport(c, baseNamespace))
	}
	if r.Usage == nil || r.Usage.OutputTokens != 8 || deref(r.CostUSD) != 0.0123 {
		t.Errorf("run gs-run-1: usage %+v cost %v; want the stand-in transcript's (output 8, cost 0.0123)", r.Usage, deref(r.CostUSD))
	}
	job, err := waitJobComplete(ctx, c, first, "gs-run-1")
	if err != nil {
		t.Fatalf("the Job of run gs-run-1: %v\n%s", err, podsReport(c, first))
	}
	t.Logf("run gs-run-1 dropped into the spool → result %s in %s; Job %s Complete", r.Status, time.Since(dropped).Round(time.Millisecond), job.Name)
}

// hostVolume provides the claim ns/claim with a PersistentVolume of access
// mode mode, a directory of this machine (the one node mounts it, for every
// pod that claims it), bound to that claim only; it returns the directory.
// A cluster's storage provides this for a user. The claim names no class, so
// it gets the cluster's default (the real node's local-path) at admission:
// the volume has that class too, or the two would not bind.
func hostVolume(t *testing.T, c *testcluster.Cluster, ns, claim string, mode corev1.PersistentVolumeAccessMode) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	name := claim + "-" + randomSuffix(t)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{mode},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              c.RealNode().StorageClass(),
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: dir, Type: ptr.To(corev1.HostPathDirectory)}},
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Client().CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("PersistentVolume %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// Only a bound claim's deletion releases its finalizer; the volume
		// may outlive the test's namespace for a moment.
		_, _ = c.Client().CoreV1().PersistentVolumes().Patch(ctx, name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err := c.Client().CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete PersistentVolume %s: %v", name, err)
		}
	})
	return dir
}

// gitSyncDoc is one pcsync config document as YAML.
func gitSyncDoc(t *testing.T, kind, name string, spec map[string]any) string {
	t.Helper()
	data, err := yaml.Marshal(map[string]any{"apiVersion": config.APIVersion, "kind": kind,
		"metadata": map[string]any{"name": name}, "spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// gitSyncCompany is a Company whose one agent runs on the real node.
func gitSyncCompany(t *testing.T, node *testcluster.RealNode, slug string) string {
	tol := node.Toleration()
	return gitSyncDoc(t, "Company", slug, map[string]any{"id": "company-" + slug, "agents": []any{map[string]any{
		"name": "coder", "adapter": "claude_local", "model": "claude-sonnet-4-6", "graceSec": 30,
		"nodeSelector": node.NodeSelector(),
		"tolerations":  []any{map[string]any{"key": tol.Key, "operator": string(tol.Operator), "effect": string(tol.Effect)}},
	}}})
}

// waitNamespace waits for a namespace to exist.
func waitNamespace(ctx context.Context, c *testcluster.Cluster, name string) error {
	for {
		_, err := c.Client().CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s: %w: %w", name, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// dropRun writes a run request into the spool the way writers must: a
// hidden file renamed in.
func dropRun(t *testing.T, spool, name, company, prompt string) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"apiVersion": config.APIVersion, "kind": "Run",
		"company": company, "agent": "coder", "prompt": prompt})
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(spool, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(spool, name+".json")); err != nil {
		t.Fatal(err)
	}
}

// waitResult waits for a run's result in the spool.
func waitResult(ctx context.Context, t *testing.T, spool, name string) result.RunResult {
	t.Helper()
	path := filepath.Join(spool, name+result.Suffix)
	for {
		r, err := result.Read(path)
		if err == nil {
			return r
		}
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			log, _ := os.ReadFile(filepath.Join(spool, name+".log"))
			t.Fatalf("no result %s: %v; log %q", path, ctx.Err(), log)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitJobComplete waits for the one Job of a run (label paperclip.io/run-id)
// to be Complete, its pod having run on the real node.
func waitJobComplete(ctx context.Context, c *testcluster.Cluster, ns, run string) (*batchv1.Job, error) {
	var last string // what the last look found
	for {
		jobs, err := c.Client().BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: "paperclip.io/run-id=" + run})
		switch {
		case err != nil:
			last = err.Error()
		case len(jobs.Items) != 1:
			last = fmt.Sprintf("%d Jobs", len(jobs.Items))
		default:
			j := &jobs.Items[0]
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
					return j, nil
				}
			}
			last = fmt.Sprintf("Job %s: %d active, %d succeeded, %d failed", j.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// deleteNamespace deletes a namespace and waits for it to go.
func deleteNamespace(t *testing.T, c *testcluster.Cluster, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Client().CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete namespace %s: %v", name, err)
		return
	}
	for {
		if _, err := c.Client().CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("namespace %s still there after cleanup", name)
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
