// @ts-check
// Paperclip's native workspace sync (onEnvironmentSyncIn/Out): the worker
// reads and writes the Paperclip host's paths itself and moves each
// mapping's bytes raw over its socket to the daemon, which pipes them
// through one command of the lease's stream (pkg/sandbox, api_sync.go):
// no base64, no 4 MB chunks, one exec per mapping. A tree crosses as a tar
// that the host's tar makes or extracts, as Paperclip's own fallback does.
//
// The contract (plugin-sdk protocol.d.ts, PluginSyncOperation):
// operations in order; in each, its files, then its postUploadCommands run
// verbatim (`sh -c`), in order, fail-fast, with a cwd confined under one of
// the operation's targets (checked before any byte moves); a host target
// gets its mode with no wider window (a temporary of that mode, renamed
// into place), and a failure leaves nothing partial on the host.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { callHook, send, socketPath } from "./client.js";
import { DEFAULT_TIMEOUT_MS } from "./defaults.js";

/** @typedef {import("@paperclipai/plugin-sdk").PluginEnvironmentSyncInParams} SyncInParams */
/** @typedef {import("@paperclipai/plugin-sdk").PluginEnvironmentSyncOutParams} SyncOutParams */
/** @typedef {import("@paperclipai/plugin-sdk").PluginEnvironmentSyncResult} SyncResult */
/** @typedef {import("@paperclipai/plugin-sdk").PluginSyncOperation} SyncOperation */
/** @typedef {import("@paperclipai/plugin-sdk").PluginSyncFileMapping} SyncFileMapping */

/** The most output of a host tar that is kept for an error message. */
const STDERR_KEEP = 4000;

/** A sync that failed: the message names the verb, the operation and the path. */
export class SyncError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "SyncError";
  }
}

/**
 * The workspace sync hooks.
 * @returns {{ onEnvironmentSyncIn(params: SyncInParams): Promise<SyncResult>, onEnvironmentSyncOut(params: SyncOutParams): Promise<SyncResult> }}
 */
export function createSyncHooks() {
  return {
    onEnvironmentSyncIn: (params) => sync("syncIn", params),
    onEnvironmentSyncOut: (params) => sync("syncOut", params),
  };
}

/**
 * Runs the operations of one sync hook in order.
 * @param {"syncIn" | "syncOut"} verb
 * @param {SyncInParams | SyncOutParams} params
 * @returns {Promise<SyncResult>}
 */
async function sync(verb, params) {
  const socket = socketPath(params.config);
  const operations = params.operations ?? [];
  for (const op of operations) checkOperation(verb, op);
  const timeoutMs = typeof params.config?.timeoutMs === "number" ? params.config.timeoutMs : DEFAULT_TIMEOUT_MS;
  /** @type {SyncResult["operations"]} */
  const done = [];
  for (const op of operations) {
    let files = 0;
    let bytes = 0;
    for (const m of op.files) {
      const where = `${verb} ${op.operationId}: ${m.sourcePath} → ${m.targetPath}`;
      try {
        bytes += verb === "syncIn" ? await put(socket, params, m, timeoutMs) : await get(socket, params, m, timeoutMs);
      } catch (err) {
        throw new SyncError(`pcsync: ${where}: ${/** @type {Error} */ (err).message}`);
      }
      files++;
    }
    for (const [i, c] of (op.postUploadCommands ?? []).entries()) {
      const cwd = c.cwd ?? "/";
      const res = await callHook(socket, "execute", {
        driverKey: params.driverKey, companyId: params.companyId, environmentId: params.environmentId, config: params.config,
        lease: params.lease, command: "sh", args: ["-c", c.command], cwd, timeoutMs: c.timeoutMs ?? timeoutMs,
      }, () => {}).catch((/** @type {Error} */ err) => {
        throw new SyncError(`pcsync: ${verb} ${op.operationId}: post-upload command ${i + 1} (cwd ${cwd}): ${err.message}`);
      });
      if (res?.exitCode !== 0 || res?.timedOut) {
        const how = res?.timedOut ? "timed out" : `exited ${res?.exitCode ?? res?.signal ?? "?"}`;
        throw new SyncError(`pcsync: ${verb} ${op.operationId}: post-upload command ${i + 1} (cwd ${cwd}) ${how}${tail(res?.stderr)}`);
      }
    }
    done.push({ operationId: op.operationId, filesTransferred: files, bytesTransferred: bytes });
  }
  return { operations: done };
}

/**
 * Refuses an operation before any byte moves: kinds, absolute paths, and
 * each post-upload command's cwd confined (equal to or under one of the
 * operation's sandbox targets, no "..").
 * @param {"syncIn" | "syncOut"} verb
 * @param {SyncOperation} op
 */
function checkOperation(verb, op) {
  const fail = (/** @type {string} */ msg) => new SyncError(`pcsync: ${verb} ${op?.operationId}: ${msg}`);
  if (!op || typeof op.operationId !== "string" || !Array.isArray(op.files)) throw fail("not an operation (operationId, files)");
  for (const m of op.files) {
    if (m.kind !== "file" && m.kind !== "directory") throw fail(`${m.targetPath}: kind ${JSON.stringify(m.kind)} is neither file nor directory`);
    const [host, sandbox] = verb === "syncIn" ? [m.sourcePath, m.targetPath] : [m.targetPath, m.sourcePath];
    if (typeof host !== "string" || !path.isAbsolute(host)) throw fail(`host path ${JSON.stringify(host)} is not absolute`);
    if (!confinedPosix(sandbox)) throw fail(`sandbox path ${JSON.stringify(sandbox)} is not an absolute POSIX path without ".."`);
    if (m.mode != null && !(Number.isInteger(m.mode) && m.mode >= 0 && m.mode <= 0o7777)) throw fail(`${m.targetPath}: mode ${m.mode} is no permission mode`);
  }
  const roots = op.files.map((m) => path.posix.normalize(verb === "syncIn" ? m.targetPath : m.sourcePath));
  for (const [i, c] of (op.postUploadCommands ?? []).entries()) {
    if (typeof c?.command !== "string") throw fail(`post-upload command ${i + 1} has no command`);
    if (c.cwd == null) continue;
    const cwd = path.posix.normalize(c.cwd);
    if (!confinedPosix(c.cwd) || !roots.some((r) => cwd === r || cwd.startsWith(`${r}/`))) {
      throw fail(`post-upload command ${i + 1}: cwd ${JSON.stringify(c.cwd)} is not confined under the operation's targets`);
    }
  }
}

/** @param {unknown} p */
function confinedPosix(p) {
  return typeof p === "string" && path.posix.isAbsolute(p) && !p.split("/").includes("..");
}

/**
 * Sends one syncIn mapping: a file's bytes, or a tar of the tree.
 * @param {string} socket
 * @param {SyncInParams | SyncOutParams} params
 * @param {SyncFileMapping} m
 * @param {number} timeoutMs
 * @returns {Promise<number>} the bytes sent
 */
async function put(socket, params, m, timeoutMs) {
  const data = m.kind === "directory" ? await packTree(m) : await fs.readFile(m.sourcePath);
  const head = { lease: params.lease, targetPath: m.targetPath, kind: m.kind, mode: m.mode ?? null, timeoutMs };
  await send(socket, "/v1/sync/put", [Buffer.from(JSON.stringify(head) + "\n"), data]);
  return data.length;
}

/**
 * Fetches one syncOut mapping and lands it on the host.
 * @param {string} socket
 * @param {SyncInParams | SyncOutParams} params
 * @param {SyncFileMapping} m
 * @param {number} timeoutMs
 * @returns {Promise<number>} the bytes received
 */
async function get(socket, params, m, timeoutMs) {
  const req = { lease: params.lease, sourcePath: m.sourcePath, kind: m.kind, exclude: m.exclude ?? [], followSymlinks: m.followSymlinks === true, timeoutMs };
  const data = await send(socket, "/v1/sync/get", [Buffer.from(JSON.stringify(req))]);
  if (m.kind === "directory") await landTree(m.targetPath, data, m.mode);
  else await landFile(m.targetPath, data, m.mode);
  return data.length;
}

/**
 * A tar of the tree's entries by name (no "." entry), without "._*" and
 * the mapping's excludes; symlinks as links unless followSymlinks.
 * @param {SyncFileMapping} m
 * @returns {Promise<Buffer>}
 */
async function packTree(m) {
  const entries = (await fs.readdir(m.sourcePath)).sort();
  if (entries.length === 0) return Buffer.alloc(1024); // an empty tar
  const excludes = ["._*", ...(m.exclude ?? [])].flatMap((e) => ["--exclude", e]);
  return tar(["-c", "--no-xattrs", ...(m.followSymlinks ? ["-h"] : []), "-f", "-", "-C", m.sourcePath, ...excludes, "--", ...entries]);
}

/**
 * Writes a file to the host: a hidden temporary beside the target, created
 * with at most mode and set to exactly mode before any byte, renamed into
 * place; on failure it is removed.
 * @param {string} target
 * @param {Buffer} data
 * @param {number | undefined} mode
 */
async function landFile(target, data, mode) {
  const dir = path.dirname(target);
  await fs.mkdir(dir, { recursive: true });
  const tmp = path.join(dir, `.${path.basename(target)}.pcsync-${randomUUID()}.tmp`);
  const fh = await fs.open(tmp, "wx", mode ?? 0o666);
  try {
    if (mode != null) await fh.chmod(mode);
    await fh.writeFile(data);
    await fh.close();
    await fs.rename(tmp, target);
  } catch (err) {
    await fh.close().catch(() => {});
    await fs.rm(tmp, { force: true });
    throw err;
  }
}

/**
 * Extracts a tar to the host: into a fresh directory of mode 0700 beside
 * the target, set to mode (or the umask's default) once full, which then
 * replaces the target whole; on failure it is removed.
 * @param {string} target
 * @param {Buffer} data
 * @param {number | undefined} mode
 */
async function landTree(target, data, mode) {
  const parent = path.dirname(target);
  await fs.mkdir(parent, { recursive: true });
  const tmp = await fs.mkdtemp(path.join(parent, `.${path.basename(target)}.pcsync-`));
  try {
    await tar(["-x", "--no-same-owner", "-f", "-", "-C", tmp], data);
    await fs.chmod(tmp, mode ?? 0o777 & ~process.umask());
    try {
      await fs.rename(tmp, target);
    } catch (err) {
      const code = /** @type {NodeJS.ErrnoException} */ (err).code;
      if (code !== "ENOTEMPTY" && code !== "EEXIST" && code !== "ENOTDIR" && code !== "EISDIR") throw err;
      await fs.rm(target, { recursive: true, force: true });
      await fs.rename(tmp, target);
    }
  } catch (err) {
    await fs.rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Runs the host's tar with args, stdin as given; resolves to its stdout,
 * rejects with its exit status and stderr.
 * @param {string[]} args
 * @param {Buffer} [stdin]
 * @returns {Promise<Buffer>}
 */
function tar(args, stdin) {
  return new Promise((resolve, reject) => {
    const p = spawn("tar", args, { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, COPYFILE_DISABLE: "1" } });
    /** @type {Buffer[]} */
    const out = [];
    let err = "";
    p.stdout.on("data", (c) => out.push(c));
    p.stderr.on("data", (c) => { if (err.length < STDERR_KEEP) err += c; });
    p.stdin.on("error", () => {}); // tar that exits early: its status says why
    p.on("error", reject);
    p.on("close", (code, signal) => {
      if (code === 0) resolve(Buffer.concat(out));
      else reject(new Error(`host tar ${args[0]} ${signal ?? `exited ${code}`}${tail(err)}`));
    });
    p.stdin.end(stdin);
  });
}

/**
 * ": " and the end of a command's stderr, or "".
 * @param {unknown} s
 */
function tail(s) {
  const t = typeof s === "string" ? s.trim() : "";
  if (!t) return "";
  return `: ${t.length > 500 ? `…${t.slice(-500)}` : t}`;
}
