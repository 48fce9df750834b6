package apply

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// forEach calls fn for i in [0, n) on at most workers goroutines and returns when all
// calls have returned. Calls not yet started when ctx ends are skipped.
func forEach(ctx context.Context, workers, n int, fn func(ctx context.Context, i int)) {
	var g errgroup.Group
	g.SetLimit(max(1, workers))
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { fn(ctx, i); return nil })
	}
	_ = g.Wait()
}
