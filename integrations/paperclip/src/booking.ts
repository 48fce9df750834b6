// Booking the spend of runs Paperclip never heard back from.
//
// A lost run (lost.ts) used tokens and money, but Paperclip books a run's
// cost only from the result its adapter returns, and that run returned
// none. So the next execute of the same Paperclip agent books it through
// Paperclip's API, `POST /api/companies/:companyId/cost-events`, as the
// agent itself (the run's JWT), attributed to the lost run's own id
// (heartbeatRunId): budgets and the costs pages then count it.
//
// Each lost run is booked once. A record in the ledger's `booked/`
// directory is written (fsynced) before the POST and marked booked after
// it; a later execute never books a run whose record says booked. A record
// left "posting" (the server died between the POST and the mark) is
// settled by Paperclip's activity log: the route logs every event it takes
// as `cost.reported` with its cents and model, and a match since the
// record was written counts as booked. Only a server that stores the event
// and dies before it logs the activity can make the run be booked twice.

import { promises as fs } from "node:fs";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { BOOKED_DIR, LEDGER_DIR, type LostRun } from "./lost.js";
import { providerOf } from "./result.js";
import { readJSON, writeAtomic } from "./spool.js";

/**
 * ACTIVITY_SKEW_MS is how much earlier than a "posting" record Paperclip's
 * activity entry may be dated and still match it (the database's clock may
 * differ from the server's).
 */
const ACTIVITY_SKEW_MS = 60_000;

/** ACTIVITY_LIMIT is the most activity entries Paperclip lists at once. */
const ACTIVITY_LIMIT = 500;

/** CostEvent is the body of POST /api/companies/:companyId/cost-events. */
export interface CostEvent {
  agentId: string;
  heartbeatRunId: string;
  issueId?: string;
  projectId?: string;
  provider: string;
  model: string;
  billingType: string;
  costStatus: "reported" | "unpriced";
  inputTokens: number;
  cachedInputTokens: number;
  outputTokens: number;
  costCents: number;
  occurredAt: string;
}

/** BookingRecord is a lost run's booking in the ledger's booked/ directory. */
export interface BookingRecord {
  /** name is the lost run's name (its Paperclip run id). */
  name: string;
  /** state is "posting" from just before the POST, "booked" once Paperclip took it. */
  state: "posting" | "booked";
  /** by is the Paperclip run whose execute sent the event. */
  by: string;
  /** at is when the event was about to be sent (RFC 3339). */
  at: string;
  costCents: number;
  model: string;
  /** costEventId is Paperclip's id of the event, once known. */
  costEventId?: string;
}

/** Booking is what became of one lost run's cost in this execute. */
export interface Booking {
  name: string;
  /**
   * booked: this execute booked it; already: an earlier execute did; none:
   * the run used nothing to book; failed: not booked now (the run stays in
   * the ledger and the agent's next run tries again).
   */
  state: "booked" | "already" | "none" | "failed";
  costCents?: number;
  costEventId?: string;
  error?: string;
}

/** PaperclipApi is how the adapter reaches Paperclip's API. */
export interface PaperclipApi {
  /** baseUrl is the server's URL (no path, no credentials). */
  baseUrl: string;
  /** token is the run's JWT, sent as a bearer token; never logged. */
  token?: string;
  /** timeoutMs bounds each request. */
  timeoutMs: number;
}

/** BookOptions are the inputs of bookLost. */
export interface BookOptions {
  spoolDir: string;
  api: PaperclipApi;
  companyId: string;
  /** agentId is the Paperclip agent (the lost runs' and the token's). */
  agentId: string;
  /** runId is the Paperclip run doing the booking. */
  runId: string;
  /** billingType is the agent's adapterConfig.billingType. */
  billingType: string;
}

function nat(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.round(v) : 0;
}

/** ledgerBillingType is a billing type as Paperclip's ledger names it. */
export function ledgerBillingType(t: string): string {
  switch (t) {
    case "api":
      return "metered_api";
    case "subscription":
      return "subscription_included";
    case "metered_api":
    case "subscription_included":
    case "subscription_overage":
    case "credits":
    case "fixed":
      return t;
    default:
      return "unknown";
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * costEventOf is the cost event of a lost run, figured as Paperclip books
 * a run's result (cents rounded, nothing charged on an included
 * subscription, "unpriced" tokens without a cost), or null when the run
 * used nothing (Paperclip books no event then either).
 */
export function costEventOf(l: LostRun, agentId: string, billingType: string): CostEvent | null {
  const r = l.result;
  const u = r.usage ?? {};
  const inputTokens = nat(u.inputTokens);
  const cachedInputTokens = nat(u.cachedInputTokens);
  const outputTokens = nat(u.outputTokens);
  const bt = ledgerBillingType(billingType);
  const costUsd = typeof r.costUsd === "number" && Number.isFinite(r.costUsd) && r.costUsd >= 0 ? r.costUsd : null;
  const costCents = bt === "subscription_included" || costUsd === null ? 0 : Math.round(costUsd * 100);
  if (costCents === 0 && inputTokens + cachedInputTokens + outputTokens === 0) return null;
  const ev: CostEvent = {
    agentId,
    heartbeatRunId: l.entry.name,
    provider: providerOf(r.adapter, r.model) ?? "unknown",
    model: r.model || "unknown",
    billingType: bt,
    costStatus: costUsd === null ? "unpriced" : "reported",
    inputTokens,
    cachedInputTokens,
    outputTokens,
    costCents,
    occurredAt: new Date(Date.parse(r.finishedAt ?? "") || Date.parse(l.entry.writtenAt) || Date.now()).toISOString(),
  };
  if (l.entry.issueId && UUID.test(l.entry.issueId)) ev.issueId = l.entry.issueId;
  if (l.entry.projectId && UUID.test(l.entry.projectId)) ev.projectId = l.entry.projectId;
  return ev;
}

/** recordFile is the booking record of the run called name. */
export function recordFile(spoolDir: string, name: string): string {
  return path.join(spoolDir, LEDGER_DIR, BOOKED_DIR, `${name}.json`);
}

async function readRecord(spoolDir: string, name: string): Promise<BookingRecord | null> {
  try {
    const rec = (await readJSON(recordFile(spoolDir, name))) as BookingRecord | null;
    return rec && (rec.state === "posting" || rec.state === "booked") ? rec : null;
  } catch {
    // Records are written whole and renamed or linked into place: an
    // unreadable one was not written by the adapter. Claiming it fails, so
    // the run is not booked and stays in the ledger.
    return null;
  }
}

/** claim creates a booking record, or returns false when there is one. */
async function claim(spoolDir: string, rec: BookingRecord): Promise<boolean> {
  const file = recordFile(spoolDir, rec.name);
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = path.join(path.dirname(file), `.${rec.name}.${randomBytes(4).toString("hex")}.tmp`);
  const fh = await fs.open(tmp, "wx", 0o600);
  try {
    await fh.writeFile(JSON.stringify(rec) + "\n");
    await fh.sync();
  } finally {
    await fh.close();
  }
  try {
    // link, unlike rename, fails when the name exists: one claimant wins.
    await fs.link(tmp, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  } finally {
    await fs.rm(tmp, { force: true });
  }
}

async function replace(spoolDir: string, rec: BookingRecord): Promise<void> {
  await writeAtomic(recordFile(spoolDir, rec.name), JSON.stringify(rec) + "\n");
}

/** ApiError is a failed call to Paperclip's API: its status (0: no answer) and message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** call makes one request to Paperclip's API and returns its JSON body. */
async function call(api: PaperclipApi, method: string, p: string, body?: unknown): Promise<unknown> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (api.token) headers.authorization = `Bearer ${api.token}`;
  const url = api.baseUrl.replace(/\/+$/, "") + p;
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(api.timeoutMs),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code;
    throw new ApiError(0, `${method} ${url}: ${(err as Error).message}${cause ? ` (${cause})` : ""}`);
  }
  const text = await res.text().catch(() => "");
  if (!res.ok) {
    let msg = text;
    try {
      const j = JSON.parse(text) as { error?: unknown };
      if (typeof j.error === "string") msg = j.error;
    } catch {
      // not JSON: the text itself
    }
    throw new ApiError(res.status, `${method} ${url}: ${res.status} ${res.statusText}${msg ? `: ${msg.slice(0, 300)}` : ""}`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(res.status, `${method} ${url}: the answer is not JSON`);
  }
}

interface Activity {
  action?: string;
  entityId?: string;
  agentId?: string;
  createdAt?: string;
  details?: { costCents?: unknown; model?: unknown } | null;
}

/**
 * bookLost books the cost of each lost run in Paperclip once (see the top
 * of this file) and says what became of each.
 */
export async function bookLost(opts: BookOptions, lost: LostRun[]): Promise<Booking[]> {
  let activity: Activity[] | null = null;
  const matched = new Set<string>();
  // reported finds the cost.reported activity of an unsettled record.
  const reported = async (rec: BookingRecord): Promise<string | null> => {
    if (activity === null) {
      const q = new URLSearchParams({ agentId: opts.agentId, entityType: "cost_event", limit: String(ACTIVITY_LIMIT) });
      const list = await call(opts.api, "GET", `/api/companies/${encodeURIComponent(opts.companyId)}/activity?${q}`);
      activity = Array.isArray(list) ? (list as Activity[]) : [];
    }
    const since = Date.parse(rec.at) - ACTIVITY_SKEW_MS;
    for (const a of activity) {
      const id = a.entityId ?? "";
      if (
        a.action === "cost.reported" &&
        a.agentId === opts.agentId &&
        id !== "" &&
        !matched.has(id) &&
        a.details?.costCents === rec.costCents &&
        a.details?.model === rec.model &&
        Date.parse(a.createdAt ?? "") >= since
      ) {
        matched.add(id);
        return id;
      }
    }
    return null;
  };

  const out: Booking[] = [];
  for (const l of lost) {
    const name = l.entry.name;
    const ev = costEventOf(l, opts.agentId, opts.billingType);
    if (!ev) {
      out.push({ name, state: "none" });
      continue;
    }
    try {
      out.push(await bookOne(opts, name, ev, reported));
    } catch (err) {
      out.push({ name, state: "failed", costCents: ev.costCents, error: (err as Error).message });
    }
  }
  return out;
}

async function bookOne(
  opts: BookOptions,
  name: string,
  ev: CostEvent,
  reported: (rec: BookingRecord) => Promise<string | null>,
): Promise<Booking> {
  const prior = await readRecord(opts.spoolDir, name);
  if (prior?.state === "booked") {
    return { name, state: "already", costCents: prior.costCents, costEventId: prior.costEventId };
  }
  if (prior) {
    // An earlier execute was sending it and did not hear back.
    let id: string | null;
    try {
      id = await reported(prior);
    } catch (err) {
      return {
        name,
        state: "failed",
        costCents: ev.costCents,
        error: `run ${prior.by} was booking it and did not hear back, and Paperclip's activity cannot tell whether it got there: ${(err as Error).message}`,
      };
    }
    if (id !== null) {
      await replace(opts.spoolDir, { ...prior, state: "booked", costEventId: id });
      return { name, state: "already", costCents: prior.costCents, costEventId: id };
    }
  }
  const rec: BookingRecord = { name, state: "posting", by: opts.runId, at: new Date().toISOString(), costCents: ev.costCents, model: ev.model };
  if (prior) await replace(opts.spoolDir, rec);
  else if (!(await claim(opts.spoolDir, rec))) {
    return { name, state: "failed", costCents: ev.costCents, error: "another run of this agent is booking it right now" };
  }
  let created: unknown;
  try {
    created = await call(opts.api, "POST", `/api/companies/${encodeURIComponent(opts.companyId)}/cost-events`, ev);
  } catch (err) {
    const status = err instanceof ApiError ? err.status : 0;
    if (status >= 400 && status < 500) {
      // Refused before anything was stored: nothing to settle later.
      await fs.rm(recordFile(opts.spoolDir, name), { force: true });
    }
    return { name, state: "failed", costCents: ev.costCents, error: (err as Error).message };
  }
  const id = typeof (created as { id?: unknown })?.id === "string" ? (created as { id: string }).id : undefined;
  await replace(opts.spoolDir, { ...rec, state: "booked", costEventId: id });
  return { name, state: "booked", costCents: ev.costCents, costEventId: id };
}

/** describeBooking is the log line of a booking ("" when there is nothing to say). */
export function describeBooking(b: Booking): string {
  const cents = `${b.costCents ?? 0} cent${b.costCents === 1 ? "" : "s"}`;
  switch (b.state) {
    case "booked":
      return `[pcsync] booked the spend of run ${b.name} in Paperclip (${cents}, cost event ${b.costEventId ?? "?"})\n`;
    case "already":
      return `[pcsync] the spend of run ${b.name} is already booked in Paperclip (${cents}, cost event ${b.costEventId ?? "?"})\n`;
    case "failed":
      return `[pcsync] cannot book the spend of run ${b.name} in Paperclip (${cents}): ${b.error}; the agent's next run tries again\n`;
    default:
      return "";
  }
}
