//go:build integration

package realnode

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// keptCore is the environment's Paperclip fields of a lease kept between
// runs (reuseLease, runnerLifecycleMode warm).
var keptCore = map[string]any{"reuseLease": true, "runnerLifecycleMode": "warm"}

// keptSpec suspends the company's kept leases after idleSec on the real
// node's StorageClass (local-path), with a quota of claims of 1Gi.
func keptSpec(idleSec int, class string, claims int) string {
	return "  quota: {persistentVolumeClaims: " + strconv.Itoa(claims) + ", requestsStorage: " + strconv.Itoa(claims) + "Gi}\n" +
		"  sandbox: {suspend: {idleSec: " + strconv.Itoa(idleSec) + ", size: 1Gi, storageClassName: " + class + "}}\n"
}

// keptWorkspace fills a lease's /workspace with about 100 MB in 10,000
// files (9,728 of 10 KiB of random bytes), a git repository of 250 files
// with a commit and a staged change, modes, symbolic links and an empty
// directory, and its HOME with a CLI's session files.
const keptWorkspace = `set -e
cd /workspace
mkdir -p data repo empty/inner bin
dd if=/dev/urandom of=/tmp/blob bs=1M count=95 2>/dev/null
(cd data && split -a 4 -d -b 10240 /tmp/blob f)
rm /tmp/blob
i=0; while [ $i -lt 250 ]; do echo "line $i" > repo/src$i.txt; i=$((i+1)); done
git -C repo init -q
git -C repo add -A
git -C repo -c user.email=t@example.com -c user.name=t commit -qm init
echo changed >> repo/src1.txt
git -C repo add repo/src1.txt 2>/dev/null || git -C repo add src1.txt
printf '#!/bin/sh\necho tool\n' > bin/tool; chmod 0755 bin/tool; chmod 0600 data/f0000
ln -s ../data/f0001 bin/link; ln -s /nowhere bin/dangling
mkdir -p "$HOME/.claude/projects/-workspace"
echo '{"type":"session","id":"s-1"}' > "$HOME/.claude/projects/-workspace/s-1.jsonl"
echo '{"theme":"dark"}' > "$HOME/.claude.json"
find /workspace -type f | wc -l`

// treeSum prints one checksum of /workspace and HOME: every entry's path,
// type, mode and link target, and every file's content.
const treeSum = `cd / && { find workspace home -printf '%p %y %m %l\n' | LC_ALL=C sort; \
find workspace home -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-64`

// A kept lease on the real node with a workspace of 100 MB in 10,000 files
// (a git repository among them) and a CLI session in HOME: idle for its
// idleSec, its pod is deleted and its claim (local-path) kept; the next
// execute resumes it on a new pod that mounts the claim, with the tree's
// checksum the same (paths, types, modes, links, contents), git's index
// intact, and a command that runs; release deletes pod and claim.
func TestKeptLeaseOnRealNode(t *testing.T) {
	p := pushImages(t)
	e := newLeaseEnvSpec(t, p, nil, func(o *sandbox.Options) { o.SuspendCheck = 500 * time.Millisecond },
		keptSpec(30, testcluster.LocalPathStorageClass, 4))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	info := e.acquire(ctx, t, sandbox.EnvironmentConfig{Core: keptCore, LeaseTTLSec: 3600}, "run-1")
	cs := e.c.Client()
	first, err := cs.CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := e.execLong(t, info.ID, keptWorkspace)
	if n, _ := strconv.Atoi(strings.TrimSpace(r.Stdout)); code(r) != 0 || n < 10000 {
		t.Fatalf("workspace: exit %d stdout %q stderr %q", code(r), r.Stdout, r.Stderr)
	}
	before := e.execLong(t, info.ID, treeSum)
	gitBefore := e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", "git -C /workspace/repo status --porcelain; git -C /workspace/repo rev-parse HEAD"}})

	// Idle: the pod goes, the claim stays.
	idleFrom := time.Now()
	waitPodGone(ctx, t, e, info.ID)
	t.Logf("suspended %s after %s idle", info.ID, time.Since(idleFrom).Round(time.Second))
	pvc, err := cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, info.ID, metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("the suspended lease's claim: %v %v", pvc, err)
	}

	// The next execute resumes it.
	began := time.Now()
	after := e.execLong(t, info.ID, treeSum)
	t.Logf("resume → the first execute answered: %s", time.Since(began).Round(time.Millisecond))
	if code(before) != 0 || after.Stdout != before.Stdout || len(strings.TrimSpace(before.Stdout)) != 64 {
		t.Errorf("tree checksum before %q (exit %d), after the resume %q (stderr %q)", before.Stdout, code(before), after.Stdout, after.Stderr)
	}
	gitAfter := e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", "git -C /workspace/repo status --porcelain; git -C /workspace/repo rev-parse HEAD"}})
	if gitAfter.Stdout != gitBefore.Stdout || !strings.Contains(gitBefore.Stdout, "M  src1.txt") {
		t.Errorf("git before %q, after %q", gitBefore.Stdout, gitAfter.Stdout)
	}
	run := e.exec(t, info.ID, sandbox.ExecParams{Command: "/workspace/bin/tool"})
	if run.Stdout != "tool\n" {
		t.Errorf("a command after the resume: %q %q", run.Stdout, run.Stderr)
	}
	again, err := cs.CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{})
	if err != nil || again.UID == first.UID {
		t.Errorf("the resumed pod: %v (first %s)", err, first.UID)
	}

	if _, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: info.ID, Cancel: true}); err != nil {
		t.Fatal(err)
	}
	if pvc, err := cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, info.ID, metav1.GetOptions{}); err == nil && pvc.DeletionTimestamp == nil {
		t.Errorf("the released lease's claim is still there")
	}
}

// execLong runs script in the lease with sh -c, allowing it minutes.
func (e *leaseEnv) execLong(t testing.TB, id, script string) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := e.m.Execute(ctx, sandbox.ExecParams{LeaseID: id, Command: "sh", Args: []string{"-c", script}}, nil)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	return r
}

// waitPodGone waits until the lease's pod is gone.
func waitPodGone(ctx context.Context, t testing.TB, e *leaseEnv, id string) {
	t.Helper()
	for {
		_, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the pod of lease %s is still there: %v", id, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
