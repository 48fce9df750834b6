//go:build integration

package realnode

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/sandbox"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// helperSamples is how many times BenchmarkLeaseForeignImage measures each
// side: the kubelet's relist phase spreads one pod start over a second.
const helperSamples = 12

// BenchmarkLeaseForeignImage: acquire → ready of a lease of an image that
// pcsync does not know to hold pcsync (so the pod gets it from pcsync's own
// image) against create → Running of the same pod spec with pcsync in the
// image (leasepod.BuildPod's pod of the lease's record, the image's own
// pcsync its PID 1, without pcsync's labels so that no daemon adopts it).
// Before each create, both sides wait a uniformly random delay in [0, 1 s):
// the kubelet relists its containers every second, and a create made right
// after the previous pod was seen running would be locked to that phase.
func BenchmarkLeaseForeignImage(b *testing.B) {
	p := pushImages(b)
	e := newLeaseEnv(b, p)
	c := e.c
	ctx := context.Background()
	co, _ := e.model.Company(e.slug)
	for range b.N {
		var acquire, plain []time.Duration
		for i := range helperSamples {
			name := fmt.Sprintf("peer-%d-%d", time.Now().UnixNano()%1e6, i)
			r := &leasepod.Record{ID: name, Namespace: e.ns, Company: co.Slug(), Image: p.Foreign, Agent: "pinned",
				Server: images.ServerPath, Socket: leasepod.PodRunDir + "/sandbox.sock", ExpiresAt: time.Now().Add(time.Hour)}
			pod, err := leasepod.BuildPod(r, e.model)
			if err != nil {
				b.Fatal(err)
			}
			pod.Labels, pod.Annotations = nil, nil
			sides := []func(){
				func() {
					relistJitter()
					begin := time.Now()
					if _, err := c.Client().CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
						b.Fatal(err)
					}
					waitPodState(ctx, b, c, e.ns, name, false)
					plain = append(plain, time.Since(begin))
					if err := c.Client().CoreV1().Pods(e.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						b.Fatal(err)
					}
					waitPodState(ctx, b, c, e.ns, name, true)
				},
				func() {
					relistJitter()
					begin := time.Now()
					info, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slug, Image: p.Foreign},
						AdapterType: "claude_local", AgentID: pinnedAgentID})
					if err != nil {
						b.Fatal(err)
					}
					acquire = append(acquire, time.Since(begin))
					if r := e.exec(b, info.ID, sandbox.ExecParams{Command: "true"}); code(r) != 0 {
						b.Fatalf("true: exit %d", code(r))
					}
					if _, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: info.ID}); err != nil {
						b.Fatal(err)
					}
				},
			}
			// Alternate which side goes first, so that neither always
			// follows the other's teardown.
			if i%2 == 1 {
				sides[0], sides[1] = sides[1], sides[0]
			}
			sides[0]()
			sides[1]()
		}
		b.Logf("acquire → ready, ms, sorted: %v", sortedMs(acquire))
		b.Logf("the same pod spec, create → Running, ms, sorted: %v", sortedMs(plain))
		report(b, "acquire-foreign-image", "lease of an image without pcsync, acquire → ready vs the same pod spec with pcsync in the image, create → Running",
			acquire, plain)
	}
}

// sortedMs is ds in whole milliseconds, sorted.
func sortedMs(ds []time.Duration) []int64 {
	out := make([]int64, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Milliseconds())
	}
	slices.Sort(out)
	return out
}
