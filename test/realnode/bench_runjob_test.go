//go:build integration

package realnode

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/result"
)

// runJobSamples is how many times BenchmarkRunJob measures each figure: the
// kubelet's relist adds 0–1 s at random to each, so more than samples.
const runJobSamples = 16

// relistJitter sleeps a uniformly random part of the kubelet's relist
// period (1 s) before a create. The kubelet reports a started container
// only at its next relist: a create made just after the benchmark saw the
// previous pod Running (itself just after a relist) would always find the
// relist at the same phase, and a pod that starts within that phase would
// look a whole relist faster than one that does not.
func relistJitter() { time.Sleep(rand.N(time.Second)) }

// jobPeer is one bare client-go Job that BenchmarkRunJob creates beside
// each of pcsync's runs, and its measures.
type jobPeer struct {
	name, what string
	spec       func(tmpl, plain corev1.PodSpec) corev1.PodSpec
	took       []time.Duration
	ph         phases
}

// runJobPeers are the pod specs pcsync's Job's pod start is compared with:
// its own template, a plain pod, and the steps between them, which show
// where the kubelet's time goes.
func runJobPeers() []*jobPeer {
	return []*jobPeer{
		{name: "same", what: "the same pod template", spec: func(tmpl, _ corev1.PodSpec) corev1.PodSpec { return tmpl }},
		{name: "plain", what: "a plain pod (sleep, no Secret, no volumes)", spec: func(_, plain corev1.PodSpec) corev1.PodSpec { return plain }},
		{name: "plain-emptydir", what: "the plain pod with one emptyDir mounted", spec: func(_, plain corev1.PodSpec) corev1.PodSpec {
			withScratch(&plain)
			return plain
		}},
		{name: "plain-token", what: "the plain pod with its ServiceAccount's token mounted, as `kubectl create job` makes it", spec: func(_, plain corev1.PodSpec) corev1.PodSpec {
			yes := true
			plain.AutomountServiceAccountToken, plain.ServiceAccountName = &yes, "default"
			return plain
		}},
		{name: "nosecret", what: "its template without its Secret volume", spec: func(tmpl, _ corev1.PodSpec) corev1.PodSpec { return withoutVolumes(tmpl, true) }},
		{name: "novolumes", what: "its template without any volume", spec: func(tmpl, _ corev1.PodSpec) corev1.PodSpec { return withoutVolumes(tmpl, false) }},
	}
}

// withoutVolumes is spec without its Secret volumes (secretOnly) or without
// any volume; its containers sleep, as the CLI cannot start without them.
func withoutVolumes(spec corev1.PodSpec, secretOnly bool) corev1.PodSpec {
	spec = *spec.DeepCopy()
	drop := map[string]bool{}
	vols := spec.Volumes[:0]
	for _, v := range spec.Volumes {
		if !secretOnly || v.Secret != nil {
			drop[v.Name] = true
			continue
		}
		vols = append(vols, v)
	}
	spec.Volumes = vols
	for i := range spec.Containers {
		mounts := spec.Containers[i].VolumeMounts[:0]
		for _, m := range spec.Containers[i].VolumeMounts {
			if !drop[m.Name] {
				mounts = append(mounts, m)
			}
		}
		spec.Containers[i].VolumeMounts = mounts
		spec.Containers[i].Command, spec.Containers[i].Args = []string{"sleep", "3600"}, nil
	}
	return spec
}

// createBareJob creates a Job of spec after relistJitter and returns when it
// was sent; its pod is labelled bench-job=name.
func createBareJob(b *testing.B, c *testcluster.Cluster, ns, name string, spec corev1.PodSpec) time.Time {
	b.Helper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	job.Spec.BackoffLimit = new(int32)
	// `sleep` as PID 1 ignores SIGTERM: without a short grace, each deleted
	// peer's pod would hold its requests for 30 s, and the later peers of
	// a round would wait for room on the node.
	spec.TerminationGracePeriodSeconds = ptr.To(int64(1))
	job.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"bench-job": name}}, Spec: spec}
	relistJitter()
	begin := time.Now()
	if _, err := c.Client().BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return begin
}

func deleteBareJob(b *testing.B, c *testcluster.Cluster, ns, name string) {
	b.Helper()
	bg := metav1.DeletePropagationBackground
	if err := c.Client().BatchV1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		b.Fatal(err)
	}
}

// runJobFigures are BenchmarkRunJob's measures of one round.
type runJobFigures struct {
	image                                     string // the agent image, for the plain pods
	drop                                      []time.Duration
	dropPhases                                phases
	peers                                     []*jobPeer
	whole, wholePeer                          []time.Duration
	exitToResult, kubeletToResult, exitFollow []time.Duration
}

// BenchmarkRunJob: spool drop → the Job's pod Running against bare
// client-go Jobs (the same template, a plain pod, and steps between) →
// their pod Running; a whole run of a 1 s agent, drop → result, against a
// bare Job of a plain pod running `sleep 1`, create → its exit seen; and the
// agent container's exit (pcsync init's record) → the result written.
// Every create waits a random part of the kubelet's relist first
// (relistJitter).
func BenchmarkRunJob(b *testing.B) {
	p := pushImages(b)
	e := newRunEnv(b, p.Registry, 3)
	e.serve()
	running := podsRunning(b, e.c, e.ns)
	image := images.Ref(p.Registry, images.Agent("claude"), imageTag)
	// A warm-up round, not counted: the first run's pod pulls the image.
	warm := &runJobFigures{image: image, peers: runJobPeers()}
	e.benchPodStart(b, running, warm, -1, 0)
	e.benchWholeRun(b, running, warm, -1, 0)
	for n := range b.N {
		f := &runJobFigures{image: image, peers: runJobPeers()}
		for i := range runJobSamples {
			e.benchPodStart(b, running, f, n, i)
			e.benchWholeRun(b, running, f, n, i)
			e.benchExitToResult(b, running, f, n, i)
		}
		f.report(b, e, n)
	}
}

// benchPodStart measures one spool drop → the Job's pod Running, and each
// peer's bare Job → its pod Running.
func (e *runEnv) benchPodStart(b *testing.B, running *runningPods, f *runJobFigures, n, i int) {
	ctx := context.Background()
	name := fmt.Sprintf("long-%d-%d", n, i)
	relistJitter()
	begin := time.Now()
	e.drop(name, "no-handler", nil)
	pt := running.wait(b, agentpod.LabelRunID, name)
	f.drop = append(f.drop, pt.running.Sub(begin))
	f.dropPhases.add(begin, pt)
	// The peers are created while the run (and its Secret) exists.
	pj, err := e.c.Client().BatchV1().Jobs(e.ns).Get(ctx, pt.pod.Labels["batch.kubernetes.io/job-name"], metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	plain := plainPod(e.c.RealNode(), e.ns, "", f.image, "sleep", "3600").Spec
	for _, peer := range f.peers {
		job := fmt.Sprintf("%s-%d-%d", peer.name, n, i)
		begin := createBareJob(b, e.c, e.ns, job, peer.spec(*pj.Spec.Template.Spec.DeepCopy(), *plain.DeepCopy()))
		pt := running.wait(b, "bench-job", job)
		peer.took = append(peer.took, pt.running.Sub(begin))
		peer.ph.add(begin, pt)
		deleteBareJob(b, e.c, e.ns, job)
	}
	if err := os.WriteFile(filepath.Join(e.spool, name+".cancel"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	e.result(name)
}

// benchWholeRun measures a whole run of a 1 s agent, drop → result file,
// and a bare Job of a plain pod that sleeps 1 s under pcsync init, create →
// the watch sees its container ended.
func (e *runEnv) benchWholeRun(b *testing.B, running *runningPods, f *runJobFigures, n, i int) {
	name := fmt.Sprintf("one-%d-%d", n, i)
	relistJitter()
	begin := time.Now()
	e.drop(name, "please succeed-in-1s", nil)
	if r := e.result(name); r.Status != result.StatusSucceeded {
		b.Fatalf("run %s: %s %s", name, r.Status, deref(r.ErrorMessage))
	}
	st, err := os.Stat(filepath.Join(e.spool, name+result.Suffix))
	if err != nil {
		b.Fatal(err)
	}
	f.whole = append(f.whole, st.ModTime().Sub(begin))

	job := fmt.Sprintf("sleep1-%d-%d", n, i)
	spec := plainPod(e.c.RealNode(), e.ns, "", f.image, images.ServerPath, "init", "--", "sleep", "1").Spec
	begin = createBareJob(b, e.c, e.ns, job, spec)
	f.wholePeer = append(f.wholePeer, running.waitEnded(b, "bench-job", job).ended.Sub(begin))
	deleteBareJob(b, e.c, e.ns, job)
}

// benchExitToResult measures the agent's exit (pcsync init's record) → the
// result written, for a run shorter than a relist and one that outlives it.
func (e *runEnv) benchExitToResult(b *testing.B, running *runningPods, f *runJobFigures, n, i int) {
	for _, run := range []struct{ prefix, prompt string }{{"ok", "please succeed"}, {"later", "please succeed-later"}} {
		name := fmt.Sprintf("%s-%d-%d", run.prefix, n, i)
		e.drop(name, run.prompt, nil)
		r := e.result(name)
		if r.Status != result.StatusSucceeded || r.FinishedAt == nil {
			b.Fatalf("run %s: %s %s", name, r.Status, deref(r.ErrorMessage))
		}
		st, err := os.Stat(filepath.Join(e.spool, name+result.Suffix))
		if err != nil {
			b.Fatal(err)
		}
		if run.prefix == "later" {
			f.exitFollow = append(f.exitFollow, st.ModTime().Sub(*r.FinishedAt))
			continue
		}
		f.exitToResult = append(f.exitToResult, st.ModTime().Sub(*r.FinishedAt))
		f.kubeletToResult = append(f.kubeletToResult, st.ModTime().Sub(running.waitEnded(b, agentpod.LabelRunID, name).ended))
	}
}

// report prints round n's figures; with the kubelet's log at --v=4
// (testcluster.KubeletVerbosityEnv), each pod start's kubelet steps too.
func (f *runJobFigures) report(b *testing.B, e *runEnv, n int) {
	timelines, err := kubeletTimelines(e.c)
	if err != nil {
		b.Fatal(err)
	}
	kubelet := func(prefix string) string {
		if len(timelines) == 0 {
			return "the kubelet's steps: set " + testcluster.KubeletVerbosityEnv + "=4"
		}
		re := regexp.MustCompile("^" + regexp.QuoteMeta(e.ns+"/"+prefix) + fmt.Sprintf("-%d-[0-9]+-", n))
		return kubeletShares(timelines, re.MatchString)
	}
	ours := kubelet(e.slug + "-coder-long")
	for _, peer := range f.peers {
		report(b, "drop-to-running-"+peer.name, fmt.Sprintf("spool drop → Job's pod Running vs a bare client-go Job of %s → pod Running (p50 of each phase: pcsync %s; bare Job %s. pcsync's pod: %s; bare Job's: %s)",
			peer.what, &f.dropPhases, &peer.ph, ours, kubelet(peer.name)), f.drop, peer.took)
	}
	report(b, "whole-run-1s", "a whole run of a 1 s agent, spool drop → result written vs a bare Job of a plain pod running `pcsync init -- sleep 1`, create → its container's exit seen", f.whole, f.wholePeer)
	report(b, "exit-to-result", "agent exits before the kubelet reports it Running → result written", f.exitToResult, nil)
	report(b, "kubelet-end-to-result", "the kubelet reports the short run's container ended → result written (negative: the result came first)", f.kubeletToResult, nil)
	report(b, "exit-to-result-followed", "agent of a 3 s run exits → result written", f.exitFollow, nil)
}
