// Package hookapi serves the hooks of pcsync's Paperclip plugin
// (integrations/paperclip-sandbox) on a Unix socket: a hook's params
// decoded, the sandbox Manager's call (package sandbox), and its outcome as
// the hook's answer, a refusal as an HTTP status with its Code. It only
// speaks HTTP: the Manager does the work.
//
// Files:
//
//	hook.go    the hook contract: each hook's request and response types (validateConfig's and probe's answers are the Manager's own)
//	api.go     API: the hooks on the Unix socket, a handler table of typed hooks; refusals as HTTP statuses
//	decode.go  decoding a hook's params: a 400 that names the field
//	hooks.go   each hook: its request to the Manager's call, the call's outcome to its response; execute's NDJSON chunk lines
//	sync.go    the workspace sync's routes: a mapping's raw bytes in (put) and out (get) of a lease
//	hello.go   POST /v1/hello: pcsync's adapter and plugin say Paperclip loaded them (WithHello)
package hookapi
