package config

// CacheCounts are, for the tests, how many documents c has validated so far
// and how many it holds now.
func CacheCounts(c *ValidationCache) (validated, held int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.validated, len(c.entries)
}
