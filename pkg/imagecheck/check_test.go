package imagecheck

import (
	"context"
	"encoding/base64"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

const (
	testUser     = "puller"
	testPassword = "s3cret-pull-token"
)

// startRegistry serves go-containerregistry's registry on 127.0.0.1, behind
// basic auth when private, with one image pushed; it returns host:port and
// the image's digest.
func startRegistry(t *testing.T, private bool, repoTag string) (string, string) {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	h := reg
	if private {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != testUser || p != testPassword {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			reg.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	auth := authn.Anonymous
	if private {
		auth = &authn.Basic{Username: testUser, Password: testPassword}
	}
	if err := remote.Write(ref, img, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return host, d.String()
}

func dockerConfigJSON(host, user, pass string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	return []byte(`{"auths":{"https://` + host + `/v1/":{"auth":"` + auth + `"}}}`)
}

func TestCheck(t *testing.T) {
	pub, pubDigest := startRegistry(t, false, "pcsync/pcsync-agent-claude:v1")
	priv, privDigest := startRegistry(t, true, "acme/pcsync-agent-codex:v1")

	good, wrong := &Keychain{}, &Keychain{}
	if err := good.Add("Secret/t/regcred", dockerConfigJSON(priv, testUser, testPassword)); err != nil {
		t.Fatal(err)
	}
	if err := wrong.Add("Secret/t/regcred", dockerConfigJSON(priv, testUser, "not-it")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		keychain authn.Keychain
		image    string
		want     Status
		digest   string
	}{
		{name: "public image", image: pub + "/pcsync/pcsync-agent-claude:v1", want: StatusFound, digest: pubDigest},
		{name: "missing tag", image: pub + "/pcsync/pcsync-agent-claude:v2", want: StatusMissing},
		{name: "missing repository", image: pub + "/pcsync/pcsync-agent-cursor:v1", want: StatusMissing},
		{name: "private image with its pull secret", keychain: good, image: priv + "/acme/pcsync-agent-codex:v1", want: StatusFound, digest: privDigest},
		{name: "private image anonymously", image: priv + "/acme/pcsync-agent-codex:v1", want: StatusDenied},
		{name: "private image with a wrong password", keychain: wrong, image: priv + "/acme/pcsync-agent-codex:v1", want: StatusDenied},
		{name: "no registry listening", image: "127.0.0.1:1/pcsync/pcsync:v1", want: StatusUnreachable},
		{name: "not a reference", image: "Pcsync Agent", want: StatusInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := DefaultOptions()
			if tt.keychain != nil {
				opts.Keychain = tt.keychain
			}
			got := Check(context.Background(), []string{tt.image, tt.image}, opts)
			if len(got) != 2 || got[0] != got[1] {
				t.Fatalf("Check of one image twice = %+v, want two equal results", got)
			}
			if diff := cmp.Diff([]string{string(tt.want), tt.digest}, []string{string(got[0].Status), got[0].Digest}); diff != "" {
				t.Errorf("status, digest (-want +got):\n%s\n%s", diff, got[0])
			}
			if tt.want != StatusFound && got[0].Detail == "" {
				t.Errorf("no detail for %s", got[0])
			}
			if strings.Contains(got[0].String(), testPassword) || strings.Contains(got[0].String(), base64.StdEncoding.EncodeToString([]byte(testUser+":"+testPassword))) {
				t.Errorf("result %q holds the credential", got[0])
			}
		})
	}
}

func TestKeychainAdd(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		host    string
		want    authn.AuthConfig
		wantErr string
	}{
		{name: "auth field", data: `{"auths":{"reg.example.com:5000":{"auth":"dTpw"}}}`, host: "reg.example.com:5000",
			want: authn.AuthConfig{Username: "u", Password: "p"}},
		{name: "username and password, URL key", data: `{"auths":{"https://reg.example.com/v1/":{"username":"u","password":"p"}}}`, host: "reg.example.com",
			want: authn.AuthConfig{Username: "u", Password: "p"}},
		{name: "Docker Hub", data: `{"auths":{"https://index.docker.io/v1/":{"auth":"dTpw"}}}`, host: "index.docker.io",
			want: authn.AuthConfig{Username: "u", Password: "p"}},
		{name: ".dockercfg", data: `{"reg.example.com":{"auth":"dTpw"}}`, host: "reg.example.com",
			want: authn.AuthConfig{Username: "u", Password: "p"}},
		{name: "another host is anonymous", data: `{"auths":{"reg.example.com":{"auth":"dTpw"}}}`, host: "other.example.com"},
		{name: "bad auth", data: `{"auths":{"reg.example.com":{"auth":"not base64 at all: hunter2"}}}`,
			wantErr: `Secret/t/regcred: auths["reg.example.com"].auth is not base64 of user:password`},
		{name: "not JSON", data: `hunter2`, wantErr: `Secret/t/regcred: not a docker config (.dockerconfigjson or .dockercfg)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &Keychain{}
			err := k.Add("Secret/t/regcred", []byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Add error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			reg, err := name.NewRegistry(tt.host)
			if err != nil {
				t.Fatal(err)
			}
			a, err := k.Resolve(reg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.Authorization()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("credentials (-want +got):\n%s", diff)
			}
		})
	}
}
