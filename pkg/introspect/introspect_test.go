package introspect

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

func TestDetectOutsideACluster(t *testing.T) {
	self, err := Detect(context.Background(), nil, Options{NamespaceFile: filepath.Join(t.TempDir(), "absent")})
	if err != nil {
		t.Fatal(err)
	}
	if self.InCluster || !self.Inherit(config.Inherit{ImagePullSecrets: true, DNSConfig: true}).Empty() {
		t.Errorf("outside a cluster: %+v", self)
	}
	var nilSelf *Self
	if !nilSelf.Inherit(config.Inherit{ImagePullSecrets: true}).Empty() {
		t.Error("a nil Self inherits something")
	}
}

func TestMergePullSecrets(t *testing.T) {
	got := MergePullSecrets([]string{"own", "shared"}, []string{"shared", "inherited"})
	if diff := cmp.Diff([]string{"own", "shared", "inherited"}, got); diff != "" {
		t.Errorf("MergePullSecrets (-want +got):\n%s", diff)
	}
}
