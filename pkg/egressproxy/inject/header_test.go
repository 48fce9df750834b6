package inject

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHeaderCredential: a header credential, built from its config as the
// proxy builds it, takes the run's token in its header (after its scheme)
// and sends the key there to its base URL, the path kept after the
// base's; another token reaches nothing.
func TestHeaderCredential(t *testing.T) {
	up := newStandIn(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "registry")
	if err := os.WriteFile(keyFile, []byte("real-registry-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := `{"company":"acme","tokensFile":"/x","credentials":[{"name":"registry","provider":"header","type":"apiKey",
		"upstream":"` + up.srv.URL + `/v2","keyFile":"` + keyFile + `","header":{"name":"X-Registry-Token","scheme":"Token"}}]}`
	c, err := ParseConfig([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	token, _ := NewToken()
	tr := up.srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs}
	h, err := NewHandler(c.Build(), Options{Company: "acme", Tokens: oneToken{token: token}, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	type got struct {
		Code         int
		Header, Path string
	}
	for _, tc := range []struct {
		name, value string
		want        got
	}{
		{"the run's token", "Token " + token, got{200, "Token real-registry-key", "/v2/images/list"}},
		{"forged", "Token pcsync-run-forged", got{403, "", ""}},
		{"in another header", "", got{403, "", ""}},
	} {
		n := up.count()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/credentials/registry/images/list", nil)
		if tc.value != "" {
			req.Header.Set("X-Registry-Token", tc.value)
		} else {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		g := got{Code: resp.StatusCode}
		if up.count() > n {
			hd, p := up.last()
			g.Header, g.Path = hd.Get("X-Registry-Token"), p
		}
		if diff := cmp.Diff(tc.want, g); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func (s *standIn) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.paths)
}
