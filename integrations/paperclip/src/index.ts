/**
 * @pcsync/paperclip-adapter: Paperclip's agents run by pcsync, as
 * Kubernetes Jobs or local processes, through pcsync's spool directory.
 * Paperclip loads it with POST /api/adapters/install (docs/paperclip.md).
 */

import type { AdapterConfigSchema, AdapterSessionCodec, ServerAdapterModule } from "@paperclipai/adapter-utils";
import { ADAPTER_LABEL, ADAPTER_TYPE, BILLING_TYPES, DEFAULTS } from "./config.js";
import { configTable } from "./config-doc.js";
import { execute } from "./execute.js";
import { helloOnce } from "./hello.js";
import { testEnvironment } from "./test-environment.js";

export { execute } from "./execute.js";
export { testEnvironment } from "./test-environment.js";
export { ADAPTER_TYPE as type, ADAPTER_LABEL as label } from "./config.js";

/** models is empty: the model is chosen in pcsync's config, per agent. */
export const models: Array<{ id: string; label: string }> = [];

function text(v: unknown): string | null {
  return typeof v === "string" && v.trim() !== "" ? v.trim() : null;
}

/** sessionCodec keeps the CLI session id with the pcsync agent and company it belongs to. */
export const sessionCodec: AdapterSessionCodec = {
  deserialize(raw) {
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return null;
    const r = raw as Record<string, unknown>;
    const sessionId = text(r.sessionId) ?? text(r.session_id);
    if (!sessionId) return null;
    const agent = text(r.agent);
    const company = text(r.company);
    return { sessionId, ...(agent ? { agent } : {}), ...(company ? { company } : {}) };
  },
  serialize(params) {
    return params ? sessionCodec.deserialize(params) : null;
  },
  getDisplayId(params) {
    return params ? text(params.sessionId) : null;
  },
};

/** configSchema describes adapterConfig for Paperclip's agent form. */
export const configSchema: AdapterConfigSchema = {
  fields: [
    {
      key: "spoolDir",
      label: "Spool directory",
      type: "text",
      required: true,
      hint: "Absolute path of the pcsync daemon's spool (its --spool), as this Paperclip server sees it.",
    },
    {
      key: "agent",
      label: "pcsync agent",
      type: "text",
      hint: "Name of the agent in pcsync's config. Default: this agent's name, lower-case, with '-' for each run of other characters (\"Code Reviewer\" → code-reviewer).",
    },
    {
      key: "company",
      label: "pcsync company",
      type: "text",
      hint: "Slug of the pcsync Company, for a Company without spec.id. Default: the Company whose spec.id is this Paperclip company's id.",
    },
    {
      key: "timeoutSec",
      label: "Timeout (seconds)",
      type: "number",
      default: 0,
      hint: "The run's timeout, enforced by pcsync. 0: the agent's timeoutSec in pcsync's config, else the company's jobs.activeDeadlineSeconds (3600 unless set).",
    },
    {
      key: "stateDir",
      label: "pcsync state directory",
      type: "text",
      hint: "The daemon's --state-dir, where its status.json is. Default: <spoolDir>/.pcsync.",
    },
    {
      key: "apiUrl",
      label: "Paperclip API URL",
      type: "text",
      hint:
        "URL of this Paperclip server for the agent's call-backs, put into the request as paperclip.apiUrl: the agent's PAPERCLIP_API_URL with pcsync's local executor; with the Kubernetes executor pods get pcsync's Settings spec.server.url instead (a pod cannot reach 127.0.0.1). Default: the URL the built-in adapters give their agents (the server's PAPERCLIP_API_URL, else PAPERCLIP_RUNTIME_API_URL, else http://<HOST>:<PORT>).",
    },
    {
      key: "promptTemplate",
      label: "Prompt template",
      type: "textarea",
      hint: "The heartbeat prompt template, as for the built-in adapters. Default: Paperclip's default heartbeat prompt.",
    },
    {
      key: "bootstrapPromptTemplate",
      label: "Bootstrap prompt template",
      type: "textarea",
      hint: "Put before the prompt of a run that starts a new session.",
    },
    {
      key: "billingType",
      label: "Billing type",
      type: "select",
      default: "unknown",
      options: BILLING_TYPES.map((v) => ({ label: v, value: v })),
      hint: "How the CLI's account is billed, reported with each run's cost.",
    },
    {
      key: "resultGraceSec",
      label: "Result grace (seconds)",
      type: "number",
      default: DEFAULTS.resultGraceSec,
      hint: "With timeoutSec set: how long past it the adapter waits for pcsync's result before it cancels the run itself.",
    },
    {
      key: "cancelWaitSec",
      label: "Cancel wait (seconds)",
      type: "number",
      default: DEFAULTS.cancelWaitSec,
      hint: "How long after a cancel the adapter waits for pcsync's result.",
    },
    {
      key: "resumeLostSessions",
      label: "Resume lost sessions",
      type: "toggle",
      default: true,
      hint: "When Paperclip gives no session, resume the session of this agent's latest run that finished while Paperclip was down.",
    },
  ],
};

/**
 * agentConfigurationDoc is shown in Paperclip's UI when configuring an
 * agent; its table is configSchema's, as in docs/paperclip.md.
 */
export const agentConfigurationDoc = `# pcsync agent configuration

The run is handed to a pcsync daemon through its spool directory: pcsync runs
the agent's CLI (Claude Code, Codex, Gemini, Cursor, OpenCode, pi, acpx) as a
Kubernetes Job or a local process, as its own config says, and the adapter
reports the transcript, tokens, cost and session back to Paperclip.

${configTable(configSchema)}
Use "Test environment" to check that the spool is writable, the daemon is
running, and pcsync knows this company and agent. See pcsync's
docs/paperclip.md.
`;

/** createServerAdapter is the entry point Paperclip's plugin loader calls. */
export function createServerAdapter(): ServerAdapterModule {
  helloOnce();
  return {
    type: ADAPTER_TYPE,
    execute,
    testEnvironment,
    sessionCodec,
    sessionManagement: {
      supportsSessionResume: true,
      nativeContextManagement: "unknown",
      defaultSessionCompaction: { enabled: true, maxSessionRuns: 0, maxRawInputTokens: 0, maxSessionAgeHours: 0 },
    },
    models,
    agentConfigurationDoc,
    getConfigSchema: () => configSchema,
    supportsLocalAgentJwt: true,
  };
}

export default createServerAdapter;
export { ADAPTER_LABEL };
