package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestWrapTransportCounts sends real requests through the wrapped transport
// to a server on loopback: each is counted once by verb (a GET with
// watch=true is a WATCH) and status code, and a request that gets no answer
// is counted with code "error".
func TestWrapTransportCounts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	m := New()
	c := &http.Client{Transport: m.WrapTransport(http.DefaultTransport)}
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/pods"},
		{http.MethodGet, "/api/v1/pods?watch=true"},
		{http.MethodGet, "/api/v1/pods?watch=true&resourceVersion=5"},
		{http.MethodPatch, "/api/v1/namespaces/a"},
		{http.MethodGet, "/missing"},
	} {
		r, err := http.NewRequest(req.method, srv.URL+req.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	r, _ := http.NewRequest(http.MethodDelete, "http://127.0.0.1:1/x", nil)
	if _, err := c.Do(r); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	got := map[string]float64{}
	for _, lv := range [][2]string{{"GET", "200"}, {"WATCH", "200"}, {"PATCH", "200"}, {"GET", "404"}, {"DELETE", "error"}, {"POST", "200"}} {
		got[lv[0]+" "+lv[1]] = testutil.ToFloat64(m.apiRequests.requests.WithLabelValues(lv[0], lv[1]))
	}
	want := map[string]float64{"GET 200": 1, "WATCH 200": 2, "PATCH 200": 1, "GET 404": 1, "DELETE error": 1, "POST 200": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pcsync_kube_api_requests_total (-want +got):\n%s", diff)
	}
}
