package render

import (
	"context"
	"testing"

	"github.com/pcsync/pcsync/pkg/config"
)

// Rendered objects are ordinary unstructured objects: every consumer may
// DeepCopy them, which panics on Go int values (JSON numbers are int64 or
// float64 in unstructured content).
func TestRenderedObjectsDeepCopy(t *testing.T) {
	for _, dir := range []string{"../../testdata/render/irsa-sessions/config", "../../testdata/render/standard-egress/config", "../../testdata/render/cilium/config", "../../testdata/render/patches/config"} {
		m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		out, err := Render(m, DefaultOptions())
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, o := range out.Objects {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s: %s/%s: DeepCopy panicked: %v", dir, o.GetKind(), o.GetName(), r)
					}
				}()
				_ = o.DeepCopy()
			}()
		}
	}
}
