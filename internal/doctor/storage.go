package doctor

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// defaultClassAnnotation marks the cluster's default StorageClass.
const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// checkLeaseStorage checks, for each company that suspends its kept
// leases (spec.sandbox.suspend), that the StorageClass of their claims
// exists: the one it names, else the cluster's default. Without it the
// claims stay Pending and no kept lease starts. A caller that may not
// read StorageClasses gets a warning.
func (d *doctor) checkLeaseStorage(ctx context.Context) {
	if d.model == nil {
		return
	}
	for i := range d.model.Companies {
		c := &d.model.Companies[i]
		s := c.LeaseSuspend()
		if s == nil {
			continue
		}
		name := d.model.Namespace(c)
		if s.StorageClassName == "" {
			d.defaultClass(ctx, name)
			continue
		}
		sc, err := d.cs.StorageV1().StorageClasses().Get(ctx, s.StorageClassName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			d.add("lease storage", name, StatusFail,
				"StorageClass %s (spec.sandbox.suspend.storageClassName) does not exist: kept leases' claims stay Pending and their pods never start", s.StorageClassName)
		case apierrors.IsForbidden(err):
			d.add("lease storage", name, StatusWarn, "StorageClass %s not checked: %v", s.StorageClassName, err)
		case err != nil:
			d.add("lease storage", name, StatusFail, "StorageClass %s: %v", s.StorageClassName, err)
		default:
			d.add("lease storage", name, StatusOK, "StorageClass %s, provisioner %s", sc.Name, sc.Provisioner)
		}
	}
}

// defaultClass checks that the cluster has a default StorageClass, for
// the claims of a company that names none.
func (d *doctor) defaultClass(ctx context.Context, name string) {
	list, err := d.cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		d.add("lease storage", name, StatusWarn, "the default StorageClass not checked: %v", err)
		return
	case err != nil:
		d.add("lease storage", name, StatusFail, "StorageClasses: %v", err)
		return
	}
	for _, sc := range list.Items {
		if sc.Annotations[defaultClassAnnotation] == "true" {
			d.add("lease storage", name, StatusOK, "the default StorageClass %s, provisioner %s", sc.Name, sc.Provisioner)
			return
		}
	}
	d.add("lease storage", name, StatusFail,
		"no default StorageClass: name one in spec.sandbox.suspend.storageClassName, else kept leases' claims stay Pending")
}
