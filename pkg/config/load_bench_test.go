package config_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/config/configtest"
	"github.com/pcsync/pcsync/pkg/fastpath"
)

// BenchmarkLoad loads and validates fleets of companies with two agents
// each: the same configs that BenchmarkRender in pkg/render renders. Each
// fleet is loaded with the exporter (path=fast) and with MarshalJSON
// (path=reference, LoadOptions.Reference; see package fastpath).
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("companies=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			if err := configtest.WriteFleet(dir, configtest.FleetOptions{Companies: n}); err != nil {
				b.Fatal(err)
			}
			for _, p := range []struct {
				name      string
				reference fastpath.Reference
			}{{"fast", false}, {"reference", true}} {
				b.Run("path="+p.name, func(b *testing.B) {
					opts := config.DefaultLoadOptions()
					opts.Reference = p.reference
					b.ReportAllocs()
					cpu := configtest.StartCPU()
					for b.Loop() {
						m, err := config.Load(context.Background(), dir, opts)
						if err != nil {
							b.Fatal(err)
						}
						if len(m.Companies) != n {
							b.Fatalf("loaded %d companies, want %d", len(m.Companies), n)
						}
					}
					cpu.Stop(b)
				})
			}
		})
	}
}
