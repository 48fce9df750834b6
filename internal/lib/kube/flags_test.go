package kube

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: one
  cluster: {server: "https://one.example:6443"}
- name: two
  cluster: {server: "https://two.example:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx-one
  context: {cluster: one, user: u}
- name: ctx-two
  context: {cluster: two, user: u}
current-context: ctx-one
`

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRESTConfigLoadingRules(t *testing.T) {
	path := writeKubeconfig(t)
	tests := []struct {
		name       string
		flags      Flags
		env        string
		wantHost   string
		wantQPS    float32
		wantBurst  int
		wantLimits bool
	}{
		{name: "explicit path, current context", flags: Flags{Kubeconfig: path}, wantHost: "https://one.example:6443",
			wantQPS: DefaultQPS, wantBurst: DefaultBurst, wantLimits: true},
		{name: "explicit context", flags: Flags{Kubeconfig: path, Context: "ctx-two", QPS: 7, Burst: 9},
			wantHost: "https://two.example:6443", wantQPS: 7, wantBurst: 9, wantLimits: true},
		{name: "KUBECONFIG env", env: path, flags: Flags{Context: "ctx-two"}, wantHost: "https://two.example:6443",
			wantQPS: DefaultQPS, wantBurst: DefaultBurst, wantLimits: true},
		{name: "no rate limit", flags: Flags{Kubeconfig: path, QPS: -1}, wantHost: "https://one.example:6443",
			wantQPS: -1, wantBurst: DefaultBurst},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			t.Setenv("HOME", t.TempDir())
			cfg, err := tt.flags.RESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tt.wantHost || cfg.QPS != tt.wantQPS || cfg.Burst != tt.wantBurst {
				t.Errorf("host/qps/burst = %s/%v/%d, want %s/%v/%d", cfg.Host, cfg.QPS, cfg.Burst, tt.wantHost, tt.wantQPS, tt.wantBurst)
			}
			if (cfg.RateLimiter != nil) != tt.wantLimits {
				t.Errorf("rate limiter set = %v, want %v", cfg.RateLimiter != nil, tt.wantLimits)
			}
		})
	}
}

func TestRESTConfigUnknownContext(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	f := Flags{Kubeconfig: writeKubeconfig(t), Context: "nope"}
	if _, err := f.RESTConfig(); err == nil {
		t.Fatal("want an error for an unknown context")
	}
}

func TestRESTConfigNothingConfigured(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := DefaultFlags().RESTConfig()
	if err == nil {
		t.Fatal("want an error without any configuration")
	}
}

func TestAddFlags(t *testing.T) {
	f := DefaultFlags()
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f.AddFlags(fs)
	if err := fs.Parse([]string{"--kubeconfig=/k", "--context=c", "--kube-qps=12.5", "--kube-burst=30"}); err != nil {
		t.Fatal(err)
	}
	want := Flags{Kubeconfig: "/k", Context: "c", QPS: 12.5, Burst: 30}
	if f != want {
		t.Errorf("flags = %+v, want %+v", f, want)
	}
}

func TestRequestCounter(t *testing.T) {
	var refused atomic.Bool
	refused.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodDelete && refused.Swap(false) {
			// Once: client-go sends it again after Retry-After.
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"x"}}`))
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"" + srv.URL + "\"}\n" +
		"users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n"
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Flags{Kubeconfig: path}.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	var c RequestCounter
	c.Instrument(cfg)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()
	_, _ = cs.CoreV1().Namespaces().Get(ctx, "x", metav1GetOptions())
	_ = cs.CoreV1().Namespaces().Delete(ctx, "x", metav1DeleteOptions())
	if c.Reads() != 1 || c.Mutations() != 2 || c.TooMany() != 1 {
		t.Errorf("reads/mutations/429s = %d/%d/%d, want 1/2/1 (the delete refused once, then sent again)",
			c.Reads(), c.Mutations(), c.TooMany())
	}
	c.Reset()
	if c.Reads() != 0 || c.Mutations() != 0 || c.TooMany() != 0 {
		t.Error("Reset did not zero the counts")
	}
}
