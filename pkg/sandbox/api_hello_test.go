package sandbox

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// POST /v1/hello hands a well-formed hello to WithHello's function and
// answers 204; a malformed one, or one the function refuses, is a 400
// that says why.
func TestHello(t *testing.T) {
	tests := []struct {
		name, body string
		refuse     bool
		wantCode   int
		wantIn     string
		wantTaken  []Hello
	}{
		{name: "adapter", body: `{"component":"adapter","name":"@pcsync/paperclip-adapter","version":"0.1.0"}`, wantCode: 204,
			wantTaken: []Hello{{"adapter", "@pcsync/paperclip-adapter", "0.1.0"}}},
		{name: "no version", body: `{"component":"plugin","name":"x"}`, wantCode: 400, wantIn: "component and version are required"},
		{name: "wrong type", body: `{"component":1}`, wantCode: 400, wantIn: "component"},
		{name: "refused", body: `{"component":"ui","name":"x","version":"1"}`, refuse: true, wantCode: 400, wantIn: "hello: no such component",
			wantTaken: []Hello{{"ui", "x", "1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var taken []Hello
			h := NewAPI(offlineManager(), "unused.sock").WithHello(func(c, n, v string) error {
				taken = append(taken, Hello{c, n, v})
				if tt.refuse {
					return errors.New("no such component")
				}
				return nil
			}).Handler()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/hello", strings.NewReader(tt.body)))
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantIn) {
				t.Errorf("answer %d %q, want %d with %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantIn)
			}
			if d := cmp.Diff(tt.wantTaken, taken); d != "" {
				t.Errorf("hellos taken (-want +got):\n%s", d)
			}
		})
	}
}
