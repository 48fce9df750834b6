// Paperclip's run page parser (the package's "./ui-parser" export).
//
// Paperclip's UI fetches this file's text and runs it in a locked-down web
// worker (no imports, no network): it must stay one self-contained script
// that sets exports.parseStdoutLine(line, ts) → TranscriptEntry[].
//
// A pcsync run's log is the output of whichever CLI the pcsync agent runs,
// so each line is recognised by its shape: Claude Code and Cursor
// stream-json, Codex exec --json, Gemini stream-json, OpenCode --format
// json, pi --mode json, acpx JSON-RPC. Entries are the kinds Paperclip's
// built-in adapters produce (init, assistant, thinking, user, tool_call,
// tool_result, result, system, stderr, stdout). Each line is parsed on its
// own: the worker is shared by every run of the adapter type, so no state
// is kept between lines.

// The entry type is Paperclip's own; a type-only import, erased when this
// file is compiled, so the script still imports nothing.
import type { TranscriptEntry } from "@paperclipai/adapter-utils";

type Rec = Record<string, unknown>;

function rec(v: unknown): Rec | null {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Rec) : null;
}

function s(v: unknown, fallback = ""): string {
  return typeof v === "string" ? v : fallback;
}

function n(v: unknown, fallback = 0): number {
  return typeof v === "number" && Number.isFinite(v) ? v : fallback;
}

function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

function show(v: unknown): string {
  if (typeof v === "string") return v;
  if (v === null || v === undefined) return "";
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

function errText(v: unknown): string {
  if (typeof v === "string") return v;
  const r = rec(v);
  if (!r) return "";
  const data = rec(r.data);
  return s(r.message) || s(data?.message) || s(r.error) || s(r.name) || s(r.code) || show(r);
}

/** Text of a content list: strings, {type:"text",text}, {type:"output_text"}. */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  const out: string[] = [];
  for (const p of arr(content)) {
    const r = rec(p);
    if (r && (r.type === "text" || r.type === "output_text") && typeof r.text === "string") out.push(r.text);
  }
  return out.join("\n");
}

function result(ts: string, f: Partial<Extract<TranscriptEntry, { kind: "result" }>>): TranscriptEntry {
  return {
    kind: "result",
    ts,
    text: f.text ?? "",
    inputTokens: f.inputTokens ?? 0,
    outputTokens: f.outputTokens ?? 0,
    cachedTokens: f.cachedTokens ?? 0,
    costUsd: f.costUsd ?? 0,
    subtype: f.subtype ?? "",
    isError: f.isError ?? false,
    errors: f.errors ?? [],
  };
}

// ── Claude Code and Cursor (stream-json) ───────────────────────────────────

function claudeMessage(o: Rec, ts: string, role: "assistant" | "user"): TranscriptEntry[] {
  const msg = rec(o.message) ?? {};
  const out: TranscriptEntry[] = [];
  const content = msg.content;
  if (typeof content === "string" && content) out.push({ kind: role, ts, text: content });
  for (const b of arr(content)) {
    const blk = rec(b);
    if (!blk) continue;
    if (blk.type === "text" && s(blk.text)) out.push({ kind: role, ts, text: s(blk.text) });
    else if (blk.type === "thinking" && s(blk.thinking)) out.push({ kind: "thinking", ts, text: s(blk.thinking) });
    else if (blk.type === "tool_use") {
      out.push({ kind: "tool_call", ts, name: s(blk.name, "tool"), toolUseId: s(blk.id) || undefined, input: blk.input ?? {} });
    } else if (blk.type === "tool_result") {
      const c = blk.content;
      out.push({
        kind: "tool_result",
        ts,
        toolUseId: s(blk.tool_use_id),
        content: typeof c === "string" ? c : textOf(c) || show(c),
        isError: blk.is_error === true,
      });
    }
  }
  if (role === "assistant" && s(o.error)) out.push({ kind: "stderr", ts, text: `error: ${s(o.error)}` });
  return out;
}

function claudeResult(o: Rec, ts: string): TranscriptEntry {
  const u = rec(o.usage) ?? {};
  // Claude: usage.input_tokens, cache_read_input_tokens; Cursor: inputTokens, cacheReadTokens.
  return result(ts, {
    text: s(o.result),
    inputTokens: n(u.input_tokens, n(u.inputTokens)),
    outputTokens: n(u.output_tokens, n(u.outputTokens)),
    cachedTokens: n(u.cache_read_input_tokens, n(u.cacheReadTokens)),
    costUsd: n(o.total_cost_usd),
    subtype: s(o.subtype),
    isError: o.is_error === true || (typeof o.subtype === "string" && o.subtype !== "success"),
    errors: arr(o.errors).map(errText).filter(Boolean),
  });
}

function cursorToolCall(o: Rec, ts: string): TranscriptEntry[] {
  const call = rec(o.tool_call) ?? {};
  const name = Object.keys(call)[0] ?? "tool";
  const body = rec(call[name]) ?? {};
  const id = s(o.call_id, name);
  const label = name.replace(/ToolCall$/, "");
  if (o.subtype === "started") return [{ kind: "tool_call", ts, name: label, toolUseId: id, input: body.args ?? {} }];
  const res = rec(body.result);
  const ok = res ? res.success : undefined;
  const bad = res ? (res.failure ?? res.error ?? res.rejected) : undefined;
  return [
    {
      kind: "tool_result",
      ts,
      toolUseId: id,
      toolName: label,
      content: show(ok ?? bad ?? body.result ?? `${label} completed`),
      isError: bad !== undefined,
    },
  ];
}

// ── Codex (exec --json) ─────────────────────────────────────────────────────

function codexItem(item: Rec, ts: string, started: boolean): TranscriptEntry[] {
  const id = s(item.id);
  switch (item.type) {
    case "agent_message":
      return s(item.text) ? [{ kind: "assistant", ts, text: s(item.text) }] : [];
    case "reasoning":
      return s(item.text) ? [{ kind: "thinking", ts, text: s(item.text) }] : [];
    case "command_execution": {
      if (started) return [{ kind: "tool_call", ts, name: "command", toolUseId: id, input: { command: s(item.command) } }];
      const code = typeof item.exit_code === "number" ? item.exit_code : null;
      const lines = [`$ ${s(item.command)}`];
      if (code !== null) lines.push(`exit code ${code}`);
      const output = s(item.aggregated_output).replace(/\s+$/, "");
      if (output) lines.push("", output);
      return [
        {
          kind: "tool_result",
          ts,
          toolUseId: id,
          toolName: "command",
          content: lines.join("\n"),
          isError: (code !== null && code !== 0) || item.status === "failed",
        },
      ];
    }
    case "file_change": {
      if (started) return [];
      const changes = arr(item.changes).map((c) => `${s(rec(c)?.kind, "update")} ${s(rec(c)?.path, "?")}`);
      return [{ kind: "system", ts, text: `file changes: ${changes.join(", ") || "none"}` }];
    }
    case "mcp_tool_call": {
      const name = [s(item.server), s(item.tool)].filter(Boolean).join("/") || "mcp";
      if (started) return [{ kind: "tool_call", ts, name, toolUseId: id, input: item.arguments ?? {} }];
      const err = item.error ?? null;
      return [{ kind: "tool_result", ts, toolUseId: id, toolName: name, content: show(err ?? item.result ?? ""), isError: err !== null }];
    }
    case "web_search":
      return started ? [{ kind: "tool_call", ts, name: "web_search", toolUseId: id, input: { query: s(item.query) } }] : [];
    case "todo_list": {
      const items = arr(item.items).map((t) => `${rec(t)?.completed ? "[x]" : "[ ]"} ${s(rec(t)?.text)}`);
      return [{ kind: "system", ts, text: `todo:\n${items.join("\n")}` }];
    }
    case "error":
      return [{ kind: "stderr", ts, text: s(item.message, "error") }];
    default:
      return started ? [] : [{ kind: "system", ts, text: `${s(item.type, "item")} ${s(item.status, "completed")}` }];
  }
}

function codexUsage(o: Rec, ts: string, failed: boolean): TranscriptEntry {
  const u = rec(o.usage) ?? {};
  const cached = n(u.cached_input_tokens);
  return result(ts, {
    text: failed ? errText(o.error) : "",
    // Codex counts cached input in input_tokens.
    inputTokens: Math.max(0, n(u.input_tokens) - cached),
    outputTokens: n(u.output_tokens),
    cachedTokens: cached,
    subtype: failed ? "turn_failed" : "turn_completed",
    isError: failed,
    errors: failed ? [errText(o.error)].filter(Boolean) : [],
  });
}

// ── Gemini (stream-json) ────────────────────────────────────────────────────

function geminiResult(o: Rec, ts: string): TranscriptEntry {
  const st = rec(o.stats) ?? {};
  const cached = n(st.cached);
  const isError = o.status === "error";
  return result(ts, {
    text: isError ? errText(o.error) : "",
    // stats.input is the uncached input where the CLI reports it.
    inputTokens: typeof st.input === "number" ? n(st.input) : Math.max(0, n(st.input_tokens) - cached),
    outputTokens: n(st.output_tokens),
    cachedTokens: cached,
    subtype: s(o.status, "result"),
    isError,
    errors: isError ? [errText(o.error)].filter(Boolean) : [],
  });
}

// ── OpenCode (run --format json) ────────────────────────────────────────────

function opencodeTool(part: Rec, ts: string): TranscriptEntry[] {
  const state = rec(part.state) ?? {};
  const name = s(part.tool, "tool");
  const id = s(part.callID) || s(part.id) || name;
  const out: TranscriptEntry[] = [{ kind: "tool_call", ts, name, toolUseId: id, input: state.input ?? {} }];
  if (state.status === "completed" || state.status === "error") {
    out.push({
      kind: "tool_result",
      ts,
      toolUseId: id,
      toolName: name,
      content: s(state.output) || s(state.error) || s(part.title) || `${name} ${s(state.status)}`,
      isError: state.status === "error",
    });
  }
  return out;
}

function opencodeStep(part: Rec, ts: string): TranscriptEntry {
  const t = rec(part.tokens) ?? {};
  const cache = rec(t.cache) ?? {};
  const reason = s(part.reason, "step");
  const tokens = `in ${n(t.input)}, cached ${n(cache.read)}, out ${n(t.output) + n(t.reasoning)}`;
  if (reason !== "stop") return { kind: "system", ts, text: `step finished (${reason}): tokens ${tokens}, cost $${n(part.cost)}` };
  return result(ts, {
    text: reason,
    inputTokens: n(t.input),
    outputTokens: n(t.output) + n(t.reasoning),
    cachedTokens: n(cache.read),
    costUsd: n(part.cost),
    subtype: reason,
  });
}

// ── pi (--mode json) ────────────────────────────────────────────────────────

function piMessage(m: Rec, ts: string): TranscriptEntry[] {
  // Tool results come as tool_execution_end; only user and assistant messages here.
  if (m.role !== "user" && m.role !== "assistant") return [];
  const out: TranscriptEntry[] = [];
  for (const c of arr(m.content)) {
    const r = rec(c);
    if (r?.type === "thinking" && s(r.thinking)) out.push({ kind: "thinking", ts, text: s(r.thinking) });
  }
  const text = textOf(m.content);
  if (text) out.push({ kind: m.role === "user" ? "user" : "assistant", ts, text });
  if (m.stopReason === "error" || m.stopReason === "aborted") {
    out.push({ kind: "stderr", ts, text: s(m.errorMessage, `pi: ${s(m.stopReason)}`) });
  }
  return out;
}

function piEnd(o: Rec, ts: string): TranscriptEntry[] {
  let input = 0;
  let output = 0;
  let cached = 0;
  let cost = 0;
  let last: Rec | null = null;
  for (const m of arr(o.messages)) {
    const r = rec(m);
    if (r?.role !== "assistant") continue;
    last = r;
    const u = rec(r.usage) ?? {};
    input += n(u.input);
    output += n(u.output);
    cached += n(u.cacheRead);
    cost += n(rec(u.cost)?.total);
  }
  const isError = last?.stopReason === "error" || last?.stopReason === "aborted";
  return [
    result(ts, {
      text: last ? textOf(last.content) : "",
      inputTokens: input,
      outputTokens: output,
      cachedTokens: cached,
      costUsd: cost,
      subtype: s(last?.stopReason, "end"),
      isError,
      errors: isError ? [s(last?.errorMessage)].filter(Boolean) : [],
    }),
  ];
}

function piToolResult(o: Rec, ts: string): TranscriptEntry {
  const r = o.result;
  const content = typeof r === "string" ? r : textOf(rec(r)?.content ?? r) || show(r);
  return { kind: "tool_result", ts, toolUseId: s(o.toolCallId), toolName: s(o.toolName) || undefined, content, isError: o.isError === true };
}

// ── acpx (ACP JSON-RPC) ─────────────────────────────────────────────────────

function acpx(o: Rec, ts: string): TranscriptEntry[] {
  const params = rec(o.params);
  const up = rec(params?.update);
  if (up) {
    const content = rec(up.content);
    switch (up.sessionUpdate) {
      case "agent_message_chunk":
        return s(content?.text) ? [{ kind: "assistant", ts, text: s(content?.text), delta: true }] : [];
      case "agent_thought_chunk":
        return s(content?.text) ? [{ kind: "thinking", ts, text: s(content?.text), delta: true }] : [];
      case "user_message_chunk":
        return [];
      case "tool_call":
        return [{ kind: "tool_call", ts, name: s(up.title, s(up.kind, "tool")), toolUseId: s(up.toolCallId) || undefined, input: up.rawInput ?? {} }];
      case "tool_call_update":
        if (up.status !== "completed" && up.status !== "failed") return [];
        return [
          {
            kind: "tool_result",
            ts,
            toolUseId: s(up.toolCallId),
            content: show(up.rawOutput ?? up.content ?? up.status),
            isError: up.status === "failed",
          },
        ];
      default:
        return [];
    }
  }
  const res = rec(o.result);
  if (res && typeof res.stopReason === "string") return [{ kind: "system", ts, text: `stop: ${res.stopReason}` }];
  if (o.error) return [{ kind: "stderr", ts, text: errText(o.error) }];
  return [];
}

// ── dispatch ────────────────────────────────────────────────────────────────

function parseJSONLine(o: Rec, ts: string, line: string): TranscriptEntry[] {
  if (o.jsonrpc === "2.0") return acpx(o, ts);
  const type = s(o.type);
  switch (type) {
    // Claude Code, Cursor
    case "system":
      if (o.subtype === "init") return [{ kind: "init", ts, model: s(o.model, "unknown"), sessionId: s(o.session_id) }];
      if (o.subtype === "api_retry") return [{ kind: "system", ts, text: `API retry ${n(o.attempt)}: ${errText(o.error) || s(o.message)}` }];
      return [];
    case "assistant":
      return claudeMessage(o, ts, "assistant");
    case "user":
      return claudeMessage(o, ts, "user");
    case "thinking": // Cursor
      return o.subtype === "delta" && s(o.text) ? [{ kind: "thinking", ts, text: s(o.text), delta: true }] : [];
    case "tool_call": // Cursor
      return cursorToolCall(o, ts);
    case "rate_limit_event": {
      const info = rec(o.rate_limit_info) ?? {};
      return info.status === "rejected" ? [{ kind: "stderr", ts, text: `rate limit reached (${s(info.rateLimitType, "unknown")})` }] : [];
    }
    case "stream_event":
      return [];
    case "result":
      return o.stats !== undefined || (typeof o.status === "string" && o.subtype === undefined) ? [geminiResult(o, ts)] : [claudeResult(o, ts)];

    // Codex
    case "thread.started":
      return [{ kind: "init", ts, model: s(o.model, "codex"), sessionId: s(o.thread_id) }];
    case "turn.started":
      return [];
    case "item.started":
    case "item.updated":
    case "item.completed": {
      const item = rec(o.item);
      if (!item || type === "item.updated") return [];
      return codexItem(item, ts, type === "item.started");
    }
    case "turn.completed":
      return [codexUsage(o, ts, false)];
    case "turn.failed":
      return [codexUsage(o, ts, true)];

    // Gemini
    case "init":
      return [{ kind: "init", ts, model: s(o.model, "gemini"), sessionId: s(o.session_id) }];
    case "message": {
      const text = textOf(o.content);
      if (!text) return [];
      if (o.role === "user") return [{ kind: "user", ts, text }];
      return [{ kind: "assistant", ts, text, ...(o.delta === true ? { delta: true } : {}) }];
    }
    case "tool_use":
      if (rec(o.part)) return opencodeTool(rec(o.part)!, ts);
      return [{ kind: "tool_call", ts, name: s(o.tool_name, "tool"), toolUseId: s(o.tool_id) || undefined, input: o.parameters ?? {} }];
    case "tool_result":
      return [
        {
          kind: "tool_result",
          ts,
          toolUseId: s(o.tool_id),
          content: s(o.output) || errText(o.error) || s(o.status),
          isError: o.status === "error",
        },
      ];
    case "error": // Gemini, OpenCode, Codex
      return [{ kind: "stderr", ts, text: errText(o.error ?? o.message) || line }];

    // OpenCode
    case "step_start":
      return [];
    case "text":
      return s(rec(o.part)?.text).trim() ? [{ kind: "assistant", ts, text: s(rec(o.part)?.text) }] : [];
    case "reasoning":
      return s(rec(o.part)?.text).trim() ? [{ kind: "thinking", ts, text: s(rec(o.part)?.text) }] : [];
    case "step_finish":
      return [opencodeStep(rec(o.part) ?? {}, ts)];
    case "done":
      return [];

    // pi
    case "session":
      return [{ kind: "init", ts, model: "pi", sessionId: s(o.id) }];
    case "agent_start":
    case "turn_start":
    case "turn_end":
    case "message_start":
    case "message_update":
    case "tool_execution_update":
      return [];
    case "message_end":
      return piMessage(rec(o.message) ?? {}, ts);
    case "tool_execution_start":
      return [{ kind: "tool_call", ts, name: s(o.toolName, "tool"), toolUseId: s(o.toolCallId) || undefined, input: o.args ?? {} }];
    case "tool_execution_end":
      return [piToolResult(o, ts)];
    case "agent_end":
      return piEnd(o, ts);
    case "auto_retry_start":
      return [{ kind: "system", ts, text: `retrying: ${s(o.errorMessage) || "after an error"}` }];
    case "auto_compaction_start":
      return [{ kind: "system", ts, text: "compacting the context" }];
    case "auto_retry_end":
    case "auto_compaction_end":
    case "agent_settled":
      return [];
  }
  return [{ kind: "stdout", ts, text: line }];
}

/** parseStdoutLine turns one line of a pcsync run's log into transcript entries. */
function parseStdoutLine(line: string, ts: string): TranscriptEntry[] {
  const trimmed = line.trim();
  if (trimmed === "") return [];
  if (trimmed.startsWith("[pcsync]") || trimmed.startsWith("[paperclip]")) return [{ kind: "system", ts, text: trimmed }];
  if (trimmed.startsWith("{")) {
    let o: unknown;
    try {
      o = JSON.parse(trimmed);
    } catch {
      o = null;
    }
    const r = rec(o);
    if (r) return parseJSONLine(r, ts, trimmed);
  }
  return [{ kind: "stdout", ts, text: line }];
}

export { parseStdoutLine };
