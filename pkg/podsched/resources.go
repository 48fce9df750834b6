package podsched

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/pcsync/pcsync/pkg/config"
)

// Resources converts the config's requests and limits to an agent
// container's: the run Jobs' and the sandbox pods' alike. A list with no
// quantity is nil.
func Resources(r config.Resources) (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	var err error
	if out.Requests, err = resourceList(r.Requests); err != nil {
		return out, fmt.Errorf("requests: %w", err)
	}
	if out.Limits, err = resourceList(r.Limits); err != nil {
		return out, fmt.Errorf("limits: %w", err)
	}
	return out, nil
}

// resourceList converts one of the config's lists, nil when it has no
// quantity.
func resourceList(l *config.ResourceList) (corev1.ResourceList, error) {
	if l == nil {
		return nil, nil
	}
	rl := corev1.ResourceList{}
	for _, q := range []struct {
		name corev1.ResourceName
		v    *config.Quantity
	}{{corev1.ResourceCPU, l.CPU}, {corev1.ResourceMemory, l.Memory}, {corev1.ResourceEphemeralStorage, l.EphemeralStorage}} {
		if q.v == nil {
			continue
		}
		parsed, err := resource.ParseQuantity(string(*q.v))
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", q.name, string(*q.v), err)
		}
		rl[q.name] = parsed
	}
	if len(rl) == 0 {
		return nil, nil
	}
	return rl, nil
}
