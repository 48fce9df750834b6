//go:build integration

package realnode

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testkustomize"
)

const (
	// deployArgoCD is deploy/argocd, from this package's directory.
	deployArgoCD = "../../deploy/argocd"
	// argoNamespace is Argo CD's namespace, which deploy/argocd names.
	argoNamespace = "argocd"
	// cmpContainer is the sidecar's name in deploy/argocd/repo-server.
	cmpContainer = "pcsync-cmp"
	// cmpFixture is the config repository the plugin's commands run on.
	cmpFixture = "../../examples/config"
)

// cmpPlugin is the part of Argo CD's ConfigManagementPlugin that the test
// runs: the commands of deploy/argocd/cmp-plugin.yaml.
type cmpPlugin struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version  string                     `json:"version"`
		Init     struct{ Command []string } `json:"init"`
		Generate struct{ Command []string } `json:"generate"`
		Discover struct {
			Find struct{ Command []string } `json:"find"`
		} `json:"discover"`
	} `json:"spec"`
}

// deploy/argocd, applied as its README tells a user (a kustomization of
// Argo CD's install, deploy/argocd, the Component repo-server/ and pcsync's
// image), runs on the real node: the sidecar starts from pcsync's own
// image with the patch's security context, and the discover, init and
// generate commands of the plugin config it mounts, run in it on a config
// repository, print what `pcsync render` prints. Argo CD itself cannot be
// had here: a Deployment of its shape stands in for its install, and the
// argocd-cmp-server its copyutil init container writes only keeps the
// sidecar running (deploy/argocd/README.md says what is not proven).
func TestArgoCDPlugin(t *testing.T) {
	c := testcluster.Get(t)
	node := c.RealNode()
	if node == nil {
		t.Fatal("the cluster has no real node (TestMain sets Options.RealNode)")
	}
	p := pushImages(t)
	want := renderLocally(t, cmpFixture)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs := c.Client()

	objs := renderArgoCD(t, node, p.RealRegistry+"/pcsync:"+imageTag)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argoNamespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("namespace %s: %v", argoNamespace, err)
	}
	t.Cleanup(func() { cleanupDeployment(t, c, nil, argoNamespace) })
	applyObjects(ctx, t, c, objs)
	start := time.Now()
	pods, err := waitDeploymentReady(ctx, c, argoNamespace, "argocd-repo-server", 1)
	if err != nil {
		t.Fatalf("Deployment %s/argocd-repo-server: %v\n%s", argoNamespace, err, podsReport(c, argoNamespace))
	}
	pod := pods[0]
	t.Logf("argocd-repo-server with the pcsync sidecar Ready %s after apply", time.Since(start).Round(time.Millisecond))
	checkSidecarImage(t, pod, p.RealRegistry+"/pcsync:"+imageTag)

	run := func(stdin io.Reader, command ...string) (string, string, error) {
		return podExecIn(ctx, c, argoNamespace, pod.Name, cmpContainer, stdin, command)
	}
	checkSidecarSecurity(t, run)

	// The plugin config as the sidecar reads it (argocd-cmp-server's path).
	raw, _, err := run(nil, "cat", "/home/argocd/cmp-server/config/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var plugin cmpPlugin
	if err := yaml.Unmarshal([]byte(raw), &plugin); err != nil {
		t.Fatalf("plugin.yaml in the sidecar: %v\n%s", err, raw)
	}
	if name := plugin.Metadata.Name + "-" + plugin.Spec.Version; name != "pcsync-v1" {
		t.Errorf("plugin in the sidecar is %s, want pcsync-v1 (application.yaml's plugin name)", name)
	}

	// argocd-cmp-server unpacks the repository under /tmp and runs each
	// command in the application's path, here the repository's root.
	repo := "/tmp/_cmp_server/" + strings.ReplaceAll(t.Name(), "/", "-")
	if _, stderr, err := run(tarDir(t, cmpFixture), "sh", "-c", `mkdir -p "$1" && tar -x -C "$1"`, "sh", repo); err != nil {
		t.Fatalf("unpack the config repository in the sidecar: %v %s", err, stderr)
	}
	inRepo := func(command []string) (string, string, error) {
		return run(nil, append([]string{"sh", "-c", `cd "$1" && shift && exec "$@"`, "sh", repo}, command...)...)
	}
	for _, step := range []struct {
		name    string
		command []string
		check   func(stdout string) error
	}{
		{"discover", plugin.Spec.Discover.Find.Command, func(out string) error {
			if strings.TrimSpace(out) == "" {
				return errors.New("printed nothing: Argo CD would not pick the plugin for this repository")
			}
			return nil
		}},
		{"init", plugin.Spec.Init.Command, func(string) error { return nil }},
		{"generate", plugin.Spec.Generate.Command, func(out string) error {
			if out != want {
				return fmt.Errorf("printed %d bytes that differ from pcsync render's %d:\n%s", len(out), len(want), firstDiff(want, out))
			}
			return nil
		}},
	} {
		if len(step.command) == 0 {
			t.Errorf("plugin.yaml has no %s command", step.name)
			continue
		}
		out, stderr, err := inRepo(step.command)
		if err != nil {
			t.Errorf("%s %q in the sidecar: %v", step.name, step.command, err)
			continue
		}
		if err := step.check(out); err != nil {
			t.Errorf("%s %q in the sidecar: %v (stderr %q)", step.name, step.command, err, stderr)
			continue
		}
		t.Logf("%s %q in the sidecar: exit 0, %d bytes of stdout", step.name, step.command, len(out))
	}
}

// renderArgoCD builds a user's kustomization as deploy/argocd/README.md
// shows it, with the stand-in of Argo CD's install pinned to the real node,
// and returns its objects but the Application (no Argo CD CRDs here).
func renderArgoCD(t *testing.T, node *testcluster.RealNode, image string) []*unstructured.Unstructured {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	if err := testkustomize.CopyDir(fsys, deployArgoCD, "/pcsync/deploy/argocd"); err != nil {
		t.Fatal(err)
	}
	name, tag, _ := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	kustomization := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
		"namespace":  argoNamespace,
		"resources":  []any{"install.yaml", "../pcsync/deploy/argocd"},
		"components": []any{"../pcsync/deploy/argocd/repo-server"},
		"images": []any{map[string]any{"name": "pcsync",
			"newName": image[:strings.LastIndex(image, "/")+1] + name, "newTag": tag}},
	}
	if err := testkustomize.WriteYAML(fsys, "/user", map[string]any{
		"kustomization.yaml": kustomization, "install.yaml": argoInstallStandIn(node, image)}); err != nil {
		t.Fatal(err)
	}
	all, err := testkustomize.Build(fsys, "/user")
	if err != nil {
		t.Fatalf("a user's kustomization of deploy/argocd: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, o := range all {
		if o.GetKind() != "Application" {
			objs = append(objs, o)
		}
	}
	return objs
}

// argoInstallStandIn is a Deployment argocd-repo-server of the shape of
// Argo CD's install.yaml: the var-files and plugins volumes, a copyutil
// init container that puts argocd-cmp-server into var-files, and a main
// container (the pause image), with Argo CD's security context. Its
// argocd-cmp-server is a stand-in that only keeps the sidecar running; its
// images are pcsync's and the pause image (no Argo CD image here).
func argoInstallStandIn(node *testcluster.RealNode, image string) map[string]any {
	tol := node.Toleration()
	labels := map[string]any{"app.kubernetes.io/name": "argocd-repo-server"}
	sc := map[string]any{"runAsNonRoot": true, "runAsUser": 999, "allowPrivilegeEscalation": false,
		"readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []any{"ALL"}},
		"seccompProfile": map[string]any{"type": "RuntimeDefault"}}
	varFiles := map[string]any{"name": "var-files", "mountPath": "/var/run/argocd"}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "argocd-repo-server", "labels": labels},
		"spec": map[string]any{
			"replicas": 1, "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"automountServiceAccountToken": false,
					"nodeSelector":                 node.NodeSelector(),
					"tolerations":                  []any{map[string]any{"key": tol.Key, "operator": string(tol.Operator), "effect": string(tol.Effect)}},
					"initContainers": []any{map[string]any{
						"name": "copyutil", "image": image, "securityContext": sc, "volumeMounts": []any{varFiles},
						"command": []any{"sh", "-c", `printf '#!/bin/sh\nexec sleep 2147483647\n' >/var/run/argocd/argocd-cmp-server && chmod 0755 /var/run/argocd/argocd-cmp-server`},
					}},
					"containers": []any{map[string]any{
						"name": "argocd-repo-server", "image": node.PauseImage(), "command": []any{"/pause"}, "securityContext": sc,
						"volumeMounts": []any{varFiles, map[string]any{"name": "plugins", "mountPath": "/home/argocd/cmp-server/plugins"}},
					}},
					"volumes": []any{
						map[string]any{"name": "var-files", "emptyDir": map[string]any{}},
						map[string]any{"name": "plugins", "emptyDir": map[string]any{}},
					},
				},
			},
		},
	}
}

// checkSidecarImage checks that the sidecar of the running pod is pcsync's
// image, as the user's images setting names it.
func checkSidecarImage(t *testing.T, pod corev1.Pod, image string) {
	t.Helper()
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == cmpContainer {
			if ctr.Image != image {
				t.Errorf("sidecar %s runs %s, want pcsync's image %s", cmpContainer, ctr.Image, image)
			}
			return
		}
	}
	t.Errorf("pod %s has no container %s", pod.Name, cmpContainer)
}

// checkSidecarSecurity checks, inside the sidecar, what its security
// context promises: uid 999, a read-only root and /tmp writable, each
// denial beside a write that succeeds.
func checkSidecarSecurity(t *testing.T, run func(io.Reader, ...string) (string, string, error)) {
	t.Helper()
	if out, _, err := run(nil, "id", "-u"); err != nil || strings.TrimSpace(out) != "999" {
		t.Errorf("id -u in the sidecar: %q, %v; want 999", out, err)
	}
	if _, _, err := run(nil, "touch", "/tmp/probe"); err != nil {
		t.Errorf("write to /tmp in the sidecar: %v", err)
	}
	// /var/tmp is mode 1777 in the image: only the read-only root refuses it.
	_, stderr, err := run(nil, "touch", "/var/tmp/probe")
	switch {
	case err == nil:
		t.Error("touch /var/tmp/probe in the sidecar succeeded; want it refused (read-only root, /tmp the only writable path)")
	case !strings.Contains(stderr, "Read-only file system"):
		t.Errorf("touch /var/tmp/probe in the sidecar: %v; want it refused as a read-only file system", err)
	default:
		t.Logf("touch /var/tmp/probe in the sidecar: refused: %s", strings.TrimSpace(stderr))
	}
}

// renderLocally runs `pcsync render .` of this tree in dir, from a plain go
// build, and returns its stdout. The sidecar's pcsync is stamped otherwise
// (imageTag): render's default image tag (examples/config's proxies name
// pcsync's own image) is the release version in every build.
func renderLocally(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command(buildCLI(t), "render", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pcsync render . in %s: %v\n%s", dir, err, stderr.String())
	}
	return string(out)
}

// tarDir returns a tar stream of dir's regular files.
func tarDir(t *testing.T, dir string) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)),
			Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		t.Fatalf("tar %s: %v", dir, err)
	}
	return &buf
}

// firstDiff shows where two texts first differ, by line.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) && i < len(g); i++ {
		if w[i] != g[i] {
			return fmt.Sprintf("line %d: want %q, got %q", i+1, w[i], g[i])
		}
	}
	return fmt.Sprintf("want %d lines, got %d", len(w), len(g))
}

// podExecIn runs command in a pod's container through the API server's
// exec, with stdin if not nil, and returns its stdout and stderr; a
// non-zero exit is an error.
func podExecIn(ctx context.Context, c *testcluster.Cluster, ns, pod, container string, stdin io.Reader, command []string) (string, string, error) {
	req := c.Client().CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdin: stdin != nil, Stdout: true, Stderr: true},
			scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(c.RESTConfig(), "GET", req.URL().String())
	if err != nil {
		return "", "", fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Stderr: &stderr})
	var exitErr utilexec.ExitError
	if errors.As(err, &exitErr) {
		return stdout.String(), stderr.String(), fmt.Errorf("exec %q in %s/%s: exit %d: %s", command, ns, pod, exitErr.ExitStatus(), stderr.String())
	}
	if err != nil {
		return stdout.String(), stderr.String(), fmt.Errorf("exec %q in %s/%s: %w (stderr %q)", command, ns, pod, err, stderr.String())
	}
	return stdout.String(), stderr.String(), nil
}
