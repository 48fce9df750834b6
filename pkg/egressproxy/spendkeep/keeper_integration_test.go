//go:build integration

package spendkeep

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/egressproxy/spend"
	"github.com/pcsync/pcsync/pkg/health"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// proxies are the test's proxy processes, by their pod's IP: the
// Keeper's client dials a pod's IP to its process's loopback listener.
type proxies struct {
	mu    sync.Mutex
	addrs map[string]string
}

func (p *proxies) client() *http.Client {
	d := &net.Dialer{Timeout: time.Second}
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			p.mu.Lock()
			to, ok := p.addrs[host]
			p.mu.Unlock()
			if !ok {
				return nil, fmt.Errorf("no proxy process at %s", addr)
			}
			return d.DialContext(ctx, network, to)
		}}}
}

// process is one proxy process: its Gate, serving /spend on loopback
// for its pod's IP, and its annotations file, which the test writes from
// the pod's annotations as the kubelet's downwardAPI volume does.
type process struct {
	gate *spend.Gate
	file string
	srv  *http.Server
}

func (p *proxies) start(t *testing.T, ip string) *process {
	t.Helper()
	file := filepath.Join(t.TempDir(), "annotations")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := spend.NewGate(spend.Config{Company: "acme", Agents: map[string]int64{"coder": 10}, AnnotationsFile: file, WaitBase: true},
		spend.GateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/spend", g)
	pr := &process{gate: g, file: file, srv: &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}}
	go func() { _ = pr.srv.Serve(ln) }()
	p.mu.Lock()
	p.addrs[ip] = ln.Addr().String()
	p.mu.Unlock()
	return pr
}

// admit asks the process's gate to admit a request of run as coder's
// (the route's own check: it reads the annotations file, waits for the
// base); the answer's cost is the test's to add.
func (pr *process) admit(name string) (int, string) {
	run := spend.RunOf(agentpod.TokenHash(name))
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	_, done, ok := pr.gate.Admit(w, r, adapters.ProviderAnthropic, run)
	if ok {
		done()
		return http.StatusOK, ""
	}
	return w.Code, w.Body.String()
}

// downward writes pod's annotations to the process's file in the
// kubelet's format, and the runs r1 and r2 as coder's, as the token
// controller names them (package tokensync).
func (pr *process) downward(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	var b strings.Builder
	for _, run := range []string{"r1", "r2"} {
		b.WriteString(spend.AnnotationAgentPrefix + agentpod.TokenHash(run)[:40] + `="coder"` + "\n")
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range pod.Annotations {
			if !yield(k) {
				return
			}
		}
	}) {
		b.WriteString(k + "=" + strconv.Quote(pod.Annotations[k]) + "\n")
	}
	if err := os.WriteFile(pr.file+".new", []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pr.file+".new", pr.file); err != nil {
		t.Fatal(err)
	}
}

// proxyDeployment creates the tenant's proxy Deployment (its pods run by
// kwok).
func proxyDeployment(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	labels := map[string]string{agentpod.LabelManagedBy: agentpod.ManagedByValue, agentpod.LabelRole: agentpod.RoleEgressProxy}
	_, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: DeploymentName},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(int64(0)),
					Containers: []corev1.Container{{Name: "egress-proxy", Image: "example.invalid/none:1"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// awaitPod waits for a proxy pod other than not's with an IP and, when
// base is not "", that base annotation.
func awaitPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, not, base string) *corev1.Pod {
	t.Helper()
	var seen []string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: agentpod.LabelRole + "=" + agentpod.RoleEgressProxy})
		if err != nil {
			t.Fatal(err)
		}
		seen = seen[:0]
		for i, p := range pods.Items {
			seen = append(seen, p.Name+" "+p.Status.PodIP+" "+p.Annotations[spend.AnnotationBase])
			if p.Name != not && p.DeletionTimestamp == nil && p.Status.PodIP != "" && (base == "" || p.Annotations[spend.AnnotationBase] == base) {
				return &pods.Items[i]
			}
		}
	}
	t.Fatalf("no proxy pod but %q with an IP and base %q after 60 s: %v", not, base, seen)
	return nil
}

// TestSpendSurvivesProxyAndDaemon: against the test control plane (the
// proxy's Deployment run by the controller manager, its pods by kwok): a
// proxy process's spend is pulled into the Deployment's record; the pod
// is deleted (its process stops) and the daemon restarted (a new
// Keeper); the Deployment's new pod gets the record as its base, and its
// process refuses the agent at the month's 6th answer, as one process
// would have, with two daemon replicas' Keepers at once. A record that
// does not parse makes the daemon unready, naming it.
func TestSpendSurvivesProxyAndDaemon(t *testing.T) {
	c := testcluster.Get(t)
	cs := c.Client()
	ns := c.Namespace(t, "spendkeep", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ps := &proxies{addrs: map[string]string{}}
	h := health.NewChecker()
	keep := func() context.CancelFunc {
		kctx, stop := context.WithCancel(ctx)
		k := New(cs, Options{Interval: 200 * time.Millisecond, Client: ps.client(), Health: h})
		if err := k.Run(kctx); err != nil {
			t.Fatal(err)
		}
		return func() { stop(); k.Wait() }
	}
	proxyDeployment(ctx, t, cs, ns)
	month := time.Now().UTC().Format("2006-01")
	const answer = 2_171_100 // one answer's cost; the agent's budget is 10 cents: past it at the 5th

	podA := awaitPod(ctx, t, cs, ns, "", "")
	a := ps.start(t, podA.Status.PodIP)
	stop := keep()
	empty := fmt.Sprintf(`{"month":%q,"company":0}`, month)
	a.downward(t, awaitPod(ctx, t, cs, ns, "", empty))
	if code, body := a.admit("r1"); code != http.StatusOK {
		t.Fatalf("refused at start: %d %s", code, body)
	}
	for range 4 {
		a.gate.Ledger().Add(spend.RunOf(agentpod.TokenHash("r1")), "coder", answer)
	}
	awaitRecord(ctx, t, cs, ns, 4*answer)

	// The pod goes (its process with it), and the daemon restarts.
	stop()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, podA.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	_ = a.srv.Close()
	podB := awaitPod(ctx, t, cs, ns, podA.Name, "")
	b := ps.start(t, podB.Status.PodIP)
	// Two replicas' keepers from here: neither undoes the other's writes.
	stop, stop2 := keep(), keep()
	defer stop()
	defer stop2()
	base := fmt.Sprintf(`{"month":%q,"company":%d,"agents":{"coder":%d}}`, month, 4*answer, 4*answer)
	b.downward(t, awaitPod(ctx, t, cs, ns, podA.Name, base))
	if code, body := b.admit("r2"); code != http.StatusOK {
		t.Fatalf("the month's 5th answer refused: %d %s", code, body)
	}
	b.gate.Ledger().Add(spend.RunOf(agentpod.TokenHash("r2")), "coder", answer)
	if code, body := b.admit("r2"); code != http.StatusForbidden ||
		!strings.Contains(body, "agent acme/coder has spent $0.11 of its monthly budget of $0.10") {
		t.Fatalf("the month's 6th answer: %d %s; want refused", code, body)
	}
	rec := awaitRecord(ctx, t, cs, ns, 5*answer)
	if rec.Closed.Company != 4*answer || len(rec.Live) != 1 {
		t.Errorf("record %+v; want pod A's process closed with 4 answers, pod B's live", rec)
	}
	if got := h.Report().Status; got != health.StateReady {
		t.Errorf("the daemon %s while its passes succeed: %+v", got, h.Report())
	}

	// A record that does not parse: the daemon is unready, saying why.
	body := `{"metadata":{"annotations":{"` + AnnotationRecord + `":"{\"v\":1,\"month\":\"2026-13\"}"}}}`
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, DeploymentName, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "Deployment/" + ns + "/" + DeploymentName + `: annotation spend.pcsync.io/record: spend record: month "2026-13": want YYYY-MM`
	var rep health.Report
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if rep = h.Report(); rep.Status == health.StateNotReady {
			break
		}
	}
	found := false
	for _, c := range rep.Conditions {
		found = found || (c.Type == CondSpendKept && c.Status == health.StatusFalse && strings.HasSuffix(c.Message, want))
	}
	if rep.Status != health.StateNotReady || !found {
		t.Errorf("the daemon with a bad record: %+v; want not ready, %s saying %q", rep, CondSpendKept, want)
	}
}

// awaitRecord waits until the Deployment's record holds company spend.
func awaitRecord(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, company spend.MicroCents) spend.Record {
	t.Helper()
	var raw string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, DeploymentName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		raw = dep.Annotations[AnnotationRecord]
		if rec, err := spend.DecodeRecord([]byte(raw)); err == nil && rec.Base("").Company == company {
			return rec
		}
	}
	t.Fatalf("the Deployment's record after 30 s: %s; want the company's spend %d", raw, company)
	return spend.Record{}
}
