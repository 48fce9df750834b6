package config

// CacheCounts are, for the tests, how many documents c has validated and
// how many files it has parsed so far, and how many documents it holds now.
func CacheCounts(c *LoadCache) (validated, parsed, held int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.validated, c.parsed, len(c.docs)
}
