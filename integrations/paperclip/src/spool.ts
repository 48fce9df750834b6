// The files of pcsync's spool protocol (docs/runs.md, docs/paperclip.md).

import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";

/** SpoolPaths are the files of one run in the spool. */
export interface SpoolPaths {
  name: string;
  request: string;
  log: string;
  result: string;
  cancel: string;
}

/** spoolPaths names the files of the run called name. */
export function spoolPaths(spoolDir: string, name: string): SpoolPaths {
  return {
    name,
    request: path.join(spoolDir, `${name}.json`),
    log: path.join(spoolDir, `${name}.log`),
    result: path.join(spoolDir, `${name}.result.json`),
    cancel: path.join(spoolDir, `${name}.cancel`),
  };
}

/**
 * writeAtomic writes data as a hidden temporary file of mode 0600 next to
 * file and renames it into place, so a reader never sees half of it.
 * With exclusive, an existing file is not replaced (EEXIST is thrown; the
 * check and the rename are two steps, enough for one writer per name).
 * With sync, the data is on disk before the name appears.
 */
export async function writeAtomic(file: string, data: string, exclusive = false, sync = true): Promise<void> {
  const dir = path.dirname(file);
  const tmp = path.join(dir, `.${path.basename(file)}.${randomBytes(4).toString("hex")}.tmp`);
  const fh = await fs.open(tmp, "wx", 0o600);
  try {
    await fh.writeFile(data);
    if (sync) await fh.sync();
  } finally {
    await fh.close();
  }
  try {
    // Always rename, never link: pcsync refuses a request with two links, and
    // it may read the name between a link and the removal of the temp file.
    if (exclusive && (await exists(file))) {
      throw Object.assign(new Error(`${file} already exists`), { code: "EEXIST" });
    }
    await fs.rename(tmp, file);
  } finally {
    await fs.rm(tmp, { force: true });
  }
}

/** readJSON reads and parses a JSON file; null when it does not exist. */
export async function readJSON(file: string): Promise<unknown | null> {
  let text: string;
  try {
    text = await fs.readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  return JSON.parse(text);
}

/** exists says whether a path exists. */
export async function exists(file: string): Promise<boolean> {
  try {
    await fs.lstat(file);
    return true;
  } catch {
    return false;
  }
}

/** A company as the daemon's status file lists it. */
export interface StatusCompany {
  slug: string;
  id: string | null;
  agents: Array<{ name: string; adapter: string }>;
}

/** DaemonStatus is the part of <stateDir>/status.json the adapter reads. */
export interface DaemonStatus {
  version: string | null;
  pid: number | null;
  executor: string | null;
  heartbeatAt: Date | null;
  heartbeatIntervalSec: number;
  /** stoppedAt is set when the daemon stopped serving the spool (its runs go on). */
  stoppedAt: Date | null;
  companies: StatusCompany[] | null;
  runs: Record<string, { state: string; startedAt: string | null }>;
}

/** Liveness is what the status file says about the daemon. */
export type Liveness =
  | { alive: true; status: DaemonStatus; ageSec: number }
  | { alive: false; status: DaemonStatus | null; reason: string };

/** statusFile is the daemon's status file in stateDir. */
export function statusFile(stateDir: string): string {
  return path.join(stateDir, "status.json");
}

function parseStatus(raw: unknown): DaemonStatus {
  const o = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
  const time = (v: unknown): Date | null => {
    if (typeof v !== "string") return null;
    const d = new Date(v);
    return Number.isNaN(d.getTime()) ? null : d;
  };
  const interval = typeof o.heartbeatIntervalSec === "number" && o.heartbeatIntervalSec > 0 ? o.heartbeatIntervalSec : 10;
  let companies: StatusCompany[] | null = null;
  if (Array.isArray(o.companies)) {
    companies = o.companies.map((c: any) => ({
      slug: String(c?.slug ?? ""),
      id: typeof c?.id === "string" && c.id !== "" ? c.id : null,
      agents: Array.isArray(c?.agents)
        ? c.agents.map((a: any) => ({ name: String(a?.name ?? ""), adapter: String(a?.adapter ?? "") }))
        : [],
    }));
  }
  const runs: DaemonStatus["runs"] = {};
  if (typeof o.runs === "object" && o.runs !== null) {
    for (const [k, v] of Object.entries(o.runs as Record<string, any>)) {
      runs[k] = { state: String(v?.state ?? ""), startedAt: typeof v?.startedAt === "string" ? v.startedAt : null };
    }
  }
  return {
    version: typeof o.version === "string" ? o.version : null,
    pid: typeof o.pid === "number" ? o.pid : null,
    executor: typeof o.executor === "string" ? o.executor : null,
    heartbeatAt: time(o.heartbeatAt),
    heartbeatIntervalSec: interval,
    stoppedAt: time(o.stoppedAt),
    companies,
    runs,
  };
}

/**
 * readLiveness reads the daemon's status file. The daemon is alive when its
 * heartbeatAt is younger than 3 × heartbeatIntervalSec.
 */
export async function readLiveness(stateDir: string, spoolDir: string, now = new Date()): Promise<Liveness> {
  const file = statusFile(stateDir);
  const start = `start it with \`pcsync daemon --spool ${spoolDir}\`${stateDir === path.join(spoolDir, ".pcsync") ? "" : ` --state-dir ${stateDir}`} (see docs/paperclip.md)`;
  let raw: unknown;
  try {
    raw = await readJSON(file);
  } catch (err) {
    return { alive: false, status: null, reason: `the pcsync daemon's status file ${file} cannot be read (${(err as Error).message}); ${start}` };
  }
  if (raw === null) {
    return {
      alive: false,
      status: null,
      reason: `no pcsync daemon serves the spool ${spoolDir}: its status file ${file} does not exist; ${start}, or set stateDir if the daemon runs with --state-dir`,
    };
  }
  const status = parseStatus(raw);
  if (status.heartbeatAt === null) {
    return {
      alive: false,
      status,
      reason: `the pcsync daemon's status file ${file} has no heartbeatAt: this pcsync is too old for the Paperclip adapter; upgrade pcsync`,
    };
  }
  // A daemon that stopped (a restart, an upgrade) leaves its runs going and
  // the next daemon adopts them: it counts as alive for as long as a missed
  // heartbeat would, from when it stopped.
  const last = status.stoppedAt ?? status.heartbeatAt;
  const ageSec = (now.getTime() - last.getTime()) / 1000;
  if (ageSec > 3 * status.heartbeatIntervalSec) {
    const what = status.stoppedAt
      ? `it stopped at ${status.stoppedAt.toISOString()}, ${Math.round(ageSec)} s ago, and no daemon has started since`
      : `its last heartbeat (${status.heartbeatAt.toISOString()}) is ${Math.round(ageSec)} s old (limit ${3 * status.heartbeatIntervalSec} s)`;
    return { alive: false, status, reason: `the pcsync daemon of the spool ${spoolDir} is not running: ${what}; ${start}` };
  }
  return { alive: true, status, ageSec };
}
