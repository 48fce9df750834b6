package inject

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// indexPodIP indexes pods by their IPs.
const indexPodIP = "podIP"

// endedTTL is how long the hash of an ended pod's token is kept, to answer
// its later use with "run_ended" rather than "bad_token".
const endedTTL = 24 * time.Hour

// PodTokens is the Verifier of a tenant's proxy: a token is taken from the
// pod whose IP a request comes from, when that pod is alive and carries the
// token's hash (AnnotationTokenHash). It watches the pods of the proxy's
// own namespace.
type PodTokens struct {
	informer cache.SharedIndexInformer
	now      func() time.Time

	mu    sync.Mutex
	ended map[string]time.Time // token hash → when its pod ended
}

// NewPodTokens returns the Verifier of namespace's pods; Start runs it.
func NewPodTokens(cs kubernetes.Interface, namespace string) *PodTokens {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	p := &PodTokens{informer: f.Core().V1().Pods().Informer(), now: time.Now, ended: map[string]time.Time{}}
	_ = p.informer.AddIndexers(cache.Indexers{indexPodIP: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, nil
		}
		var ips []string
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return ips, nil
	}})
	_, _ = p.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*corev1.Pod); ok && podEnded(pod) {
				p.noteEnded(pod)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				p.noteEnded(pod)
			}
		},
	})
	return p
}

// Start watches the pods until ctx ends, and returns once the first list
// is in.
func (p *PodTokens) Start(ctx context.Context) error {
	go p.informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), p.informer.HasSynced) {
		return fmt.Errorf("credential tokens: pods not listed: %w", context.Cause(ctx))
	}
	return nil
}

// Verify implements Verifier.
func (p *PodTokens) Verify(token string, from netip.Addr) (run, why string) {
	want := []byte(TokenHash(token))
	objs, _ := p.informer.GetIndexer().ByIndex(indexPodIP, from.String())
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if subtle.ConstantTimeCompare([]byte(pod.Annotations[AnnotationTokenHash]), want) != 1 {
			continue
		}
		if podEnded(pod) {
			return pod.Name, OutcomeRunEnded
		}
		return pod.Name, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.ended[string(want)]; ok {
		return "", OutcomeRunEnded
	}
	return "", OutcomeBadToken
}

// noteEnded keeps the token hash of a pod that ended or was deleted.
func (p *PodTokens) noteEnded(pod *corev1.Pod) {
	hash := pod.Annotations[AnnotationTokenHash]
	if hash == "" {
		return
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended[hash] = now
	for h, t := range p.ended {
		if now.Sub(t) > endedTTL {
			delete(p.ended, h)
		}
	}
}

// podEnded reports whether pod's run is over: it is being deleted, or all
// its containers have ended.
func podEnded(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
