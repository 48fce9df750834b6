// Package config loads a pcsync config directory: every YAML document is
// validated against the CUE schema (package schema, which also supplies
// every default), the rules across documents are checked, and the result
// is a typed, read-only Model. Every problem is reported, each positioned
// at the offending key or value in the user's file as
// "path:line:col: field.path: message". ParseRun does the same for one run
// request from the spool directory.
//
// Package configtest, beside it, writes synthetic config directories (fleets
// of companies) for tests and benchmarks.
package config
