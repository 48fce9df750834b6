package kubeexec

import (
	"context"
	"flag"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/golden"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/runs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// testModel loads testdata/config once per test binary.
var testModel = sync.OnceValues(func() (*config.Model, error) {
	return config.Load(context.Background(), filepath.Join("testdata", "config"), config.LoadOptions{})
})

func loadModel(t testing.TB) *config.Model {
	t.Helper()
	m, err := testModel()
	if err != nil {
		t.Fatalf("load testdata/config: %v", err)
	}
	return m
}

// parseRun accepts a request the way the daemon does.
func parseRun(t testing.TB, m *config.Model, spool, file, body string) *runs.Run {
	t.Helper()
	name := strings.TrimSuffix(file, filepath.Ext(file))
	r, err := runs.ParseRequest(m, runs.Paths{Spool: spool, Name: name}, file, []byte(body))
	if err != nil {
		t.Fatalf("ParseRequest(%s): %v", file, err)
	}
	r.RequestFile = filepath.Join(spool, file)
	return r
}

// testEnviron is the daemon environment of the builder tests.
var testEnviron = []string{
	"PATH=/usr/local/bin:/usr/bin",
	"HOME=/root",
	"ANTHROPIC_API_KEY=sk-ant-test-0123456789",
	"OPENAI_API_KEY=sk-openai-test-0123456789",
	"OPENAI_BASE_URL=https://daemon.example.com/v1",
	"UNRELATED_SECRET=must-not-be-forwarded",
}

var builderCases = []struct {
	name, file, body string
}{
	{
		name: "acme-basic",
		file: "fix-login.json",
		body: `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"coder",
			"prompt":"Fix the login bug; don't touch $(HOME).",
			"context":{"taskId":"T-42","wakeReason":"assigned","priority":2}}`,
	},
	{
		name: "globex-long-names-sessions",
		file: "2026-08-14-refactor-the-billing-module-into-smaller-services.yaml",
		body: `apiVersion: pcsync.io/v1alpha1
kind: Run
company: globex-corporation-research-and-development
agent: very-long-agent-name-for-refactoring-work
prompt: Split billing into services.
sessionId: 0199a1b2-thread
timeoutSec: 300
`,
	},
}

func TestBuildGolden(t *testing.T) {
	m := loadModel(t)
	for _, tc := range builderCases {
		t.Run(tc.name, func(t *testing.T) {
			r := parseRun(t, m, "/spool", tc.file, tc.body)
			in, err := NewInput(r, testEnviron, BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			job, err := BuildJob(in, BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			job.UID = types.UID("00000000-0000-0000-0000-0000000000aa")
			sec, err := BuildSecret(in, job, BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			jy, err := yaml.Marshal(job)
			if err != nil {
				t.Fatal(err)
			}
			sy, err := yaml.Marshal(secretForGolden(sec))
			if err != nil {
				t.Fatal(err)
			}
			got := string(jy) + "---\n" + string(sy)
			golden.File(t, filepath.Join("testdata", "golden", tc.name+".yaml"), []byte(got), *update)
		})
	}
}

// secretForGolden shows the Secret's values as text, which reads better in
// the golden file than base64.
func secretForGolden(s *corev1.Secret) *corev1.Secret {
	c := s.DeepCopy()
	c.StringData = map[string]string{}
	for k, v := range c.Data {
		c.StringData[k] = string(v)
	}
	c.Data = nil
	return c
}

// TestBuildRestricted checks the Pod Security "restricted" rules and the
// hardening of the issue on every builder case, independently of the golden
// files.
func TestBuildRestricted(t *testing.T) {
	m := loadModel(t)
	for _, tc := range builderCases {
		t.Run(tc.name, func(t *testing.T) {
			r := parseRun(t, m, "/spool", tc.file, tc.body)
			in, err := NewInput(r, testEnviron, BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			job, err := BuildJob(in, BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ps := job.Spec.Template.Spec
			if *job.Spec.BackoffLimit != 0 || ps.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("backoffLimit %d, restartPolicy %s; want 0, Never", *job.Spec.BackoffLimit, ps.RestartPolicy)
			}
			if *ps.AutomountServiceAccountToken || ps.ServiceAccountName != "paperclip-tenant-sa" {
				t.Errorf("service account %q automount %v", ps.ServiceAccountName, *ps.AutomountServiceAccountToken)
			}
			sc := ps.SecurityContext
			if !*sc.RunAsNonRoot || *sc.RunAsUser != 1000 || *sc.RunAsGroup != 1000 || *sc.FSGroup != 1000 ||
				*sc.FSGroupChangePolicy != corev1.FSGroupChangeOnRootMismatch || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod security context %+v", sc)
			}
			volumes := map[string]corev1.Volume{}
			for _, v := range ps.Volumes {
				volumes[v.Name] = v
				if v.EmptyDir == nil && v.Secret == nil && v.PersistentVolumeClaim == nil {
					t.Errorf("volume %s has a type restricted pods may not use", v.Name)
				}
				// One agent must not fill its node's disk: every emptyDir
				// is bounded by the company's jobs.emptyDirSizeLimit.
				if want := m.Jobs(in.Company).EmptyDirSizeLimit; v.EmptyDir != nil &&
					(v.EmptyDir.SizeLimit == nil || want == nil || v.EmptyDir.SizeLimit.String() != string(*want)) {
					t.Errorf("volume %s: emptyDir sizeLimit %v, want %v", v.Name, v.EmptyDir.SizeLimit, want)
				}
			}
			for _, c := range append(append([]corev1.Container{}, ps.InitContainers...), ps.Containers...) {
				csc := c.SecurityContext
				if csc == nil || *csc.AllowPrivilegeEscalation || !*csc.ReadOnlyRootFilesystem ||
					len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" || len(csc.Capabilities.Add) != 0 {
					t.Errorf("container %s security context %+v", c.Name, csc)
				}
				writable := map[string]bool{}
				for _, vm := range c.VolumeMounts {
					if !vm.ReadOnly && (volumes[vm.Name].EmptyDir != nil || volumes[vm.Name].PersistentVolumeClaim != nil) {
						writable[vm.MountPath] = true
					}
				}
				home := ""
				for _, e := range c.Env {
					if e.Name == "HOME" {
						home = e.Value
					}
				}
				for _, dir := range []string{"/workspace", "/tmp", "/cache"} {
					if !writable[dir] {
						t.Errorf("container %s: %s is not a writable mount", c.Name, dir)
					}
				}
				homeWritable := false
				for dir := range writable {
					if home == dir || strings.HasPrefix(home, dir+"/") {
						homeWritable = true
					}
				}
				if !homeWritable {
					t.Errorf("container %s: HOME %q is not on a writable mount (%v)", c.Name, home, writable)
				}
				if c.Resources.Limits.Memory().IsZero() {
					t.Errorf("container %s has no memory limit", c.Name)
				}
			}
		})
	}
}

// TestSecretsStayInTheSecret checks that no secret value appears anywhere in
// the Job, and that every one is in the Secret.
func TestSecretsStayInTheSecret(t *testing.T) {
	m := loadModel(t)
	for _, tc := range builderCases {
		t.Run(tc.name, func(t *testing.T) {
			r := parseRun(t, m, "/spool", tc.file, tc.body)
			in, err := NewInput(r, testEnviron, BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			job, err := BuildJob(in, BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			jy, _ := yaml.Marshal(job)
			secrets := []string{r.Request.Prompt, "sk-ant-test-0123456789", "sk-openai-test-0123456789", "T-42", "assigned"}
			for _, s := range secrets {
				if strings.Contains(string(jy), s) {
					t.Errorf("secret value %q appears in the Job", s)
				}
			}
			if strings.Contains(string(jy), "must-not-be-forwarded") {
				t.Error("a daemon variable that is not an env key reached the Job")
			}
			sec, err := BuildSecret(in, job, BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(sec.Data[SecretKeyPrompt]); got != r.Request.Prompt {
				t.Errorf("prompt in Secret = %q, want %q", got, r.Request.Prompt)
			}
			if len(sec.OwnerReferences) != 1 || !*sec.OwnerReferences[0].Controller || sec.OwnerReferences[0].Kind != "Job" {
				t.Errorf("owner references %+v", sec.OwnerReferences)
			}
		})
	}
}

func TestSecretTooLarge(t *testing.T) {
	m := loadModel(t)
	body := `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"coder","prompt":"` +
		strings.Repeat("x", 1<<20) + `"}`
	r := parseRun(t, m, "/spool", "big.json", body)
	in, err := NewInput(r, testEnviron, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job, err := BuildJob(in, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = BuildSecret(in, job, BuildOptions{})
	if err == nil || !strings.Contains(err.Error(), "Secret/paperclip-acme/") || strings.Contains(err.Error(), "sk-ant") {
		t.Fatalf("BuildSecret error = %v; want a size error naming the Secret and no value", err)
	}
}

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestJobName(t *testing.T) {
	long := strings.Repeat("a", 43)
	tests := []struct {
		company, agent, run string
		wantPrefix          string
	}{
		{"acme", "coder", "fix-login", "acme-coder-fix-login-"},
		{long, strings.Repeat("b", 63), strings.Repeat("c", 63), long + "-bbbbbbbbbb-"},
		{"x", "y", "z", "x-y-z-"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		got := JobName(tt.company, tt.agent, tt.run)
		if len(got) > 63 || !dnsLabelRE.MatchString(got) {
			t.Errorf("JobName(%q, %q, %q) = %q: not a DNS label of at most 63", tt.company, tt.agent, tt.run, got)
		}
		if !strings.HasPrefix(got, tt.wantPrefix) {
			t.Errorf("JobName(%q, %q, %q) = %q, want prefix %q", tt.company, tt.agent, tt.run, got, tt.wantPrefix)
		}
		if got != JobName(tt.company, tt.agent, tt.run) {
			t.Errorf("JobName is not deterministic")
		}
		seen[got] = true
	}
	// The parts' boundaries matter.
	if a, b := JobName("acme", "x", "y-z"), JobName("acme", "x-y", "z"); a == b {
		t.Errorf("JobName collides: %s", a)
	}
	// Long names differing only at the end stay distinct.
	if a, b := JobName(long, long, long+"1"), JobName(long, long, long+"2"); a == b {
		t.Errorf("JobName collides for long names: %s", a)
	}
}
