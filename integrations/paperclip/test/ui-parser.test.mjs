// The ./ui-parser export on real transcripts of every CLI, loaded the way
// Paperclip's UI loads it: the file's text run in a scope with only
// exports/module (its worker has no imports and no network).

import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = JSON.parse(readFileSync(path.join(here, "..", "package.json"), "utf8"));
// The transcripts, each with its .source.txt: the repository's testdata.
const samples = path.join(here, "..", "..", "..", "testdata", "agent-samples");

function loadLikePaperclip() {
  const source = readFileSync(path.join(here, "..", pkg.exports["./ui-parser"]), "utf8");
  const exports = {};
  const module = { exports };
  new Function("exports", "module", "self", "globalThis", '"use strict";\n{\n' + source + "\n}")(exports, module, undefined, undefined);
  const resolved = Object.keys(module.exports).length > 0 ? module.exports : exports;
  assert.equal(typeof resolved.parseStdoutLine, "function");
  return resolved.parseStdoutLine;
}

const parse = loadLikePaperclip();

function entries(fixture) {
  const out = [];
  for (const line of readFileSync(path.join(samples, fixture), "utf8").split("\n")) out.push(...parse(line, "2026-11-23T00:00:00.000Z"));
  return out;
}

const pick = (es, kind) => es.filter((e) => e.kind === kind);
const strip = ({ ts, ...rest }) => rest;

test("package.json declares the parser contract Paperclip loads", () => {
  assert.equal(pkg.exports["./ui-parser"], "./dist/ui-parser.cjs");
  assert.equal(pkg.paperclip.adapterUiParser.split(".")[0], "1");
});

test("the script imports nothing at run time (the worker has no imports)", () => {
  // src/ui-parser.cts takes TranscriptEntry from @paperclipai/adapter-utils
  // with `import type`, which the compiler erases.
  const source = readFileSync(path.join(here, "..", pkg.exports["./ui-parser"]), "utf8");
  const code = source.replace(/^\s*\/\/.*$/gm, "");
  assert.doesNotMatch(code, /\brequire\s*\(|\bimport\s*\(|^\s*import\b|@paperclipai/m, "dist/ui-parser.cjs loads a module");
});

test("every JSON line of every sample is understood (no raw JSON left on the page)", () => {
  // gemini-docs-json-mode-capital is Gemini's --output-format json (one
  // pretty-printed object); pcsync runs Gemini with stream-json.
  const fixtures = readdirSync(samples).filter((f) => f.endsWith(".jsonl") && f !== "gemini-docs-json-mode-capital.jsonl");
  assert.ok(fixtures.length >= 28, `only ${fixtures.length} samples in ${samples}`);
  for (const f of fixtures) {
    for (const e of entries(f)) {
      if (e.kind === "stdout") assert.ok(!e.text.trim().startsWith("{"), `${f}: JSON shown raw: ${e.text.slice(0, 80)}`);
      assert.equal(typeof e.ts, "string", f);
    }
  }
});

test("every transcript of testdata/agent-samples: each JSON event becomes entries, none is shown raw", () => {
  const files = readdirSync(samples).filter((f) => f.endsWith(".jsonl") && f !== "gemini-docs-json-mode-capital.jsonl");
  assert.ok(files.length >= 28, `only ${files.length} samples in ${samples}`);
  for (const f of files) {
    for (const line of readFileSync(path.join(samples, f), "utf8").split("\n")) {
      const es = parse(line, "t");
      let json = null;
      try {
        json = JSON.parse(line);
      } catch {}
      if (json && typeof json === "object") {
        assert.ok(!es.some((e) => e.kind === "stdout"), `${f}: an event shown raw: ${line.slice(0, 100)}`);
      }
    }
  }
});

test("Claude stream-json: init, assistant text, result with tokens and cost", () => {
  const es = entries("claude-obers-small-success.jsonl");
  assert.deepEqual(strip(pick(es, "init")[0]), { kind: "init", model: "claude-sonnet-4-6", sessionId: "a836554c-7c11-46da-acea-90cedebe45e7" });
  assert.ok(pick(es, "assistant")[0].text.includes('"verdict":"pass"'));
  const r = pick(es, "result")[0];
  assert.deepEqual([r.isError, r.subtype, r.inputTokens > 0, r.outputTokens > 0, r.costUsd > 0], [false, "success", true, true, true]);
});

test("Claude auth failure: the error is shown and the result is an error", () => {
  const es = entries("claude-oauth-expired-auth.jsonl");
  assert.deepEqual(pick(es, "stderr").map(strip), [{ kind: "stderr", text: "error: authentication_failed" }]);
  assert.equal(pick(es, "result")[0].isError, true);
});

test("Codex JSON: thread, reasoning, command call and output, usage without the cached part", () => {
  const es = entries("codex-docs-readme-check.jsonl");
  assert.deepEqual(
    es.map((e) => e.kind),
    ["init", "thinking", "tool_call", "tool_result", "thinking", "assistant", "result"],
  );
  assert.equal(es[0].sessionId, "0199a213-81c0-7800-8aa1-bbab2a035a53");
  assert.deepEqual(strip(es[2]), { kind: "tool_call", name: "command", toolUseId: "item_1", input: { command: "bash -lc ls" } });
  assert.match(es[3].content, /^\$ bash -lc ls\nexit code 0\n\n2025-09-11\nAGENTS.md/);
  assert.deepEqual([es[6].inputTokens, es[6].cachedTokens, es[6].outputTokens], [24763 - 24448, 24448, 122]);
  const failed = entries("codex-scriptorium-401-tail.jsonl");
  const r = pick(failed, "result")[0];
  assert.equal(r.isError, true);
  assert.match(r.errors[0], /401 Unauthorized/);
});

test("Gemini stream-json: warnings as text, init, tool use and result, turn limit error", () => {
  const es = entries("gemini-sidekick-ok.jsonl");
  assert.deepEqual(es.map((e) => e.kind), ["stdout", "stdout", "stdout", "init", "user", "tool_call", "tool_result", "assistant", "result"]);
  assert.deepEqual([es[8].inputTokens, es[8].cachedTokens, es[8].outputTokens], [21772, 11879, 151]);
  const r = pick(entries("gemini-cyrus-maxturns.jsonl"), "result")[0];
  assert.equal(r.isError, true);
  assert.match(r.errors[0], /Reached max session turns/);
});

test("Cursor stream-json: tool call started and completed, result usage", () => {
  const es = entries("cursor-agentsserver-hello.jsonl");
  assert.deepEqual(es.map((e) => e.kind), ["init", "user", "thinking", "tool_call", "tool_result", "assistant", "result"]);
  assert.deepEqual([es[3].name, es[3].toolUseId, es[4].toolUseId, es[4].isError], ["glob", "call-glob-0", "call-glob-0", false]);
  assert.deepEqual([es[6].inputTokens, es[6].outputTokens], [14948, 103]);
});

test("OpenCode JSON: tool use with output, steps, the final step as the result, errors", () => {
  const es = entries("opencode-takopi-echo-hello.jsonl");
  assert.deepEqual(es.map((e) => e.kind), ["tool_call", "tool_result", "system", "assistant", "result"]);
  assert.deepEqual([es[0].name, es[1].content], ["bash", "hello\n"]);
  assert.deepEqual([es[4].cachedTokens, es[4].costUsd], [21415, 0.001]);
  assert.deepEqual(entries("opencode-agentsserver-unknown-model-error.jsonl").map(strip), [
    { kind: "stderr", text: "Unexpected server error. Check server logs for details." },
  ]);
});

test("pi JSON: messages, tool execution, summed usage at the end, errors", () => {
  const es = entries("pi-untether-print-mode-fixture.jsonl");
  const kinds = es.map((e) => e.kind);
  assert.ok(kinds.includes("tool_call") && kinds.includes("tool_result") && kinds.includes("thinking"));
  assert.equal(pick(es, "assistant").some((e) => e.text.startsWith("# Pi Coding Agent")), false, "tool output is not shown as the assistant's");
  const results = pick(es, "result");
  assert.equal(results.at(-1).isError, false);
  const err = pick(entries("pi-untether-error-fixture.jsonl"), "result")[0];
  assert.deepEqual([err.isError, err.errors], [true, ["Upstream error"]]);
});

test("pcsync's own lines are system entries; plain text stays text", () => {
  assert.deepEqual(parse("[pcsync] resuming session s-1", "t"), [{ kind: "system", ts: "t", text: "[pcsync] resuming session s-1" }]);
  assert.deepEqual(parse("plain output", "t"), [{ kind: "stdout", ts: "t", text: "plain output" }]);
  assert.deepEqual(parse("{not json", "t"), [{ kind: "stdout", ts: "t", text: "{not json" }]);
  assert.deepEqual(parse("", "t"), []);
});
