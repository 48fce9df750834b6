// Package result defines the run result file, <name>.result.json, that pcsync
// writes beside each run request exactly once, and writes it atomically.
//
// The field names and values are the contract of docs/design.md (section Runs):
// every field is always present in the file, with null where a value is not
// known, so consumers never have to guess between "absent" and "zero".
package result
