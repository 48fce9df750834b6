// Package config loads a pcsync config directory: every YAML document is
// validated against the CUE schema (package schema, which also supplies
// every default), the rules across documents are checked, and the result
// is a typed, read-only Model. Every problem is reported, each positioned
// at the offending key or value in the user's file as
// "path:line:col: field.path: message". ParseRun does the same for one run
// request from the spool directory.
//
// The Go types of model.go restate the schema's shapes for the code that
// reads a Model; CUE's JSON is decoded into them. Two tests keep them
// true (parity_internal_test.go): every field of #Settings, #Company and
// #Run must have its Go field, and every config of the repository must
// decode with unknown fields disallowed. A regex constraint (=~) of the
// schema must have its English in messages.go (messages_internal_test.go).
//
// Package configtest, beside it, writes synthetic config directories (fleets
// of companies) for tests and benchmarks.
package config
