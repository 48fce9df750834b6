package hookapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/sandbox"
)

// TestSyncBadRequests: a sync request that does not say what to move, or
// says it wrong, is refused before any lease is looked up, naming what is
// wrong; no lease is a 404-class refusal of its own (sandbox.ErrNoLease).
func TestSyncBadRequests(t *testing.T) {
	for _, tc := range []struct {
		name, route, body string
		wantStatus        int
		want              ErrorResponse
	}{
		{"a put with no head line", "put", `{"lease":{"providerLeaseId":"pcsync-sbx-1"}}`, http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: `params: no head line: the body ended before its first "\n"`}}},
		{"a put whose head is not JSON", "put", "lease=x\nbytes", http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: "params: not JSON (at byte 1): invalid character 'l' looking for beginning of value"}}},
		{"a put to a relative path", "put", `{"lease":{"providerLeaseId":"pcsync-sbx-1"},"targetPath":"workspace/a","kind":"file"}` + "\nbytes", http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: `params.targetPath: "workspace/a" is not a clean absolute POSIX path below /`}}},
		{"a put of an unknown kind", "put", `{"lease":{"providerLeaseId":"pcsync-sbx-1"},"targetPath":"/w/a","kind":"socket"}` + "\n", http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: `params.kind: "socket" is neither "file" nor "directory"`}}},
		{"a get of a path with ..", "get", `{"lease":{"providerLeaseId":"pcsync-sbx-1"},"sourcePath":"/w/../etc","kind":"directory"}`, http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: `params.sourcePath: "/w/../etc" is not a clean absolute POSIX path below /`}}},
		{"a get of /", "get", `{"lease":{"providerLeaseId":"pcsync-sbx-1"},"sourcePath":"/","kind":"directory"}`, http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: `params.sourcePath: "/" is not a clean absolute POSIX path below /`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			offlineAPI(t).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/sync/"+tc.route, strings.NewReader(tc.body)))
			var got ErrorResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("answer %s: %v", rec.Body, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || rec.Code != tc.wantStatus {
				t.Errorf("status %d, want %d; answer (-want +got):\n%s", rec.Code, tc.wantStatus, diff)
			}
		})
	}
}
