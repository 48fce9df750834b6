// Package adapters knows, for each agent CLI that pcsync runs (Claude Code,
// Codex, Gemini CLI, Cursor agent, OpenCode, pi and acpx), how to start it
// non-interactively and how to read what it prints.
//
// Per adapter type it provides:
//
//   - the command line: Adapter.Command turns an Invocation (the configured
//     executable argv, model, effort, max turns, session to resume,
//     instructions file, extra args, prompt) into argv, stdin and the few
//     environment variables the CLI itself needs;
//   - the environment and network it needs beyond the configured defaults:
//     Adapter.ForwardEnvKeys and Adapter.EgressHosts (for example Amazon
//     Bedrock for claude_local, or the host of a custom base URL);
//   - a streaming parser: Adapter.NewParser returns a Parser that is fed the
//     CLI's stdout line by line while it runs and, once told how the process
//     ended, produces the result fields of docs/design.md (session id, usage,
//     usage basis, cost, summary, model, turns, error code and message).
//
// Defaults (image, env keys, egress hosts, executable) live in the CUE
// schema; BuiltinDefaults only states what this package believes each CLI
// needs, so that a test can cross-check the schema against it.
//
// Command lines were checked against real CLIs installed from npm; see
// CheckedVersions and docs/adapters.md.
package adapters
