package spendkeep

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/egressproxy/spend"
)

// sync keeps ns's spend once: pull its proxy pods' reports, merge them
// into the Deployment's record, fold the gone pods' processes, forget
// the ended runs, write the record if it changed, and give each pod that
// reported its base.
func (k *Keeper) sync(ctx context.Context, ns string, gone bool) error {
	pods, err := k.pods.Pods(ns).List(labels.SelectorFromSet(labels.Set{agentpod.LabelRole: agentpod.RoleEgressProxy}))
	if err != nil {
		return err
	}
	reps := map[*corev1.Pod]spend.Report{}
	for _, p := range pods {
		if rep, ok := k.pull(ctx, p); ok {
			reps[p] = rep
		}
	}
	if len(reps) == 0 && !gone {
		// No proxy that counts spend answered, and none went: the
		// Deployment's record is not read (a tenant without budgets costs
		// no request to the API server).
		return nil
	}
	dep, err := k.cs.AppsV1().Deployments(ns).Get(ctx, DeploymentName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("Deployment/%s/%s: %w", ns, DeploymentName, err)
	}
	rec, err := record(dep)
	if err != nil {
		return err
	}
	before := string(rec.Encode())
	keys, months := map[*corev1.Pod]string{}, map[*corev1.Pod]string{}
	live := map[string]bool{}
	for _, p := range pods {
		live[p.Name] = true
	}
	for p, rep := range reps {
		keys[p], months[p] = p.Name+"/"+rep.Process, rep.Month
		rec.Observe(rep.Month, keys[p], rep.Counts)
	}
	for key := range rec.Live {
		if pod, _, _ := strings.Cut(key, "/"); !live[pod] {
			rec.Close(key)
		}
	}
	runs, err := k.liveRuns(ns)
	if err != nil {
		return err
	}
	rec.DropRuns(func(run string) bool { return runs[run] })
	if after := string(rec.Encode()); after != before {
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": dep.ResourceVersion, "annotations": map[string]string{AnnotationRecord: after}}})
		_, err := k.cs.AppsV1().Deployments(ns).Patch(ctx, DeploymentName, types.MergePatchType, body,
			metav1.PatchOptions{FieldManager: fieldManager})
		if apierrors.IsConflict(err) {
			// Another pass wrote first (a second replica's, or the
			// scaler's): this one's reports are pulled again next pass.
			k.retry(ns)
			return nil
		}
		if err != nil {
			return fmt.Errorf("Deployment/%s/%s: annotation %s: %w", ns, DeploymentName, AnnotationRecord, err)
		}
	}
	return k.giveBases(ctx, ns, &rec, keys, months)
}

// giveBases sets on each pod that reported (keys: its process's key in
// rec; months: its report's month) its base: what the month's other
// processes counted.
func (k *Keeper) giveBases(ctx context.Context, ns string, rec *spend.Record, keys, months map[*corev1.Pod]string) error {
	for p, key := range keys {
		base := spend.Totals{Month: rec.Month, Counts: rec.Base(key)}
		if base.Month == "" {
			base.Month = months[p]
		}
		raw, _ := json.Marshal(base)
		if p.Annotations[spend.AnnotationBase] == string(raw) || p.DeletionTimestamp != nil {
			continue
		}
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{spend.AnnotationBase: string(raw)}}})
		if _, err := k.cs.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, body,
			metav1.PatchOptions{FieldManager: fieldManager}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("Pod/%s/%s: annotation %s: %w", ns, p.Name, spend.AnnotationBase, err)
		}
	}
	return nil
}

// record is dep's Record; an empty one when it has none.
func record(dep *appsv1.Deployment) (spend.Record, error) {
	raw := dep.Annotations[AnnotationRecord]
	if raw == "" {
		return spend.Record{Version: spend.RecordVersion}, nil
	}
	rec, err := spend.DecodeRecord([]byte(raw))
	if err != nil {
		return spend.Record{}, fmt.Errorf("Deployment/%s/%s: annotation %s: %w", dep.Namespace, dep.Name, AnnotationRecord, err)
	}
	return rec, nil
}

// pull reads p's report; false when p has no address yet, counts no
// spend (404) or does not answer (it keeps its process's last figures).
func (k *Keeper) pull(ctx context.Context, p *corev1.Pod) (spend.Report, bool) {
	if p.Status.PodIP == "" {
		return spend.Report{}, false
	}
	u := "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(k.opts.Port)) + "/spend"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return spend.Report{}, false
	}
	resp, err := k.opts.Client.Do(req)
	if err != nil {
		k.opts.Logger.Debug("spend keeper: pull failed", "namespace", p.Namespace, "pod", p.Name, "error", err)
		return spend.Report{}, false
	}
	defer resp.Body.Close()
	var rep spend.Report
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&rep) != nil || rep.Process == "" || rep.Month == "" {
		return spend.Report{}, false
	}
	return rep, true
}

// liveRuns are ns's runs whose pods live and have not ended (their
// tokens' hashes, as spend.RunOf names them).
func (k *Keeper) liveRuns(ns string) (map[string]bool, error) {
	pods, err := k.pods.Pods(ns).List(labels.SelectorFromSet(labels.Set{agentpod.LabelRole: agentpod.RoleAgent}))
	if err != nil {
		return nil, err
	}
	runs := map[string]bool{}
	for _, p := range pods {
		h := p.Annotations[agentpod.AnnotationTokenHash]
		if h != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			runs[spend.RunOf(h)] = true
		}
	}
	return runs, nil
}
