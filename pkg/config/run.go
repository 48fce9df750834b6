package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// MaxRunRequestSize is the largest run request ParseRun reads, in bytes: a
// prompt of 1 MiB, escaped as JSON, with room to spare.
const MaxRunRequestSize = 8 << 20

// runMaxNodes bounds the values of a run request once YAML aliases are
// expanded.
const runMaxNodes = 100_000

// ParseRun validates a run request (JSON or YAML, one document) against
// the schema's #Run. name is the file name shown in error positions; JSON
// is recognised by a .json name or a leading '{'. Invalid requests give an
// *Errors with every problem, positioned like config errors. RunID is left
// empty when the request has none: the caller defaults it from the file
// name. ParseRun is safe for concurrent use.
func ParseRun(name string, data []byte) (*RunRequest, error) {
	v, err := sharedValidator()
	if err != nil {
		return nil, err
	}
	return v.ParseRun(name, data)
}

// ParseRun is the package-level ParseRun with this Validator.
func (v *Validator) ParseRun(name string, data []byte) (*RunRequest, error) {
	ld, err := v.checkRun(name, data)
	if err != nil {
		return nil, err
	}
	var r RunRequest
	if err := json.Unmarshal(ld.json, &r); err != nil {
		return nil, &Errors{List: []*Error{{Pos: ld.doc.start, Message: "cannot decode run request: " + err.Error()}}}
	}
	return &r, nil
}

// checkRun parses a run request and validates it against #Run: its JSON,
// defaults filled in, or an *Errors.
func (v *Validator) checkRun(name string, data []byte) (*loadedDoc, error) {
	start := Position{File: name, Line: 1, Column: 1}
	if len(data) > MaxRunRequestSize {
		return nil, &Errors{List: []*Error{{Pos: start, Message: fmt.Sprintf("run request is larger than %d bytes", MaxRunRequestSize)}}}
	}
	var doc *document
	if strings.EqualFold(filepath.Ext(name), ".json") || bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) {
		d, perr := parseJSON(name, data)
		if perr != nil {
			return nil, &Errors{List: []*Error{perr}}
		}
		doc = d
	} else {
		docs, perr := parseYAML(name, data, parseLimits{maxNodes: runMaxNodes})
		if perr != nil {
			return nil, &Errors{List: []*Error{perr}}
		}
		switch len(docs) {
		case 0:
			return nil, &Errors{List: []*Error{{Pos: start, Message: "run request is empty"}}}
		case 1:
			doc = docs[0]
		default:
			return nil, &Errors{List: []*Error{{Pos: docs[1].start, Message: "a run request holds one document"}}}
		}
	}
	ld, errs := checkDocument(doc, v, []string{"Run"})
	if len(errs) > 0 {
		e := &Errors{List: errs}
		return nil, e.err()
	}
	return ld, nil
}
