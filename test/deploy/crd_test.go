package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	cs "github.com/pcsync/pcsync/pkg/companystatus"
)

// TestCompanyStatusCRD: deploy/base ships the CompanyStatus CRD the
// daemon writes (pkg/companystatus's, byte for byte).
func TestCompanyStatusCRD(t *testing.T) {
	got, err := os.ReadFile(filepath.Join("..", "..", "deploy", "base", "companystatus-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, cs.CRD) {
		t.Errorf("deploy/base/companystatus-crd.yaml differs from pkg/companystatus/crd.yaml: copy it over")
	}
}
