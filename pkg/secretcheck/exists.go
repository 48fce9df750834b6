package secretcheck

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Exists tells whether Secret ns/name exists without reading it: a dry-run
// create of an empty Secret of that name answers AlreadyExists when it
// does. It returns nil when the Secret exists, a NotFound error
// (apierrors.IsNotFound) when it does not, and the API server's error,
// wrapped and naming the Secret, otherwise.
func Exists(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	_, err := cs.CoreV1().Secrets(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err == nil:
		return apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return fmt.Errorf("Secret/%s/%s: dry-run create (to see whether it exists) failed: %w", ns, name, err)
}
