package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// LocalPathStorageClass is the real node's StorageClass, the cluster's default:
// rancher/local-path-provisioner makes each volume a directory under
// RealNode.VolumeDir, when a pod that uses its claim is scheduled
// (WaitForFirstConsumer), and removes it with its claim (reclaim policy Delete).
const LocalPathStorageClass = "local-path"

// The provisioner's objects and names in the cluster.
const (
	localPathNamespace   = "local-path-storage"
	localPathAccount     = "local-path-provisioner"
	localPathProvisioner = "rancher.io/local-path"
	// localPathReady is what the provisioner logs once its informers have synced.
	localPathReady = "Started provisioner controller"
)

// volumesDir is where a node directory keeps the provisioner's volumes.
func volumesDir(nodeDir string) string { return filepath.Join(nodeDir, "volumes") }

// removeVolumes removes the volumes directory of each node directory, with
// every volume the provisioner made there and did not remove (their claims
// outlived the node, or the run crashed).
func removeVolumes(nodeDirs []string) error {
	var errs []error
	for _, d := range nodeDirs {
		if d == "" {
			continue
		}
		if err := os.RemoveAll(volumesDir(d)); err != nil {
			errs = append(errs, fmt.Errorf("volumes: %w", err))
		}
	}
	return errors.Join(errs...)
}

// StorageClass returns the name of the node's StorageClass, the cluster's
// default (LocalPathStorageClass): a claim that names no class gets it.
func (n *RealNode) StorageClass() string { return LocalPathStorageClass }

// VolumeDir returns the host directory under which the provisioner makes each
// volume: <VolumeDir>/<PersistentVolume name>_<namespace>_<claim>, also the
// volume's spec.hostPath.path. The node's stop removes it and everything in it.
func (n *RealNode) VolumeDir() string { return n.volumeDir }

// storage starts the dynamic volume provisioner: it pushes the helper image,
// writes the provisioner's configuration, creates its namespace, service account
// and the default StorageClass, starts local-path-provisioner out of cluster
// with the admin kubeconfig, and waits until its controller runs.
func (s *nodeStart) storage(ctx context.Context) error {
	n := s.n
	img, err := volHelperProgram.image(ctx, s.o.CacheDir)
	if err != nil {
		return err
	}
	helper := n.registry.Ref("pcsync/volhelper:" + volHelperProgram.key())
	if err := n.registry.Push(ctx, helper, img); err != nil {
		return err
	}
	n.volumeDir = volumesDir(n.dir)
	if err := os.MkdirAll(n.volumeDir, 0o755); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	cfgDir := filepath.Join(n.dir, "local-path")
	if err := writeLocalPathConfig(cfgDir, s.o.Name, n.volumeDir, helper); err != nil {
		return err
	}
	if err := s.c.localPathObjects(ctx, s.o.Name); err != nil {
		return err
	}
	args := []string{"--debug", "start",
		"--kubeconfig=" + s.c.kubeconfigPath,
		"--namespace=" + localPathNamespace,
		"--service-account-name=" + localPathAccount,
		"--provisioner-name=" + localPathProvisioner,
		"--config=" + filepath.Join(cfgDir, "config.json"),
		"--helper-pod-file=" + filepath.Join(cfgDir, "helper-pod.yaml"),
		"--helper-image=" + helper,
	}
	comp, err := startComponent("local-path-provisioner", filepath.Join(s.o.AddonBinDir, "local-path-provisioner"),
		args, s.c.path("logs"), nil)
	if err != nil {
		return err
	}
	n.provisioner = comp
	if err := waitLogLine(ctx, comp, localPathReady); err != nil {
		return comp.failure(err)
	}
	s.logf("testcluster: real node: local-path-provisioner (pid %d) running after %s", comp.cmd.Process.Pid, s.since())
	return nil
}

// writeLocalPathConfig writes the provisioner's config.json (volumes under
// volDir on this node only; the helper program, not a shell script, makes and
// removes them) and its helper pod template (the helper image, no token).
func writeLocalPathConfig(dir, node, volDir, helperImage string) error {
	cfg := map[string]any{
		"nodePathMap":       []any{map[string]any{"node": node, "paths": []string{volDir}}},
		"setupCommand":      "/" + volHelperProgram.name,
		"teardownCommand":   "/" + volHelperProgram.name,
		"cmdTimeoutSeconds": 60,
	}
	cfgJSON, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("local-path config: %w", err)
	}
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "helper-pod"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			Containers: []corev1.Container{{
				Name: "helper-pod", Image: helperImage, ImagePullPolicy: corev1.PullIfNotPresent,
			}},
		},
	}
	podYAML, err := yaml.Marshal(pod)
	if err != nil {
		return fmt.Errorf("local-path helper pod: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("local-path config: %w", err)
	}
	for name, data := range map[string][]byte{"config.json": cfgJSON, "helper-pod.yaml": podYAML} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("local-path config: %w", err)
		}
	}
	return nil
}

// localPathObjects creates the provisioner's namespace (its helper pods mount a
// host directory: privileged), their service account, and the StorageClass,
// marked the default, whose volumes exist on node only (allowedTopologies, so
// the scheduler never puts a pod with such a claim on kwok's node). A
// StorageClass left by an earlier start is replaced (its fields are immutable).
func (c *Cluster) localPathObjects(ctx context.Context, node string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: localPathNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("Namespace %s: %w", localPathNamespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: localPathAccount, Namespace: localPathNamespace}}
	if _, err := c.client.CoreV1().ServiceAccounts(localPathNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("ServiceAccount %s/%s: %w", localPathNamespace, localPathAccount, err)
	}
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: LocalPathStorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       localPathProvisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelHostname, Values: []string{node}}}}},
	}
	scs := c.client.StorageV1().StorageClasses()
	if err := scs.Delete(ctx, sc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("StorageClass %s: %w", sc.Name, err)
	}
	if _, err := scs.Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("StorageClass %s: %w", sc.Name, err)
	}
	return nil
}

// waitLogLine waits (up to a minute, or ctx) until comp's log holds line, or
// comp exits.
func waitLogLine(ctx context.Context, comp *component, line string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return poll(ctx, comp, 100*time.Millisecond, func(context.Context) (bool, string, error) {
		data, err := os.ReadFile(comp.logPath)
		if err != nil {
			return false, err.Error(), nil
		}
		if !strings.Contains(string(data), line) {
			return false, "no line " + fmt.Sprintf("%q", line) + " in its log yet", nil
		}
		return true, "", nil
	})
}
