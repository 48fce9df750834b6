package apply

import (
	"context"
	"sync"
)

// forEach calls fn for i in [0, n) on at most workers goroutines and returns when all
// calls have returned. Calls not yet started when ctx ends are skipped.
func forEach(ctx context.Context, workers, n int, fn func(ctx context.Context, i int)) {
	if n == 0 {
		return
	}
	workers = max(1, min(workers, n))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(ctx, i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
}
