package config

import (
	"crypto/sha256"
	"sync"
)

// ValidationCache keeps, from one Load to the next, the schema validation
// of each valid document by its file's content and its place in the file:
// a file that did not change is parsed again (its positions name its path
// now, which git-sync changes with every checkout) but not validated
// again. The rules across documents always run on the whole model. It
// forgets what the last Load did not use. Safe for concurrent use; meant
// for one Load at a time.
type ValidationCache struct {
	mu      sync.Mutex
	gen     uint64
	entries map[validationKey]*validated
	// validated counts the documents validated (not answered from the cache).
	validated int
}

// validationKey names a document: the validator, its file's content digest,
// its place in the file and its kind.
type validationKey struct {
	v     *Validator
	file  [sha256.Size]byte
	index int
	kind  string
}

// validated is a valid document's JSON and the Load that last used it.
type validated struct {
	json []byte
	gen  uint64
}

// NewValidationCache returns an empty cache.
func NewValidationCache() *ValidationCache {
	return &ValidationCache{entries: map[validationKey]*validated{}}
}

// begin starts a Load.
func (c *ValidationCache) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
}

// end forgets the documents the Load begun last did not use.
func (c *ValidationCache) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if e.gen != c.gen {
			delete(c.entries, k)
		}
	}
}

// validator returns v's validation of the documents of a file holding
// data, answered from the cache when it can and kept there when valid.
func (c *ValidationCache) validator(v *Validator, data []byte) func(string, *document) ([]byte, []*Error) {
	sum := sha256.Sum256(data)
	return func(kind string, d *document) ([]byte, []*Error) {
		k := validationKey{v: v, file: sum, index: d.index, kind: kind}
		c.mu.Lock()
		e, ok := c.entries[k]
		if ok {
			e.gen = c.gen
		}
		c.mu.Unlock()
		if ok {
			return e.json, nil
		}
		out, errs := v.validate(kind, d)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.validated++
		if len(errs) == 0 {
			c.entries[k] = &validated{json: out, gen: c.gen}
		}
		return out, errs
	}
}
