package health

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReadyzStates(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	c := NewChecker()
	c.now = func() time.Time { return now }
	mux := c.Mux(http.NotFoundHandler())

	get := func() (int, Report) {
		t.Helper()
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var r Report
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatalf("readyz body: %v: %s", err, rec.Body)
		}
		return rec.Code, r
	}

	steps := []struct {
		name     string
		set      func()
		wantCode int
		want     State
	}{
		{"no conditions", func() {}, 200, StateReady},
		{"cluster reachable", func() { c.Set("ClusterReachable", true, true, "", "") }, 200, StateReady},
		{"invalid config degrades", func() { c.Set("ConfigValid", false, false, "InvalidConfig", "acme.yaml:3:5: spec.id: required") }, 200, StateDegraded},
		{"cluster lost fails readiness", func() { c.Set("ClusterReachable", false, true, "Unreachable", "dial tcp: refused") }, 503, StateNotReady},
		{"both fixed", func() { c.Set("ClusterReachable", true, true, "", ""); c.Set("ConfigValid", true, false, "", "") }, 200, StateReady},
	}
	for _, s := range steps {
		s.set()
		code, r := get()
		if code != s.wantCode || r.Status != s.want {
			t.Errorf("%s: got %d %s, want %d %s", s.name, code, r.Status, s.wantCode, s.want)
		}
	}
}

func TestTransitionTimeMovesOnlyOnChange(t *testing.T) {
	c := NewChecker()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return t0 }
	c.Set("ConfigValid", false, false, "InvalidConfig", "first")
	c.now = func() time.Time { return t0.Add(time.Minute) }
	c.Set("ConfigValid", false, false, "InvalidConfig", "second")
	want := []Condition{{Type: "ConfigValid", Status: StatusFalse, Reason: "InvalidConfig", Message: "second", LastTransitionTime: t0}}
	if diff := cmp.Diff(want, c.Report().Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	c.Set("ConfigValid", true, false, "", "")
	if got := c.Report().Conditions[0].LastTransitionTime; !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("transition time = %v, want the time of the change", got)
	}
}

func TestHealthzAndMetricsRoute(t *testing.T) {
	c := NewChecker()
	c.Set("ClusterReachable", false, true, "Unreachable", "")
	mux := c.Mux(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("m")) }))
	for path, wantCode := range map[string]int{"/healthz": 200, "/metrics": 200, "/nope": 404} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != wantCode {
			t.Errorf("GET %s = %d, want %d", path, rec.Code, wantCode)
		}
	}
}
