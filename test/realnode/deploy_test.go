//go:build integration

package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testkustomize"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
)

// deployBase is deploy/base, from this package's directory.
const deployBase = "../../deploy/base"

// deployOverlay is what the test's kustomize overlay of deploy/base sets.
type deployOverlay struct {
	namespace string // pcsync's own namespace, instead of pcsync-system
	image     string // pcsync's image, without the tag
	pause     string // the image that stands in for git-sync
	node      *testcluster.RealNode
	// apiHost and apiPort are where the pod reaches the API server.
	apiHost, apiPort string
	// config holds the files of pcsync's config directory, by name.
	config map[string]string
	// chart renders charts/pcsync (helm template, in namespace, with
	// pcsync's image from the registry) instead of deploy/base, and a
	// Namespace under Pod Security restricted beside it, as a user makes it
	// before helm install.
	chart bool
}

// renderDeployment renders deploy/base with an overlay (kustomize, in memory)
// that makes it run here: pcsync's image from the real node's registry, the
// pod pinned to the real node, the API server at the address the pods reach
// (its Service IP has no endpoint pods can use, and there is no DNS), a ConfigMap for the config directory git-sync
// would keep (no internet: git-sync's image cannot be pulled, the pause
// image stands in), an emptyDir for the spool (no storage provisioner), and
// pcsync's namespace renamed (the spool's PersistentVolumeClaim dropped). The rest of deploy/base stays as it is: RBAC,
// securityContext, probes, the daemon's arguments (but the ApplySet's
// namespace), two replicas with leader election.
//
// With o.chart, the overlay's base is charts/pcsync rendered by helm
// instead (in pcsync's namespace: no namespace to rename, no argument to
// change), and the same overlay swaps the same things.
func renderDeployment(t *testing.T, o deployOverlay) []*unstructured.Unstructured {
	t.Helper()
	fs := filesys.MakeFsInMemory()
	if o.chart {
		writeChartBase(t, fs, o)
	} else if err := testkustomize.CopyDir(fs, deployBase, "/base"); err != nil {
		t.Fatal(err)
	}

	var configFiles, items []any
	for name := range o.config {
		configFiles = append(configFiles, name)
		items = append(items, map[string]any{"key": name, "path": "config/" + name})
	}
	tol := o.node.Toleration()
	patch := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "pcsync"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"nodeSelector": o.node.NodeSelector(),
			"tolerations":  []any{map[string]any{"key": tol.Key, "operator": string(tol.Operator), "effect": string(tol.Effect)}},
			"containers": []any{
				map[string]any{"name": "pcsync", "env": []any{
					map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": o.apiHost},
					map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": o.apiPort},
				}},
				map[string]any{"name": "git-sync", "image": o.pause, "command": []any{"/pause"}},
			},
			"volumes": []any{
				map[string]any{"name": "git", "emptyDir": nil,
					"configMap": map[string]any{"name": "pcsync-config", "items": items}},
				map[string]any{"name": "spool", "persistentVolumeClaim": nil, "emptyDir": map[string]any{}},
			},
		}}},
	}
	// The ApplySet parent lives in pcsync's namespace, which the Role allows.
	args := []map[string]any{
		{"op": "test", "path": "/spec/template/spec/containers/0/args/7", "value": "--applyset-namespace=pcsync-system"},
		{"op": "replace", "path": "/spec/template/spec/containers/0/args/7", "value": "--applyset-namespace=" + o.namespace},
	}
	argsPatch, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	deployment := map[string]any{"kind": "Deployment", "name": "pcsync"}
	patches := []any{
		map[string]any{"target": deployment, "path": "deployment.yaml"},
		// Unused (no provisioner here), and its pvc-protection finalizer
		// would hold the namespace's deletion (no controller removes it).
		map[string]any{"target": map[string]any{"kind": "PersistentVolumeClaim", "name": "pcsync-spool"},
			"patch": "$patch: delete\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: pcsync-spool\n"},
	}
	if !o.chart {
		patches = append(patches, map[string]any{"target": deployment, "patch": string(argsPatch)})
	}
	kustomization := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
		"namespace":          o.namespace,
		"resources":          []any{"../base"},
		"images":             []any{map[string]any{"name": "pcsync", "newName": o.image, "newTag": imageTag}},
		"configMapGenerator": []any{map[string]any{"name": "pcsync-config", "files": configFiles}},
		"patches":            patches,
	}
	files := map[string]any{"kustomization.yaml": kustomization, "deployment.yaml": patch}
	for name, data := range o.config {
		files[name] = data
	}
	if err := testkustomize.WriteYAML(fs, "/overlay", files); err != nil {
		t.Fatal(err)
	}
	objs, err := testkustomize.Build(fs, "/overlay")
	if err != nil {
		t.Fatalf("the overlay of deploy/base: %v", err)
	}
	return objs
}

// pcsync's own Deployment (deploy/base, through an overlay that only swaps
// what cannot run here) from pcsync's own image runs on the real kubelet:
// both replicas become Ready (their readinessProbe asks /readyz), the leader
// reaches the API server through its in-cluster config (the projected
// token and the cluster CA), reconciles its config with deploy/base's RBAC,
// and /readyz, asked through the API server's pod proxy, answers 200 with
// pcsync's report.
func TestDeployment(t *testing.T) { testDeployment(t, false) }

// TestChartDeployment is TestDeployment with Helm's chart, charts/pcsync,
// rendered by helm in pcsync's namespace with pcsync's image from the
// node's registry (image.registry and image.tag), in place of deploy/base:
// its objects run on the real kubelet as deploy/base's do.
func TestChartDeployment(t *testing.T) { testDeployment(t, true) }

// testDeployment applies deploy/base, or with chart charts/pcsync, through
// renderDeployment's overlay, and checks the replicas, their /readyz and
// the leader's reconcile.
func testDeployment(t *testing.T, chart bool) {
	c, node, apiHost, apiPort := deployNode(t)
	p := pushImages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs := c.Client()

	suffix := randomSuffix(t)
	ns := "pcsync-" + suffix
	// Settings spec.namespacePrefix: at most 20 characters.
	prefix, slug := "rn-"+suffix+"-", "acme"
	tenant := prefix + slug

	tol := node.Toleration()
	docs := map[string]map[string]any{
		"settings.yaml": {"apiVersion": config.APIVersion, "kind": "Settings", "metadata": map[string]any{"name": "fleet"},
			"spec": map[string]any{
				"namespacePrefix": prefix,
				"images":          map[string]any{"registry": p.RealRegistry},
				"pcsync":          map[string]any{"serviceAccount": map[string]any{"name": "pcsync", "namespace": ns}},
			}},
		"company.yaml": {"apiVersion": config.APIVersion, "kind": "Company", "metadata": map[string]any{"name": slug},
			"spec": map[string]any{
				"id": "company-" + slug,
				"agents": []any{map[string]any{
					"name": "coder", "adapter": "claude_local", "model": "claude-sonnet-4-6",
					"nodeSelector": node.NodeSelector(),
					"tolerations":  []any{map[string]any{"key": tol.Key, "operator": string(tol.Operator), "effect": string(tol.Effect)}},
				}},
			}},
	}
	cfgFiles := map[string]string{}
	for name, d := range docs {
		data, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		cfgFiles[name] = string(data)
	}
	objs := renderDeployment(t, deployOverlay{
		namespace: ns, image: p.RealRegistry + "/pcsync", pause: node.PauseImage(), node: node,
		apiHost: apiHost, apiPort: apiPort, config: cfgFiles, chart: chart,
	})

	t.Cleanup(func() { cleanupDeployment(t, c, objs, tenant) })
	applyObjects(ctx, t, c, objs)
	source := "deploy/base"
	if chart {
		source = "charts/pcsync"
	}
	t.Logf("applied %d objects of %s in %s; pcsync reaches the API server at %s:%s", len(objs), source, ns, apiHost, apiPort)

	// Both replicas Ready: their readinessProbe (GET /readyz) passes.
	var replicas int32 = 2
	start := time.Now()
	pods, err := waitDeploymentReady(ctx, c, ns, "pcsync", replicas)
	if err != nil {
		t.Fatalf("Deployment %s/pcsync: %v\n%s", ns, err, podsReport(c, ns))
	}
	t.Logf("Deployment %s/pcsync: %d replicas Ready %s after apply", ns, len(pods), time.Since(start).Round(time.Millisecond))

	// The CA the pods trust: kube-root-ca.crt, which the projected volume
	// reads, published by the controller-manager: the cluster's CA.
	root, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ConfigMap %s/kube-root-ca.crt: %v", ns, err)
	}
	if got, want := root.Data["ca.crt"], string(c.RESTConfig().CAData); got != want {
		t.Errorf("ConfigMap %s/kube-root-ca.crt holds\n%s\nwant the cluster's CA\n%s", ns, got, want)
	}

	// /readyz of every replica through the API server's pod proxy; the
	// leader's once it has reconciled (it reports Reconciled at its first
	// reconcile's end).
	leaders := 0
	for _, pod := range pods {
		code, rep, body, err := waitReadyz(ctx, c, ns, pod.Name)
		if err != nil {
			t.Errorf("pod %s: /readyz: %v; last answer %d %s\n%s", pod.Name, err, code, body, podLogs(c, ns, pod.Name))
			continue
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(body)); err != nil {
			t.Fatal(err)
		}
		t.Logf("pod %s: GET /readyz: %d %s", pod.Name, code, compact.String())
		conds := map[string]health.Condition{}
		for _, cond := range rep.Conditions {
			conds[cond.Type] = cond
		}
		leading := conds["Leader"].Reason == "Leading"
		if leading {
			leaders++
		}
		for _, want := range []struct {
			cond, reason string
			leaderOnly   bool
		}{
			{cond: "APIServerReachable", reason: "Reachable"},
			{cond: "Leader"},
			{cond: "ConfigLoaded", leaderOnly: true},
			{cond: "ConfigValid", leaderOnly: true},
			{cond: "Reconciled", leaderOnly: true},
			{cond: "RunsServed", leaderOnly: true},
		} {
			if want.leaderOnly && !leading {
				continue
			}
			got, ok := conds[want.cond]
			switch {
			case !ok:
				t.Errorf("pod %s: /readyz has no condition %s", pod.Name, want.cond)
			case got.Status != health.StatusTrue:
				t.Errorf("pod %s: /readyz condition %s is %s (%s: %s), want True", pod.Name, want.cond, got.Status, got.Reason, got.Message)
			case want.reason != "" && got.Reason != want.reason:
				t.Errorf("pod %s: /readyz condition %s has reason %s, want %s", pod.Name, want.cond, got.Reason, want.reason)
			}
		}
		if code != http.StatusOK || rep.Status != health.StateReady {
			t.Errorf("pod %s: /readyz answered %d with status %q, want 200 and %q", pod.Name, code, rep.Status, health.StateReady)
		}
	}
	if leaders != 1 {
		t.Errorf("%d of %d replicas lead, want 1", leaders, len(pods))
	}

	// The leader's reconcile, with deploy/base's RBAC: the tenant exists.
	if _, err := cs.CoreV1().Namespaces().Get(ctx, tenant, metav1.GetOptions{}); err != nil {
		t.Errorf("tenant namespace %s, which pcsync applies: %v", tenant, err)
	}
	if _, err := cs.RbacV1().RoleBindings(tenant).Get(ctx, "pcsync", metav1.GetOptions{}); err != nil {
		t.Errorf("tenant RoleBinding %s/pcsync, which pcsync applies: %v", tenant, err)
	}
}

// applyObjects server-side applies objects in order (kustomize puts
// Namespaces first).
func applyObjects(ctx context.Context, t *testing.T, c *testcluster.Cluster, objs []*unstructured.Unstructured) {
	t.Helper()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client().Discovery()))
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		opts := metav1.ApplyOptions{FieldManager: "pcsync-test", Force: true}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			_, err = c.Dynamic().Resource(m.Resource).Namespace(obj.GetNamespace()).Apply(ctx, obj.GetName(), obj, opts)
		} else {
			_, err = c.Dynamic().Resource(m.Resource).Apply(ctx, obj.GetName(), obj, opts)
		}
		if err != nil {
			t.Fatalf("apply %s %s/%s: %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// waitDeploymentReady waits until the Deployment has replicas Ready pods of
// its current ReplicaSet, and returns them.
func waitDeploymentReady(ctx context.Context, c *testcluster.Cluster, ns, name string, replicas int32) ([]corev1.Pod, error) {
	cs := c.Client()
	var last string
	for {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err.Error()
		case d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != replicas || d.Status.ReadyReplicas != replicas:
			last = fmt.Sprintf("%d updated, %d ready of %d", d.Status.UpdatedReplicas, d.Status.ReadyReplicas, replicas)
		default:
			pods, err := readyPods(ctx, c, ns, d)
			if err != nil {
				return nil, err
			}
			if int32(len(pods)) == replicas {
				return pods, nil
			}
			last = fmt.Sprintf("%d Ready pods, want %d", len(pods), replicas)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("not Ready: %s: %w", last, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// readyPods lists the Deployment's pods that are Ready and not terminating.
func readyPods(ctx context.Context, c *testcluster.Cluster, ns string, d *appsv1.Deployment) ([]corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	list, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// waitReadyz asks a pod's /readyz (port 8080) through the API server's pod
// proxy until it answers 200 and, from the leader, reports Reconciled; it
// returns the last answer.
func waitReadyz(ctx context.Context, c *testcluster.Cluster, ns, pod string) (int, health.Report, string, error) {
	var (
		code int
		rep  health.Report
		body []byte
		last error
	)
	for {
		res := c.Client().CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").
			Name(pod + ":8080").SubResource("proxy").Suffix("readyz").Do(ctx)
		res.StatusCode(&code)
		body, last = res.Raw()
		if code == http.StatusOK {
			rep = health.Report{}
			if err := json.Unmarshal(body, &rep); err != nil {
				return code, rep, string(body), fmt.Errorf("body is not pcsync's report: %w", err)
			}
			if !leaderPending(rep) {
				return code, rep, string(body), nil
			}
		}
		select {
		case <-ctx.Done():
			return code, rep, string(body), fmt.Errorf("%w: %w", last, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// leaderPending tells whether a report is the leader's before the end of
// its first reconcile, or before its runs loop reports (it starts beside
// the reconcile, and on a loaded machine a moment later).
func leaderPending(rep health.Report) bool {
	leading, reconciled, runs := false, false, false
	for _, c := range rep.Conditions {
		leading = leading || (c.Type == "Leader" && c.Reason == "Leading")
		reconciled = reconciled || c.Type == "Reconciled"
		runs = runs || c.Type == "RunsServed"
	}
	return leading && !(reconciled && runs)
}

// podsReport describes the nodes (conditions and taints), the pods of a
// namespace, their containers' states and logs, for a failure message.
func podsReport(c *testcluster.Cluster, ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "pods: " + err.Error()
	}
	var b strings.Builder
	b.WriteString(nodesReport(ctx, c))
	for i := range list.Items {
		p := &list.Items[i]
		fmt.Fprintf(&b, "%s\n%s\n", describe(p), podLogs(c, ns, p.Name))
	}
	evs, err := c.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range evs.Items {
			fmt.Fprintf(&b, "event %s %s: %s %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	return b.String()
}

// nodesReport names each node's conditions that are not as a healthy node
// has them, and its taints: a node under disk pressure or not ready makes
// the kubelet refuse pods that the scheduler placed.
func nodesReport(ctx context.Context, c *testcluster.Cluster) string {
	nodes, err := c.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "nodes: " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, n := range nodes.Items {
		fmt.Fprintf(&b, "node %s:", n.Name)
		for _, cond := range n.Status.Conditions {
			if (cond.Type == corev1.NodeReady) != (cond.Status == corev1.ConditionTrue) {
				fmt.Fprintf(&b, " %s=%s (%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
		for _, taint := range n.Spec.Taints {
			fmt.Fprintf(&b, " taint %s", taint.ToString())
		}
		b.WriteString("\n")
	}
	return b.String()
}

// podLogs returns the last lines of every container's log of a pod.
func podLogs(c *testcluster.Cluster, ns, pod string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	for _, ctr := range []string{"pcsync", "git-sync", "paperclip"} {
		data, err := c.Client().CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: ctr, TailLines: ptr.To(int64(40))}).DoRaw(ctx)
		if err != nil {
			fmt.Fprintf(&b, "logs %s/%s: %v\n", pod, ctr, err)
			continue
		}
		fmt.Fprintf(&b, "logs %s/%s:\n%s\n", pod, ctr, data)
	}
	return b.String()
}

// cleanupDeployment deletes what the test applied and what pcsync applied
// (the tenant's namespace), and waits for the namespaces to go, so that
// pcsync's pods have left the real node when the next test starts.
func cleanupDeployment(t *testing.T, c *testcluster.Cluster, objs []*unstructured.Unstructured, tenant string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := c.Client()
	var namespaces []string
	for _, o := range objs {
		var err error
		switch o.GetKind() {
		case "Namespace":
			namespaces = append(namespaces, o.GetName())
		case "ClusterRole":
			err = cs.RbacV1().ClusterRoles().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		case "ClusterRoleBinding":
			err = cs.RbacV1().ClusterRoleBindings().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if tenant != "" {
		namespaces = append(namespaces, tenant)
	}
	for _, ns := range namespaces {
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	}
	for _, ns := range namespaces {
		for {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				t.Errorf("namespace %s still there after cleanup: %v", ns, err)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
