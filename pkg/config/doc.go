// Package config loads a pcsync config directory: every YAML document is
// validated against the CUE schema (package schema, which also supplies
// every default), the rules across documents are checked, and the result
// is a typed, read-only Model. Every problem is reported, each positioned
// at the offending key or value in the user's file as
// "path:line:col: field.path: message". ParseRun does the same for one run
// request from the spool directory.
//
// Files:
//
//	load.go       Load (a directory) and LoadFiles (files given, standard input): parse and validate in parallel, assemble the Model
//	cache.go      LoadCache: each valid file's parse and validation, kept from one Load to the next
//	parse.go      YAML and JSON documents to CUE syntax that keeps the user's positions
//	validate.go   Validator: the compiled schema, lent out under a lock (CUE is not goroutine-safe)
//	closed.go     the fields a document has that the schema does not allow
//	messages.go   CUE's errors in English, one message per constraint
//	positions.go  user field paths (spec.agents[1].adapter) and their positions
//	errors.go     Error and Errors: "path:line:col: field.path: message"
//	rules.go      the rules the schema cannot express (across documents, Kubernetes' own)
//	rules_pool.go the rules of a company's warm pools: image or adapter type, agent, and the fit in its quota
//	rules_credentials.go the rules of a company's credentials: egress mode proxy, a provider its agents use, each once
//	rules_budget.go the rules of a company's budget: a model credential, a known time zone, prices read exactly, each once
//	rules_egress.go the rules of a company's egress: host names, and CIDRs that reach no private range without allowPrivateCidrs
//	rules_suspend.go the rules of a company's suspended leases: their claims in its quota (persistentVolumeClaims, requestsStorage)
//	model.go      the Go types of a loaded Model
//	budget.go     a company's budget (spec.budget) and its agents' monthly budgets
//	resolve.go    lookups on a Model (company by slug or id, agent, adapter defaults)
//	run.go        ParseRun: one run request against #Run
//	shard.go      shards (the label pcsync.io/shard): a shard's part of a Model, the tenants it hands over
//	suspend.go    spec.suspend: a Model without its suspended companies, the tenants kept as they are
//
// and the fast path, which stands in for cue.Value.MarshalJSON and gives the
// same JSON (LoadOptions.Reference turns it off; see package fastpath):
//
//	fastpath_export.go  a valid document's JSON, defaults included, from its syntax and the schema
//
// The Go types of model.go restate the schema's shapes; CUE's JSON is
// decoded into them. Two tests keep them true (parity_internal_test.go):
// every field of #Settings, #Company and #Run must have its Go field, and
// every config of the repository must decode with unknown fields
// disallowed. A regex constraint (=~) of the schema must have its English
// in messages.go (messages_internal_test.go).
//
// Package configtest, beside it, writes synthetic config directories (fleets
// of companies) for tests and benchmarks.
package config
