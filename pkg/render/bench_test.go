package render_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/config/configtest"
	"github.com/pcsync/pcsync/pkg/fastpath"
	"github.com/pcsync/pcsync/pkg/render"
)

var fleetSizes = []int{10, 100, 1000}

func loadFleet(b *testing.B, n int) *config.Model {
	b.Helper()
	dir := b.TempDir()
	if err := configtest.WriteFleet(dir, configtest.FleetOptions{Companies: n}); err != nil {
		b.Fatal(err)
	}
	m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// paths are the two ways of rendering: the fast paths (the default) and
// their reference (render.Options.Reference; see package fastpath).
var paths = []struct {
	name      string
	reference fastpath.Reference
}{{"fast", false}, {"reference", true}}

// BenchmarkRender renders fleets of companies with two agents each (the
// configs BenchmarkLoad in pkg/config loads) to one YAML stream, on the
// fast paths and on their reference.
func BenchmarkRender(b *testing.B) { benchRender(b, nil) }

// BenchmarkRenderPatched is BenchmarkRender with a Settings patch, so that
// every company goes through kustomize.
func BenchmarkRenderPatched(b *testing.B) {
	benchRender(b, []config.Patch{{Patch: "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: paperclip-tenant-sa\n  annotations:\n    example.com/team: agents\n"}})
}

// benchRender renders each fleet, with patches as its Settings patches, to
// one YAML stream, on each path.
func benchRender(b *testing.B, patches []config.Patch) {
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("companies=%d", n), func(b *testing.B) {
			m := loadFleet(b, n)
			if patches != nil {
				m.Settings.Spec.Patches = patches
			}
			for _, p := range paths {
				b.Run("path="+p.name, func(b *testing.B) {
					opts := render.DefaultOptions()
					opts.Reference = p.reference
					b.ReportAllocs()
					cpu := configtest.StartCPU()
					for b.Loop() {
						out, err := render.Render(m, opts)
						if err != nil {
							b.Fatal(err)
						}
						if _, err := out.YAML(); err != nil {
							b.Fatal(err)
						}
					}
					cpu.Stop(b)
				})
			}
		})
	}
}

// BenchmarkRenderOneChanged renders each fleet again after one company
// changed (a label), with the render cache of the daemon's config loop
// (cache=on) and without (cache=off): what a commit costs the daemon's
// render.
func BenchmarkRenderOneChanged(b *testing.B) {
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("companies=%d", n), func(b *testing.B) {
			m := loadFleet(b, n)
			for _, cached := range []bool{true, false} {
				b.Run("cache="+map[bool]string{true: "on", false: "off"}[cached], func(b *testing.B) {
					opts := render.DefaultOptions()
					if cached {
						opts.Cache = render.NewCache()
					}
					if _, err := render.Render(m, opts); err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					cpu := configtest.StartCPU()
					i := 0
					for b.Loop() {
						i++
						m.Companies[n/2].Metadata.Labels = map[string]string{"commit": fmt.Sprint(i)}
						if _, err := render.Render(m, opts); err != nil {
							b.Fatal(err)
						}
					}
					cpu.Stop(b)
				})
			}
		})
	}
}

// BenchmarkRenderYAML times only the encoding of a rendered fleet (no
// patch) as one YAML stream: the YAML writer (path=fast) against go-yaml
// (path=reference).
func BenchmarkRenderYAML(b *testing.B) {
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("companies=%d", n), func(b *testing.B) {
			m := loadFleet(b, n)
			for _, p := range paths {
				b.Run("path="+p.name, func(b *testing.B) {
					opts := render.DefaultOptions()
					opts.Reference = p.reference
					out, err := render.Render(m, opts)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					cpu := configtest.StartCPU()
					for b.Loop() {
						if _, err := out.YAML(); err != nil {
							b.Fatal(err)
						}
					}
					cpu.Stop(b)
				})
			}
		})
	}
}

// BenchmarkKubectlKustomize times `kubectl kustomize` on the tree that
// `pcsync render --output-dir` writes for the same fleets: the yardstick for
// BenchmarkRender. It needs kubectl on PATH.
func BenchmarkKubectlKustomize(b *testing.B) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		b.Fatalf("kubectl is needed for this benchmark: %v", err)
	}
	for _, n := range fleetSizes {
		b.Run(fmt.Sprintf("companies=%d", n), func(b *testing.B) {
			m := loadFleet(b, n)
			out, err := render.Render(m, render.DefaultOptions())
			if err != nil {
				b.Fatal(err)
			}
			dir := b.TempDir()
			if err := render.WriteDir(out, dir); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				cmd := exec.Command(kubectl, "kustomize", dir)
				if outb, err := cmd.Output(); err != nil || len(outb) == 0 {
					b.Fatalf("kubectl kustomize: %v", err)
				}
			}
		})
	}
}
