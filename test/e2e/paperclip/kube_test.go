//go:build integration

package paperclip

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// kubeWorld is a world whose daemon runs agents as Jobs on the test
// control plane: the tenant is applied by `pcsync apply`, kwok serves the
// transcript as the log of every pod in the tenant namespace.
type kubeWorld struct {
	*world
	c  *testcluster.Cluster
	ns string
	// setNS is the namespace of the ApplySet parent (--applyset-namespace).
	setNS string
	// seen keeps the first version of every Job and Secret of the namespace.
	mu      sync.Mutex
	jobs    map[string]*batchv1.Job
	secrets map[string]*corev1.Secret
	jobAt   map[string]time.Time
	jobGone map[string]time.Time
	podDone map[string]time.Time
}

// tenantNamespaces makes a world's tenant namespace (by the test cluster,
// for its clean-up and for kwok's logs and execs) and the namespace of its
// ApplySet parent, and returns the tenant namespace, the Settings
// namespacePrefix and the company slug that render to it, and the parent's
// namespace. pcsync takes no namespace it did not create, so the tenant
// namespace is handed to the company on purpose (pcsync.io/adopt).
func tenantNamespaces(t testing.TB, c *testcluster.Cluster, prefix string) (ns, nsPrefix, slug, setNS string) {
	t.Helper()
	ns = c.Namespace(t, prefix, nil)
	i := strings.LastIndexByte(ns, '-')
	nsPrefix, slug = ns[:i+1], ns[i+1:]
	patch := []byte(`{"metadata":{"annotations":{"pcsync.io/adopt":"` + slug + `"}}}`)
	if _, err := c.Client().CoreV1().Namespaces().Patch(context.Background(), ns, types.MergePatchType, patch,
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns, nsPrefix, slug, c.Namespace(t, prefix+"-set", nil)
}

func newKubeWorld(t testing.TB, srv *server, agents []pcsyncAgent, lines []string) *kubeWorld {
	t.Helper()
	return newKubeWorldWith(t, srv, agents, lines, nil)
}

// newKubeWorldWith is newKubeWorld with adapterConfig merged into every
// Paperclip agent's adapterConfig.
func newKubeWorldWith(t testing.TB, srv *server, agents []pcsyncAgent, lines []string, adapterConfig map[string]any) *kubeWorld {
	t.Helper()
	c := testcluster.Get(t)
	ns, prefix, slug, setNS := tenantNamespaces(t, c, "pce2e")
	kw := &kubeWorld{c: c, ns: ns, setNS: setNS, jobs: map[string]*batchv1.Job{}, secrets: map[string]*corev1.Secret{},
		jobAt: map[string]time.Time{}, jobGone: map[string]time.Time{}, podDone: map[string]time.Time{}}
	kubeconfig := c.KubeconfigPath()
	big := map[string]any{"pods": 5000, "requestsCpu": "1000", "requestsMemory": "4000Gi", "limitsCpu": "1000", "limitsMemory": "4000Gi"}
	for i := range agents {
		if agents[i].Labels == nil {
			agents[i].Labels = map[string]string{"e2e": "paperclip"}
		}
		// The smallest resources the default LimitRange allows: room for
		// a burst of pods on kwok's node.
		agents[i].Extra = map[string]any{"resources": map[string]any{
			"requests": map[string]any{"cpu": "100m", "memory": "128Mi"},
			"limits":   map[string]any{"cpu": "100m", "memory": "128Mi"},
		}}
	}
	kw.world = newWorld(t, srv, worldOptions{
		Slug: slug, Agents: agents, Executor: "kubernetes",
		Settings:      map[string]any{"namespacePrefix": prefix},
		Company:       map[string]any{"quota": big},
		AdapterConfig: adapterConfig,
		DaemonArgs:    []string{"--kubeconfig", kubeconfig, "--applyset-namespace", setNS},
		Before: func(w *world) {
			out, err := runCmd(w.pc.Config, nil, getTools(t).Pcsync, "apply", w.pc.Config,
				"--kubeconfig", kubeconfig, "--applyset-namespace", setNS, "--force-conflicts")
			if err != nil {
				t.Fatalf("pcsync apply: %v", err)
			}
			t.Logf("pcsync apply:\n%s", out)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := c.ServeLogs(ctx, ns, nil, lines); err != nil {
				t.Fatal(err)
			}
			kw.watch(t)
		},
	})
	return kw
}

// watch records every Job and Secret of the namespace as first seen.
func (kw *kubeWorld) watch(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs := kw.c.Client()
	jw, err := cs.BatchV1().Jobs(kw.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sw, err := cs.CoreV1().Secrets(kw.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pw, err := cs.CoreV1().Pods(kw.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range jw.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			now := time.Now()
			kw.mu.Lock()
			switch ev.Type {
			case watch.Added:
				kw.jobs[j.Name], kw.jobAt[j.Name] = j, now
			case watch.Deleted:
				kw.jobGone[j.Name] = now
			}
			kw.mu.Unlock()
		}
	}()
	go func() {
		for ev := range pw.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed) {
				continue
			}
			job := p.Labels["job-name"]
			kw.mu.Lock()
			if _, seen := kw.podDone[job]; !seen && job != "" {
				kw.podDone[job] = time.Now()
			}
			kw.mu.Unlock()
		}
	}()
	go func() {
		for ev := range sw.ResultChan() {
			if s, ok := ev.Object.(*corev1.Secret); ok && ev.Type == watch.Added {
				kw.mu.Lock()
				kw.secrets[s.Name] = s
				kw.mu.Unlock()
			}
		}
	}()
}

// jobOf returns the Job (as created) of a Paperclip run.
func (kw *kubeWorld) jobOf(t testing.TB, runID string) (*batchv1.Job, *corev1.Secret) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		kw.mu.Lock()
		for _, j := range kw.jobs {
			if j.Labels["paperclip.io/run-id"] == strings.ToLower(runID) {
				s := kw.secrets[j.Name]
				kw.mu.Unlock()
				if s != nil {
					return j, s
				}
				kw.mu.Lock()
			}
		}
		kw.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no Job and Secret seen for run %s in %s", runID, kw.ns)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKubernetesExecutor: the success case with `pcsync daemon --executor
// kubernetes` on the project's control plane. The pod gets
// PAPERCLIP_API_KEY from the per-run Secret and PAPERCLIP_API_URL, and the
// run JWT is nowhere but in the request and that Secret.
func TestKubernetesExecutor(t *testing.T) {
	srv := sharedServer(t)
	tr := readTranscript(t, "claude-obers-small-success.jsonl")
	kw := newKubeWorld(t, srv, []pcsyncAgent{{Name: "coder", Transcript: tr.Path}}, tr.Lines)

	run, stdout := runAndCheck(t, srv, kw.agents["coder"].ID, "e2e: kubernetes", runCheck{Within: 3 * time.Minute, Figures: tr.figures(), Transcript: tr})
	waitSpend(t, srv, kw.company.ID, cents(tr.CostUSD))
	name := strings.ToLower(run.ID)
	res := kw.pc.waitResult(name, time.Minute)
	if res.Job == nil || res.Job.Namespace != kw.ns {
		t.Errorf("pcsync result of %s names Job %+v, want one in %s", name, res.Job, kw.ns)
	}

	req := kw.request(run.ID)
	pc, _ := req["paperclip"].(map[string]any)
	jwt, _ := pc["apiKey"].(string)
	if len(jwt) < 100 {
		t.Fatalf("the request carries no run JWT (paperclip.apiKey %q)", jwt)
	}
	job, secret := kw.jobOf(t, run.ID)
	env := map[string]corev1.EnvVar{}
	for _, c := range job.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			env[e.Name] = e
		}
	}
	key := env["PAPERCLIP_API_KEY"]
	if key.ValueFrom == nil || key.ValueFrom.SecretKeyRef == nil || key.ValueFrom.SecretKeyRef.Name != secret.Name {
		t.Errorf("Job %s: PAPERCLIP_API_KEY = %+v, want a secretKeyRef to the per-run Secret %s", job.Name, key, secret.Name)
	} else if got := string(secret.Data[key.ValueFrom.SecretKeyRef.Key]); got != jwt {
		t.Errorf("Secret %s key %s does not hold the run JWT", secret.Name, key.ValueFrom.SecretKeyRef.Key)
	}
	url := env["PAPERCLIP_API_URL"]
	urlValue := url.Value
	if url.ValueFrom != nil && url.ValueFrom.SecretKeyRef != nil {
		urlValue = string(secret.Data[url.ValueFrom.SecretKeyRef.Key])
	}
	if urlValue == "" || strings.Contains(urlValue, "127.0.0.1") || strings.Contains(urlValue, "localhost") {
		t.Errorf("Job %s: PAPERCLIP_API_URL = %q, want a URL a pod can reach", job.Name, urlValue)
	}

	// The JWT is nowhere else: the Job, the spool (but the request), the
	// daemon's output, Paperclip's run log.
	jobJSON, _ := json.Marshal(job)
	places := map[string]string{"Job " + job.Name: string(jobJSON), "pcsync daemon output": kw.daemon.out.String(), "Paperclip run log": stdout}
	_ = filepath.WalkDir(kw.pc.Spool, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == filepath.Join(kw.pc.Spool, name+".json") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err == nil {
			places[p] = string(data)
		}
		return nil
	})
	for place, text := range places {
		if strings.Contains(text, jwt) {
			t.Errorf("the run JWT is in %s", place)
		}
	}
}

func metav1ListJob(job string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: "job-name=" + job}
}
