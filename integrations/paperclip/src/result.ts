// pcsync's result file → Paperclip's AdapterExecutionResult.

import type { AdapterBillingType, AdapterExecutionResult } from "@paperclipai/adapter-utils";

/** PcsyncResult is <name>.result.json (docs/runs.md "The result and its figures"). */
export interface PcsyncResult {
  runId?: string;
  company?: string;
  agent?: string;
  adapter?: string;
  status?: string;
  exitCode?: number | null;
  signal?: string | null;
  timedOut?: boolean;
  errorCode?: string | null;
  errorMessage?: string | null;
  sessionId?: string | null;
  usage?: {
    inputTokens?: number;
    cachedInputTokens?: number;
    cacheCreationInputTokens?: number;
    outputTokens?: number;
  } | null;
  usageBasis?: string | null;
  costUsd?: number | null;
  summary?: string | null;
  model?: string | null;
  numTurns?: number | null;
  startedAt?: string | null;
  finishedAt?: string | null;
  durationMs?: number | null;
  job?: { namespace?: string; name?: string; pod?: string } | null;
}

/** SessionInfo is what Paperclip keeps to resume a session. */
export interface SessionInfo {
  /** agent is the pcsync agent the session belongs to. */
  agent: string;
  /** company is the pcsync company slug or Paperclip company id. */
  company: string;
}

const PROVIDERS: Record<string, string> = {
  claude_local: "anthropic",
  codex_local: "openai",
  gemini_local: "google",
  cursor_local: "cursor",
};

/**
 * providerOf names the model's provider: fixed for the CLIs that speak to
 * one vendor, else the "provider/" prefix of the model (OpenCode, pi).
 */
export function providerOf(adapter: string | undefined, model: string | null | undefined): string | null {
  if (adapter && PROVIDERS[adapter]) return PROVIDERS[adapter];
  if (model && model.includes("/")) return model.slice(0, model.indexOf("/"));
  return null;
}

function num(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

function describe(r: PcsyncResult): string {
  const msg = (r.errorMessage ?? "").trim();
  switch (r.status) {
    case "rejected":
      return `pcsync rejected the run request: ${msg || "no reason given"}. Fix the agent's adapterConfig or pcsync's config (see docs/paperclip.md, "Troubleshooting")`;
    case "timed_out":
      return msg || "the run reached its timeout in pcsync and was stopped";
    case "cancelled":
      return msg || "the run was cancelled";
    default:
      if (msg) return msg;
      if (r.signal) return `the agent was ended by ${r.signal}`;
      return `the agent failed (pcsync status ${r.status ?? "unknown"}, exit code ${r.exitCode ?? "none"})`;
  }
}

/** toExecutionResult maps a pcsync result for Paperclip. */
export function toExecutionResult(
  r: PcsyncResult,
  session: SessionInfo,
  billingType: string,
  files: { request: string; log: string; result: string },
): AdapterExecutionResult {
  const succeeded = r.status === "succeeded";
  const timedOut = r.status === "timed_out" || r.timedOut === true;
  const out: AdapterExecutionResult = {
    exitCode: typeof r.exitCode === "number" ? r.exitCode : null,
    signal: r.signal ?? null,
    timedOut,
    errorCode: succeeded ? null : (r.errorCode ?? (r.status === "rejected" ? "invalid_request" : "adapter_failed")),
    // Never empty when the run did not succeed: Paperclip counts exit 0 with
    // no message and no signal as a success.
    errorMessage: succeeded ? null : describe(r),
  };
  if (r.usage) {
    out.usage = {
      inputTokens: num(r.usage.inputTokens),
      outputTokens: num(r.usage.outputTokens),
      cachedInputTokens: num(r.usage.cachedInputTokens),
    };
    if (r.usageBasis === "per_run" || r.usageBasis === "session_cumulative") out.usageBasis = r.usageBasis;
  }
  if (r.sessionId) {
    out.sessionId = r.sessionId;
    out.sessionDisplayId = r.sessionId;
    out.sessionParams = { sessionId: r.sessionId, agent: session.agent, company: session.company };
  }
  out.provider = providerOf(r.adapter, r.model);
  out.model = r.model ?? null;
  if (typeof r.costUsd === "number") out.costUsd = r.costUsd;
  out.billingType = billingType as AdapterBillingType;
  out.summary = r.summary ?? null;
  out.resultJson = { ...(r as Record<string, unknown>), spool: files };
  return out;
}
