package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

// TestSecretStringIsNeverShown: the run's JWT prints, logs and encodes as
// "[redacted]" whatever the verb; Reveal gives it.
func TestSecretStringIsNeverShown(t *testing.T) {
	const jwt = "eyJhbGciOiJIUzI1NiJ9.secret"
	cb := config.PaperclipCallback{APIKey: jwt, AgentID: "ag-1"}
	js, err := json.Marshal(cb)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("run", "key", cb.APIKey, "callback", cb)
	for _, shown := range []string{fmt.Sprint(cb), fmt.Sprintf("%+v %#v %q %x %s", cb, cb, cb.APIKey, cb.APIKey, cb.APIKey), string(js), logged.String()} {
		if strings.Contains(shown, jwt) || !strings.Contains(shown, config.Redacted) {
			t.Errorf("shown as %s", shown)
		}
	}
	if cb.APIKey.Reveal() != jwt {
		t.Errorf("Reveal() = %q", cb.APIKey.Reveal())
	}
	if got := fmt.Sprint(config.SecretString("")); got != "" {
		t.Errorf("an empty secret shows as %q", got)
	}
}

func TestParseRunValid(t *testing.T) {
	tests := []struct {
		name, file, data string
		want             config.RunRequest
	}{
		{"json", "r1.json", `{"apiVersion": "pcsync.io/v1alpha1", "kind": "Run", "company": "acme", "agent": "coder",
	"prompt": "fix the build \/ please", "context": {"taskId": "T-1", "attempt": 2, "urgent": true}}`,
			config.RunRequest{APIVersion: config.APIVersion, Kind: "Run", Company: "acme", Agent: "coder", Prompt: "fix the build / please",
				Context: map[string]any{"taskId": "T-1", "attempt": 2.0, "urgent": true}}},
		{"yaml", "r2.yaml", "apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: acme\nagent: coder\nprompt: |\n  two\n  lines\nrunId: run-7\nsessionId: s-1\ntimeoutSec: 600\n",
			config.RunRequest{APIVersion: config.APIVersion, Kind: "Run", Company: "acme", Agent: "coder", Prompt: "two\nlines\n", RunID: "run-7", SessionID: "s-1", TimeoutSec: 600}},
		{"paperclip", "2c1e.json", `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","companyId":"9b2f-co","agent":"coder","prompt":"p",
	"paperclip":{"apiUrl":"http://127.0.0.1:3100","apiKey":"eyJ.jwt.sig","agentId":"ag-1","runId":"2c1e"}}`,
			config.RunRequest{APIVersion: config.APIVersion, Kind: "Run", CompanyID: "9b2f-co", Agent: "coder", Prompt: "p",
				Paperclip: &config.PaperclipCallback{APIURL: "http://127.0.0.1:3100", APIKey: "eyJ.jwt.sig", AgentID: "ag-1", RunID: "2c1e"}}},
		{"json content in a yaml name", "r3.yaml", `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"a","agent":"b","prompt":"p"}`,
			config.RunRequest{APIVersion: config.APIVersion, Kind: "Run", Company: "a", Agent: "b", Prompt: "p"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := config.ParseRun(tt.file, []byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRunInvalid(t *testing.T) {
	tests := []struct {
		name, file, data string
		want             []string
	}{
		{"unknown field", "r.json", "{\"apiVersion\": \"pcsync.io/v1alpha1\", \"kind\": \"Run\", \"company\": \"acme\",\n \"agent\": \"coder\", \"prompt\": \"p\", \"image\": \"evil:latest\"}",
			[]string{`r.json:2:35: image: field not allowed`}},
		{"several errors", "r.yaml", "apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: Acme\nagent: coder\nprompt: \"\"\nnamespace: kube-system\n",
			[]string{
				`r.yaml:3:10: company: invalid value "Acme": must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit`,
				`r.yaml:5:9: prompt: invalid value "": must not be empty`,
				`r.yaml:6:1: namespace: field not allowed`,
			}},
		{"missing fields", "r.yaml", "apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: acme\n",
			[]string{`r.yaml:1:1: agent: field is required`, `r.yaml:1:1: prompt: field is required`}},
		{"wrong kind", "r.yaml", "apiVersion: pcsync.io/v1alpha1\nkind: Company\n",
			[]string{`r.yaml:2:7: kind: unknown kind "Company": must be one of Run`}},
		{"json syntax", "r.json", "{\n  \"kind\": \"Run\",\n  oops\n}",
			[]string{`r.json:3:3: JSON syntax error: invalid character 'o' looking for beginning of object key string`}},
		{"duplicate json key", "r.json", `{"kind": "Run", "kind": "Run"}`,
			[]string{`r.json:1:17: key "kind" repeated (first at line 1)`}},
		{"two documents", "r.yaml", "kind: Run\n---\nkind: Run\n", []string{`r.yaml:3:1: a run request holds one document`}},
		{"empty", "r.yaml", "", []string{`r.yaml:1:1: run request is empty`}},
		{"not a mapping", "r.yaml", "- a\n- b\n", []string{`r.yaml:1:1: a document must be a mapping with apiVersion, kind, metadata and spec`}},
		// YAML syntax errors name the token to fix, not where its block began.
		{"mis-indented line", "r.yaml", "apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: acme\nagent: coder\ncontext:\n  taskId: T-1\n   wakeReason: assigned\nprompt: hi\n",
			[]string{`r.yaml:7:4: YAML syntax error: mapping values are not allowed in this context`}},
		{"unclosed quote", "r.yaml", "apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: acme\nagent: coder\nprompt: \"fix the test\nrunId: r1\n",
			[]string{`r.yaml:5:9: YAML syntax error: found unexpected end of stream`}},
		{"unclosed flow list", "r.yaml", "apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: acme\nagent: [coder\nprompt: hi\n",
			[]string{`r.yaml:4:8: YAML syntax error: did not find expected ',' or ']'`}},
		{"bad context key", "r.yaml", "apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: a\nagent: b\nprompt: p\ncontext:\n  task-id: x\n",
			[]string{`r.yaml:7:3: context.task-id: field not allowed`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.ParseRun(tt.file, []byte(tt.data))
			var ce *config.Errors
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *config.Errors", err)
			}
			if diff := cmp.Diff(tt.want, ce.Lines()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRunHostile(t *testing.T) {
	bomb := "a: &a [x,x,x,x,x,x,x,x,x,x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		bomb += n + ": &" + n + " [" + strings.Repeat("*"+prev+",", 9) + "*" + prev + "]\n"
		prev = n
	}
	big := `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"a","agent":"b","prompt":"` + strings.Repeat("x", 1<<20+1) + `"}`
	tests := []struct{ name, data, want string }{
		{"alias bomb", bomb, "too large"},
		{"binary", "\x00\x01\x02\xff\xfe\x7f{{{[[[", "syntax error"},
		{"utf16", "\xff\xfe\x00a", ""},
		{"prompt over 1 MiB", big, "larger than 1 MiB"},
		{"deep nesting", strings.Repeat("[", 20000) + strings.Repeat("]", 20000), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.ParseRun("r.yaml", []byte(tt.data))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseRunConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				data := "apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: acme\nagent: coder\nprompt: p\n"
				if i%2 == 1 {
					data += "bogus: 1\n"
				}
				_, err := config.ParseRun("r.yaml", []byte(data))
				if (err != nil) != (i%2 == 1) {
					t.Errorf("worker %d: err = %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestServerURL: Settings spec.server.url, else a Service named like the
// server's app label in its namespace.
func TestServerURL(t *testing.T) {
	tests := []struct {
		server config.Server
		want   string
	}{
		{config.Server{Namespace: "paperclip", PodSelector: map[string]string{"app": "paperclip-server"}, Port: 3100}, "http://paperclip-server.paperclip.svc:3100"},
		{config.Server{Namespace: "tools", PodSelector: map[string]string{"role": "api"}, Port: 8080}, "http://paperclip-server.tools.svc:8080"},
		{config.Server{Namespace: "tools", PodSelector: map[string]string{"app": "pc"}, Port: 80, URL: "https://paperclip.example.com"}, "https://paperclip.example.com"},
	}
	for _, tt := range tests {
		var m config.Model
		m.Settings.Spec.Server = tt.server
		if got := m.ServerURL(); got != tt.want {
			t.Errorf("ServerURL(%+v) = %q, want %q", tt.server, got, tt.want)
		}
	}
}
