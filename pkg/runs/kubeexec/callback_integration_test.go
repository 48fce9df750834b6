//go:build integration

package kubeexec

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/result"
)

// TestCallbackKeyOnlyInTheSecret, on the real control plane: a request
// with the run's JWT, by company id. The pod's PAPERCLIP_API_KEY comes from
// the per-run Secret, which holds the JWT; the JWT is in no other object
// of the namespace (the Job, its pod, events), in no file of the spool or
// the state directory but the request, and in no line of the daemon's
// logs.
func TestCallbackKeyOnlyInTheSecret(t *testing.T) {
	t.Parallel()
	lines := transcript(t, claudeTranscript)
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(time.Second), LogLines: lines,
		Company: map[string]any{"jobs": map[string]any{"retain": true}}})
	e.drop("cb-1", map[string]any{"company": nil, "companyId": e.model.Companies[0].Spec.ID,
		"context":   map[string]any{"taskId": "T-7"},
		"paperclip": map[string]any{"apiUrl": "http://127.0.0.1:3100", "apiKey": callbackJWT, "agentId": "pc-agent-7"}})
	logs := &lockedbuf.Buffer{}
	d := e.startDaemon(true, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	d.wait(t)

	res := e.result("cb-1")
	if res.Status != result.StatusSucceeded || res.Company != e.slug {
		t.Fatalf("result: status %s company %q, errorMessage %v; want succeeded for %s", res.Status, res.Company, deref(res.ErrorMessage), e.slug)
	}
	ctx := context.Background()
	job := e.jobName("cb-1")
	sec, err := e.cs.CoreV1().Secrets(e.ns).Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the run's Secret: %v", err)
	}
	if got := string(sec.Data[SecretEnvPrefix+"PAPERCLIP_API_KEY"]); got != callbackJWT {
		t.Errorf("Secret %s env.PAPERCLIP_API_KEY = %q, want the JWT", job, got)
	}
	// Every other object of the namespace, as the API server returns it.
	var objects []any
	jobs, err := e.cs.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("Jobs: %v (%d), want the retained one", err, len(jobs.Items))
	}
	objects = append(objects, jobs)
	pods, err := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objects = append(objects, pods)
	events, err := e.cs.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objects = append(objects, events)
	cms, err := e.cs.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objects = append(objects, cms)
	for _, o := range objects {
		b, _ := json.Marshal(o)
		if bytes.Contains(b, []byte(callbackJWT)) {
			t.Errorf("the JWT is in %T", o)
		}
	}
	var env map[string]string
	for _, p := range pods.Items {
		env = map[string]string{}
		for _, v := range p.Spec.Containers[0].Env {
			switch {
			case v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil:
				env[v.Name] = "secret:" + v.ValueFrom.SecretKeyRef.Name + "/" + v.ValueFrom.SecretKeyRef.Key
			default:
				env[v.Name] = v.Value
			}
		}
	}
	want := map[string]string{
		"PAPERCLIP_API_KEY":  "secret:" + job + "/env.PAPERCLIP_API_KEY",
		"PAPERCLIP_API_URL":  e.model.ServerURL(),
		"PAPERCLIP_AGENT_ID": "pc-agent-7",
		"PAPERCLIP_TASK_ID":  "secret:" + job + "/env.PAPERCLIP_TASK_ID",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("pod env %s = %q, want %q", k, env[k], v)
		}
	}
	if strings.Contains(env["PAPERCLIP_API_URL"], "127.0.0.1") {
		t.Errorf("the pod calls Paperclip at a loopback URL: %s", env["PAPERCLIP_API_URL"])
	}
	request := filepath.Join(e.spool, "cb-1.json")
	for _, root := range []string{e.spool, e.state} {
		err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() || p == request || !de.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if bytes.Contains(b, []byte(callbackJWT)) {
				t.Errorf("the JWT is in %s", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(logs.String(), callbackJWT) {
		t.Error("the JWT is in the daemon's logs")
	}
	if !strings.Contains(logs.String(), "cb-1") {
		t.Error("the captured logs do not mention the run: the check above proves nothing")
	}
}
