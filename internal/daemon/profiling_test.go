package daemon

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/metrics"
)

// TestProfilingServedOnlyWhenAsked: /debug/pprof/ is there with Profiling
// and not without; /metrics and /healthz are served either way.
func TestProfilingServedOnlyWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		profiling bool
		want      map[string]int
	}{
		{false, map[string]int{"/metrics": 200, "/healthz": 200, "/debug/pprof/heap": 404, "/debug/pprof/": 404}},
		{true, map[string]int{"/metrics": 200, "/healthz": 200, "/debug/pprof/heap": 200, "/debug/pprof/": 200}},
	} {
		d := &daemon{opts: Options{Profiling: tc.profiling, Health: health.NewChecker(), Metrics: metrics.New()}}
		srv := httptest.NewServer(d.handler())
		for path, want := range tc.want {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("profiling %v: GET %s: %d, want %d", tc.profiling, path, resp.StatusCode, want)
			}
		}
		srv.Close()
	}
}
