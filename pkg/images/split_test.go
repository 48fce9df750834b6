package images

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		ref  string
		want [3]string
	}{
		{"reg.example.com:5000/org/pcsync:v1.2", [3]string{"reg.example.com:5000/org", "pcsync", "v1.2"}},
		{"127.0.0.1:5000/pcsync:dev", [3]string{"127.0.0.1:5000", "pcsync", "dev"}},
		{"reg.example.com/a/b/pcsync:v1@sha256:0123", [3]string{"reg.example.com/a/b", "pcsync", "v1"}},
		{"reg.example.com/pcsync@sha256:0123", [3]string{"reg.example.com", "pcsync", ""}},
		{"pcsync:dev", [3]string{"", "pcsync", "dev"}},
		{"pcsync", [3]string{"", "pcsync", ""}},
	}
	for _, tt := range tests {
		r, n, tag := Split(tt.ref)
		if diff := cmp.Diff(tt.want, [3]string{r, n, tag}); diff != "" {
			t.Errorf("Split(%q) (-want +got):\n%s", tt.ref, diff)
		}
	}
}
