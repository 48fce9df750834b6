package render

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/config"
)

// Cache keeps each company's objects from one Render to the next: a
// company whose inputs are those of the last Render (its document, the
// Settings with their patches, the adapters' and images' defaults, the
// options) is not rendered again, and its objects are the very values the
// last Output held. A company whose render gave warnings is not kept (they
// name positions its document's JSON does not hold). Outputs made with a
// Cache share objects: read them, never change them. Safe for concurrent
// use; meant for one Render at a time (the daemon's config loop).
type Cache struct {
	mu      sync.Mutex
	global  [sha256.Size]byte
	entries map[string]*cached
	gen     uint64
	// rendered counts the companies rendered, not taken from the cache.
	rendered int
}

// cached is a company's objects, the digest of its inputs and the Render
// that last used it.
type cached struct {
	key  [sha256.Size]byte
	objs []*unstructured.Unstructured
	gen  uint64
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{entries: map[string]*cached{}} }

// begin starts a Render of m: what the last one kept is dropped when the
// inputs all companies share have changed.
func (c *Cache) begin(m *config.Model, opts Options) {
	if c == nil {
		return
	}
	g := digestJSON(struct {
		Settings  config.Settings
		Builtin   map[config.AdapterType]config.AdapterDefaults
		Images    config.ImageDefaults
		Reference bool
		Per       bool
	}{m.Settings, m.Builtin, m.Images, bool(opts.Reference), opts.perCompany})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if g != c.global {
		clear(c.entries)
		c.global = g
	}
}

// lookup returns the key of company co's inputs and, when the last Render
// kept its objects under that key, the objects.
func (c *Cache) lookup(co *config.Company) (key [sha256.Size]byte, objs []*unstructured.Unstructured, ok bool) {
	if c == nil {
		return key, nil, false
	}
	key = digestJSON(co)
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[co.Metadata.Name]
	if e == nil || e.key != key || key == ([sha256.Size]byte{}) {
		c.rendered++
		return key, nil, false
	}
	e.gen = c.gen
	return key, e.objs, true
}

// end keeps the companies rendered without warnings (keys[i] of
// m.Companies[i]; fresh[i] when rendered by this Render) and forgets those
// this Render did not have.
func (c *Cache) end(m *config.Model, keys [][sha256.Size]byte, fresh []bool, comps []CompanyOutput, warnings [][]config.Warning) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range comps {
		if fresh[i] && len(warnings[i]) == 0 && keys[i] != ([sha256.Size]byte{}) {
			c.entries[m.Companies[i].Metadata.Name] = &cached{key: keys[i], objs: comps[i].Objects, gen: c.gen}
		}
	}
	for slug, e := range c.entries {
		if e.gen != c.gen {
			delete(c.entries, slug)
		}
	}
}

// digestJSON is the SHA-256 of v's JSON (encoding/json sorts map keys).
// The model's types always encode; one that does not digests as empty,
// which no cache entry of a company has.
func digestJSON(v any) [sha256.Size]byte {
	b, err := json.Marshal(v)
	if err != nil {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(b)
}
