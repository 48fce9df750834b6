// The adapter's configuration: the agent's adapterConfig in Paperclip.

import path from "node:path";
import type { AdapterAgent, AdapterBillingType } from "@paperclipai/adapter-utils";
import { buildPaperclipEnv } from "@paperclipai/adapter-utils/server-utils";

/** ADAPTER_TYPE is the Paperclip adapter type this package registers. */
export const ADAPTER_TYPE = "pcsync";

/** ADAPTER_LABEL is the adapter's name in Paperclip's UI. */
export const ADAPTER_LABEL = "pcsync (Kubernetes Jobs)";

/** Defaults of the optional fields. */
export const DEFAULTS = {
  /** Seconds the adapter waits past the run's timeout for pcsync's result. */
  resultGraceSec: 120,
  /** Seconds the adapter waits for the result after it asked pcsync to cancel. */
  cancelWaitSec: 60,
};

/** AdapterConfig is the parsed, checked adapterConfig. */
export interface AdapterConfig {
  /** spoolDir is the pcsync daemon's spool directory (absolute). */
  spoolDir: string;
  /** stateDir is the daemon's state directory; default <spoolDir>/.pcsync. */
  stateDir: string;
  /** agent is the pcsync agent name, or "" to derive it from the Paperclip agent. */
  agent: string;
  /** company is a pcsync company slug, or "" to name the company by its Paperclip id. */
  company: string;
  /** timeoutSec is the run's timeout (0: pcsync's own default for the agent). */
  timeoutSec: number;
  /** resultGraceSec is how long past timeoutSec the adapter waits for a result. */
  resultGraceSec: number;
  /** cancelWaitSec is how long after a cancel the adapter waits for a result. */
  cancelWaitSec: number;
  /** apiUrl overrides the Paperclip URL put into the request (paperclip.apiUrl). */
  apiUrl: string;
  /** promptTemplate replaces Paperclip's default heartbeat prompt template. */
  promptTemplate: string;
  /** bootstrapPromptTemplate is prepended to the first run of a session. */
  bootstrapPromptTemplate: string;
  /** billingType is reported to Paperclip with the run's cost. */
  billingType: string;
  /** resumeLostSessions resumes the session of a run Paperclip never heard back from. */
  resumeLostSessions: boolean;
}

/** ConfigError is a configuration mistake, with the field it concerns. */
export class ConfigError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`adapterConfig.${field}: ${message}`);
    this.name = "ConfigError";
  }
}

/** BILLING_TYPES are the billingType values: Paperclip's billing types. */
export const BILLING_TYPES: readonly AdapterBillingType[] = [
  "api",
  "subscription",
  "metered_api",
  "subscription_included",
  "subscription_overage",
  "credits",
  "fixed",
  "unknown",
];
const billingTypes = new Set<string>(BILLING_TYPES);

function str(raw: Record<string, unknown>, key: string): string {
  const v = raw[key];
  if (v === undefined || v === null) return "";
  if (typeof v !== "string") throw new ConfigError(key, `must be a string, not ${typeof v}`);
  return v.trim();
}

function num(raw: Record<string, unknown>, key: string, fallback: number): number {
  const v = raw[key];
  if (v === undefined || v === null || v === "") return fallback;
  const n = typeof v === "string" ? Number(v.trim()) : v;
  if (typeof n !== "number" || !Number.isFinite(n) || n < 0 || !Number.isInteger(n)) {
    throw new ConfigError(key, `must be a whole number of seconds >= 0, not ${JSON.stringify(v)}`);
  }
  return n;
}

function bool(raw: Record<string, unknown>, key: string, fallback: boolean): boolean {
  const v = raw[key];
  if (v === undefined || v === null || v === "") return fallback;
  if (typeof v === "boolean") return v;
  if (v === "true") return true;
  if (v === "false") return false;
  throw new ConfigError(key, `must be true or false, not ${JSON.stringify(v)}`);
}

/** parseConfig checks an adapterConfig and fills the defaults. */
export function parseConfig(input: unknown): AdapterConfig {
  const raw = typeof input === "object" && input !== null && !Array.isArray(input) ? (input as Record<string, unknown>) : {};
  const spoolDir = str(raw, "spoolDir");
  if (spoolDir === "") {
    throw new ConfigError("spoolDir", "is required: the spool directory of the pcsync daemon (its --spool flag)");
  }
  if (!path.isAbsolute(spoolDir)) {
    throw new ConfigError("spoolDir", `must be an absolute path, not ${JSON.stringify(spoolDir)}`);
  }
  let stateDir = str(raw, "stateDir");
  if (stateDir !== "" && !path.isAbsolute(stateDir)) {
    throw new ConfigError("stateDir", `must be an absolute path, not ${JSON.stringify(stateDir)}`);
  }
  if (stateDir === "") stateDir = path.join(spoolDir, ".pcsync");
  const agent = str(raw, "agent");
  if (agent !== "" && !isDNSLabel(agent)) {
    throw new ConfigError("agent", `${JSON.stringify(agent)} is not a pcsync agent name (a DNS label: lower-case letters, digits and "-")`);
  }
  const company = str(raw, "company");
  if (company !== "" && !isDNSLabel(company)) {
    throw new ConfigError("company", `${JSON.stringify(company)} is not a pcsync company slug (a DNS label)`);
  }
  const apiUrl = str(raw, "apiUrl");
  if (apiUrl !== "") {
    let u: URL;
    try {
      u = new URL(apiUrl);
    } catch {
      throw new ConfigError("apiUrl", `${JSON.stringify(apiUrl)} is not a URL`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new ConfigError("apiUrl", `must be an http or https URL, not ${JSON.stringify(apiUrl)}`);
    }
  }
  const billingType = str(raw, "billingType") || "unknown";
  if (!billingTypes.has(billingType)) {
    throw new ConfigError("billingType", `must be one of ${BILLING_TYPES.join(", ")}, not ${JSON.stringify(billingType)}`);
  }
  return {
    spoolDir: path.resolve(spoolDir),
    stateDir: path.resolve(stateDir),
    agent,
    company,
    timeoutSec: num(raw, "timeoutSec", 0),
    resultGraceSec: num(raw, "resultGraceSec", DEFAULTS.resultGraceSec),
    cancelWaitSec: num(raw, "cancelWaitSec", DEFAULTS.cancelWaitSec),
    apiUrl,
    promptTemplate: typeof raw.promptTemplate === "string" ? raw.promptTemplate : "",
    bootstrapPromptTemplate: typeof raw.bootstrapPromptTemplate === "string" ? raw.bootstrapPromptTemplate : "",
    billingType,
    resumeLostSessions: bool(raw, "resumeLostSessions", true),
  };
}

/** isDNSLabel says whether s is a valid pcsync name (RFC 1123 label). */
export function isDNSLabel(s: string): boolean {
  return s.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(s);
}

/**
 * agentNameFrom derives a pcsync agent name from a Paperclip agent's name:
 * lower-cased, every run of other characters turned into "-", trimmed of "-",
 * at most 63 characters ("Code Reviewer" → "code-reviewer").
 */
export function agentNameFrom(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .slice(0, 63)
    .replace(/^-+|-+$/g, "");
}

/**
 * defaultApiUrl is the Paperclip URL the built-in adapters give their agents
 * as PAPERCLIP_API_URL: the server's PAPERCLIP_API_URL (its start-up sets
 * it), else PAPERCLIP_RUNTIME_API_URL, else http://<HOST>:<PORT> of the
 * server's environment (localhost:3100).
 */
export function defaultApiUrl(agent: AdapterAgent): string {
  return buildPaperclipEnv(agent).PAPERCLIP_API_URL;
}

/**
 * selfApiUrl is where the adapter, which runs inside Paperclip's server,
 * reaches that server: the address it listens on (PAPERCLIP_LISTEN_HOST and
 * PAPERCLIP_LISTEN_PORT, which its start-up sets; a wildcard host as
 * loopback), else defaultApiUrl. Not the public URL, which may be a name
 * only the users' network resolves (deploy/paperclip's Service name, an
 * ingress) and which the server itself may not reach.
 */
export function selfApiUrl(agent: AdapterAgent, env: NodeJS.ProcessEnv = process.env): string {
  const port = env.PAPERCLIP_LISTEN_PORT?.trim() ?? "";
  if (!/^[0-9]+$/.test(port)) return defaultApiUrl(agent);
  let host = env.PAPERCLIP_LISTEN_HOST?.trim() ?? "";
  if (host === "" || host === "0.0.0.0" || host === "::" || host === "[::]") host = "127.0.0.1";
  if (host.includes(":") && !host.startsWith("[")) host = `[${host}]`;
  return `http://${host}:${port}`;
}
