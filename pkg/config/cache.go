package config

import (
	"crypto/sha256"
	"sync"
)

// LoadCache keeps, from one Load to the next, what parsing and validating
// each file gave: a file whose path and content are those of the last Load
// is neither parsed nor validated again; a valid document of a file whose
// content was seen under another path (git-sync moves the checkout with
// every commit) is parsed again, so that its positions name its path now,
// but not validated again. Files with errors are never kept. Each Load
// decodes the model afresh and runs the rules across documents on the
// whole of it, and the cache forgets what the last Load did not use. Safe
// for concurrent use; meant for one Load at a time.
type LoadCache struct {
	mu    sync.Mutex
	gen   uint64
	docs  map[docKey]*validated
	files map[string]*parsedFile
	// validated counts the documents validated, parsed the files parsed.
	validated, parsed int
}

// docKey names a document: the validator, its file's content digest, its
// place in the file and its kind.
type docKey struct {
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

// parsedFile is a file all of whose documents are valid.
type parsedFile struct {
	v        *Validator
	maxNodes int
	sum      [sha256.Size]byte
	docs     []*loadedDoc // not decoded: each Load decodes its own
	gen      uint64
}

// NewLoadCache returns an empty cache.
func NewLoadCache() *LoadCache {
	return &LoadCache{docs: map[docKey]*validated{}, files: map[string]*parsedFile{}}
}

// begin starts a Load.
func (c *LoadCache) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
}

// end forgets what the Load begun last did not use.
func (c *LoadCache) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.docs {
		if e.gen != c.gen {
			delete(c.docs, k)
		}
	}
	for k, f := range c.files {
		if f.gen != c.gen {
			delete(c.files, k)
		}
	}
}

// file returns the documents of the file at path with content sum, as the
// last Load had them, undecoded copies; ok is false when it had none.
func (c *LoadCache) file(path string, sum [sha256.Size]byte, opts LoadOptions) (_ []*loadedDoc, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[path]
	if f == nil || f.sum != sum || f.v != opts.Validator || f.maxNodes != opts.MaxNodes {
		c.parsed++
		return nil, false
	}
	f.gen = c.gen
	out := make([]*loadedDoc, len(f.docs))
	for i, d := range f.docs {
		out[i] = &loadedDoc{doc: d.doc, kind: d.kind, json: d.json}
		// Kept for the same content under another path.
		if e := c.docs[docKey{v: f.v, file: sum, index: d.doc.index, kind: d.kind}]; e != nil {
			e.gen = c.gen
		}
	}
	return out, true
}

// keepFile keeps the documents of a file whose documents are all valid.
func (c *LoadCache) keepFile(path string, sum [sha256.Size]byte, opts LoadOptions, docs []*loadedDoc) {
	kept := make([]*loadedDoc, len(docs))
	for i, d := range docs {
		kept[i] = &loadedDoc{doc: d.doc, kind: d.kind, json: d.json}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files[path] = &parsedFile{v: opts.Validator, maxNodes: opts.MaxNodes, sum: sum, docs: kept, gen: c.gen}
}

// validator returns v's validation of the documents of a file whose
// content is sum, answered from the cache when it can and kept there when
// valid.
func (c *LoadCache) validator(v *Validator, sum [sha256.Size]byte) func(string, *document) ([]byte, []*Error) {
	return func(kind string, d *document) ([]byte, []*Error) {
		k := docKey{v: v, file: sum, index: d.index, kind: kind}
		c.mu.Lock()
		e, ok := c.docs[k]
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
			c.docs[k] = &validated{json: out, gen: c.gen}
		}
		return out, errs
	}
}
