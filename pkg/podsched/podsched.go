package podsched

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pcsync/pcsync/pkg/config"
)

// Scheduling is the scheduling part of a pod spec: the fields that decide
// which nodes the pod may run on and with which runtime. A zero field sets
// nothing.
type Scheduling struct {
	NodeSelector     map[string]string
	Tolerations      []corev1.Toleration
	RuntimeClassName *string
}

// For returns the scheduling of a pod of company c that serves agent a: the
// agent's node selector and tolerations and the company's runtime class. A
// nil a is a pod of the company that serves no agent declared in Git: the
// company's runtime class alone. The result shares no memory with the
// config.
func For(c *config.Company, a *config.Agent) Scheduling {
	var s Scheduling
	if c.Spec.RuntimeClassName != "" {
		rc := c.Spec.RuntimeClassName
		s.RuntimeClassName = &rc
	}
	if a == nil {
		return s
	}
	if len(a.NodeSelector) > 0 {
		s.NodeSelector = maps.Clone(a.NodeSelector)
	}
	for _, t := range a.Tolerations {
		var secs *int64
		if t.TolerationSeconds != nil {
			v := *t.TolerationSeconds
			secs = &v
		}
		s.Tolerations = append(s.Tolerations, corev1.Toleration{
			Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: secs,
		})
	}
	return s
}

// Apply sets spec's scheduling fields to s, replacing what they held.
func (s Scheduling) Apply(spec *corev1.PodSpec) {
	spec.NodeSelector = s.NodeSelector
	spec.Tolerations = s.Tolerations
	spec.RuntimeClassName = s.RuntimeClassName
}

// Of returns the scheduling fields of spec, so that tests and reports can
// compare the pods of different builders.
func Of(spec *corev1.PodSpec) Scheduling {
	return Scheduling{NodeSelector: spec.NodeSelector, Tolerations: spec.Tolerations, RuntimeClassName: spec.RuntimeClassName}
}

// String says where a pod of this scheduling may run, for messages: its
// node selector, the taints it tolerates and its runtime class, or "any
// schedulable node" when it sets none of them.
func (s Scheduling) String() string {
	var parts []string
	if len(s.NodeSelector) > 0 {
		keys := slices.Sorted(maps.Keys(s.NodeSelector))
		sel := make([]string, len(keys))
		for i, k := range keys {
			sel[i] = k + "=" + s.NodeSelector[k]
		}
		parts = append(parts, "nodes "+strings.Join(sel, ","))
	}
	if len(s.Tolerations) > 0 {
		tols := make([]string, len(s.Tolerations))
		for i, t := range s.Tolerations {
			tols[i] = toleration(t)
		}
		parts = append(parts, "tolerating "+strings.Join(tols, ", "))
	}
	if s.RuntimeClassName != nil {
		parts = append(parts, "runtime class "+*s.RuntimeClassName)
	}
	if len(parts) == 0 {
		return "any schedulable node"
	}
	return strings.Join(parts, "; ")
}

// toleration is t as kubectl describe shows it: key=value:effect for
// Equal, key:effect for Exists ("*" for an empty key, which matches every
// taint).
func toleration(t corev1.Toleration) string {
	s := t.Key
	if s == "" {
		s = "*"
	}
	if t.Operator != corev1.TolerationOpExists {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + string(t.Effect)
	}
	if t.TolerationSeconds != nil {
		s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
	}
	return s
}
