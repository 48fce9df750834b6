// Runs Paperclip never heard back from.
//
// Paperclip's server may restart while pcsync runs an agent: the adapter's
// execute dies with it, pcsync finishes the run and writes its result, and
// Paperclip marks its run lost. So that no such run goes unnoticed, the
// adapter keeps a small ledger in the spool's hidden directory
// `.paperclip-adapter/`: one file per request it wrote, removed once it
// returned the run's result to Paperclip. A later execute for the same
// Paperclip agent looks there for finished runs still in the ledger, reports
// them in its log and result, and resumes the latest one's session when
// Paperclip hands it no session.

import { promises as fs } from "node:fs";
import path from "node:path";
import { readJSON, writeAtomic } from "./spool.js";
import type { PcsyncResult } from "./result.js";

/** LEDGER_DIR is the ledger's directory name inside the spool. */
export const LEDGER_DIR = ".paperclip-adapter";

/** BOOKED_DIR is the directory of booking records inside the ledger (booking.ts). */
export const BOOKED_DIR = "booked";

/** LedgerEntry is one request the adapter wrote and has not reported. */
export interface LedgerEntry {
  /** name is the request's name in the spool (the Paperclip run id). */
  name: string;
  /** paperclipAgentId is the Paperclip agent the run was for. */
  paperclipAgentId: string;
  /** agent is the pcsync agent that ran it. */
  agent: string;
  /** taskKey is Paperclip's task of the run (its sessions are per task), or null. */
  taskKey: string | null;
  /** writtenAt is when the request was written (RFC 3339). */
  writtenAt: string;
  /** issueId is the Paperclip issue the run worked on, if any (its cost is booked there). */
  issueId?: string;
  /** projectId is the Paperclip project of the run, if any. */
  projectId?: string;
}

/** LostRun is a finished run of the ledger. */
export interface LostRun {
  entry: LedgerEntry;
  result: PcsyncResult;
}

function ledgerFile(spoolDir: string, name: string): string {
  return path.join(spoolDir, LEDGER_DIR, `${name}.json`);
}

/** remember adds a run to the ledger before its request is written. */
export async function remember(spoolDir: string, e: LedgerEntry): Promise<void> {
  await fs.mkdir(path.join(spoolDir, LEDGER_DIR), { recursive: true, mode: 0o700 });
  // Not fsynced: the ledger is a hint, and a crash of the machine loses the
  // Paperclip run anyway.
  await writeAtomic(ledgerFile(spoolDir, e.name), JSON.stringify(e) + "\n", false, false);
}

/**
 * forget removes a run from the ledger once Paperclip has its result (and
 * its cost), then the run's booking record (booking.ts): in that order, so
 * that a run still in the ledger never lacks the record of its booking.
 */
export async function forget(spoolDir: string, name: string): Promise<void> {
  await fs.rm(ledgerFile(spoolDir, name), { force: true });
  await fs.rm(path.join(spoolDir, LEDGER_DIR, BOOKED_DIR, `${name}.json`), { force: true });
}

/**
 * findLost returns the finished runs of the ledger for one Paperclip agent,
 * oldest first, leaving out the run named skip; and the names of its runs
 * that have no result yet (still queued or running in pcsync).
 */
export async function findLost(
  spoolDir: string,
  paperclipAgentId: string,
  skip: string,
): Promise<{ finished: LostRun[]; unfinished: string[] }> {
  let names: string[];
  try {
    names = await fs.readdir(path.join(spoolDir, LEDGER_DIR));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { finished: [], unfinished: [] };
    throw err;
  }
  const finished: LostRun[] = [];
  const unfinished: string[] = [];
  for (const file of names) {
    if (!file.endsWith(".json") || file.startsWith(".")) continue;
    let entry: LedgerEntry;
    try {
      entry = (await readJSON(path.join(spoolDir, LEDGER_DIR, file))) as LedgerEntry;
    } catch {
      continue;
    }
    if (!entry || entry.paperclipAgentId !== paperclipAgentId || entry.name === skip) continue;
    let result: PcsyncResult | null = null;
    try {
      result = (await readJSON(path.join(spoolDir, `${entry.name}.result.json`))) as PcsyncResult | null;
    } catch {
      result = null;
    }
    if (result) finished.push({ entry, result });
    else unfinished.push(entry.name);
  }
  finished.sort((a, b) => (a.result.finishedAt ?? a.entry.writtenAt).localeCompare(b.result.finishedAt ?? b.entry.writtenAt));
  return { finished, unfinished };
}

/** describeLost is the log line that reports a lost run. */
export function describeLost(l: LostRun, spoolDir: string): string {
  const r = l.result;
  const u = r.usage;
  const parts = [
    `status ${r.status ?? "unknown"}`,
    r.errorCode ? `error ${r.errorCode}` : "",
    u ? `tokens in ${u.inputTokens ?? 0} / cached ${u.cachedInputTokens ?? 0} / out ${u.outputTokens ?? 0}` : "",
    typeof r.costUsd === "number" ? `cost $${r.costUsd}` : "",
    r.sessionId ? `session ${r.sessionId}` : "",
  ].filter(Boolean);
  return (
    `[pcsync] run ${l.entry.name} of this agent finished in pcsync while Paperclip was not waiting for it ` +
    `(Paperclip restarted?): ${parts.join(", ")}; its transcript is ${path.join(spoolDir, l.entry.name + ".log")}\n`
  );
}
