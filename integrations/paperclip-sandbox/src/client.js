// @ts-check
// The way to the pcsync daemon: HTTP/1.1 on its Unix socket. Every hook is
// POST /v1/hooks/<name> with the hook's params; execute answers NDJSON
// (output chunks, then one result or error line). Nothing goes in a URL.
// An answer that is not what the daemon's hook contract says (pkg/sandbox,
// hook.go) rejects the hook; it never throws out of a stream's event.
import http from "node:http";
import path from "node:path";
import { DEFAULT_SOCKET } from "./defaults.js";

/** How long a connect may take before the daemon counts as unreachable. */
export const CONNECT_TIMEOUT_MS = 1000;

/**
 * One line of execute's answer (ExecuteLine): an output chunk or pcsync's
 * word for the run's log (log: not the command's output), then one result
 * or error.
 * @typedef {{ stdout?: string, stderr?: string, log?: string, result?: unknown, error?: HookError }} ExecuteLine
 */

/**
 * Why the daemon refused a hook (HookError).
 * @typedef {{ message: string, code?: string }} HookError
 */

/** An error of the daemon, or of the way to it; `code` is a stable word. */
export class DaemonError extends Error {
  /**
   * @param {string} message
   * @param {string | undefined} code
   */
  constructor(message, code) {
    super(message);
    this.name = "DaemonError";
    this.code = code;
  }
}

/**
 * The socket path of an environment config (absolute, else an error).
 * @param {Record<string, unknown> | undefined} config
 * @returns {string}
 */
export function socketPath(config) {
  const p = config?.socketPath ?? DEFAULT_SOCKET;
  if (typeof p !== "string" || !path.isAbsolute(p)) {
    throw new DaemonError(`config.socketPath: ${JSON.stringify(p)} is not an absolute path`, "config_invalid");
  }
  return p;
}

/**
 * @param {string} socket
 * @param {NodeJS.ErrnoException} err
 */
function unreachable(socket, err) {
  return new DaemonError(
    `pcsync daemon not reachable at ${socket} (${err.code ?? err.message}): start pcsync daemon with --sandbox, ` +
      "and share its state directory with Paperclip (docs/paperclip.md, Sandbox environments)",
    "daemon_unreachable",
  );
}

/**
 * Parses one JSON answer of hook; text that is not JSON is a DaemonError
 * (code daemon_bad_answer) naming the hook and the start of the text.
 * @param {string} hook
 * @param {string} text
 * @returns {any}
 */
export function parseAnswer(hook, text) {
  try {
    return JSON.parse(text);
  } catch (err) {
    const head = text.length > 120 ? `${text.slice(0, 120)}…` : text;
    throw new DaemonError(`pcsync daemon: ${hook}: an answer that is not JSON (${/** @type {Error} */ (err).message}): ${JSON.stringify(head)}`, "daemon_bad_answer");
  }
}

/**
 * Arms req's connect timeout and maps its errors to fail: before the
 * connection the daemon is unreachable at socket; after it, the connection
 * to the daemon was lost (what names the hook or route).
 * @param {http.ClientRequest} req
 * @param {string} socket
 * @param {string} what
 * @param {(err: unknown) => void} fail
 * @returns {() => void} marks the connection made (call it on the response)
 */
function guardConnect(req, socket, what, fail) {
  let connected = false;
  const timer = setTimeout(() => {
    if (!connected) req.destroy(Object.assign(new Error("connect timeout"), { code: "ETIMEDOUT" }));
  }, CONNECT_TIMEOUT_MS);
  const up = () => {
    connected = true;
    clearTimeout(timer);
  };
  req.on("socket", (s) => s.on("connect", up));
  req.on("error", (err) => {
    clearTimeout(timer);
    fail(connected ? new DaemonError(`pcsync daemon: ${what}: ${err.message}`, "daemon_connection_lost") : unreachable(socket, err));
  });
  return up;
}

/**
 * Calls one hook. With onLine, the answer is read as NDJSON: every line but
 * the last goes to onLine, and the final {"result"} is returned (an
 * {"error"} line throws). Any failure rejects the returned promise.
 * @param {string} socket
 * @param {string} hook
 * @param {unknown} params
 * @param {(line: ExecuteLine) => void} [onLine]
 * @returns {Promise<any>}
 */
export function callHook(socket, hook, params, onLine) {
  const body = Buffer.from(JSON.stringify(params ?? {}));
  return new Promise((resolve, reject) => {
    let settled = false;
    const req = http.request({
      socketPath: socket,
      method: "POST",
      path: `/v1/hooks/${hook}`,
      headers: { "content-type": "application/json", "content-length": body.length },
      agent: false,
    });
    /** @param {unknown} err */
    const fail = (err) => {
      if (settled) return;
      settled = true;
      reject(err);
      req.destroy();
    };
    /** @param {unknown} v */
    const done = (v) => {
      if (settled) return;
      settled = true;
      resolve(v);
    };
    const connected = guardConnect(req, socket, hook, fail);
    req.on("response", (res) => {
      connected();
      res.setEncoding("utf8");
      const streaming = onLine !== undefined && res.statusCode === 200;
      const reader = streaming ? lineReader(hook, onLine) : null;
      let buf = "";
      res.on("data", (chunk) => {
        if (settled) return;
        if (!reader) {
          buf += chunk;
          return;
        }
        try {
          reader.push(chunk);
        } catch (err) {
          fail(err);
        }
      });
      res.on("error", (err) => fail(new DaemonError(`pcsync daemon: ${hook}: ${err.message}`, "daemon_connection_lost")));
      res.on("end", () => {
        try {
          if (res.statusCode !== 200) throw refusal(res.statusCode, buf);
          done(reader ? reader.end() : buf ? parseAnswer(hook, buf) : null);
        } catch (err) {
          fail(err);
        }
      });
    });
    req.end(body);
  });
}

/**
 * The daemon's refusal of a hook (a non-2xx status): its ErrorResponse, or
 * the body as it is.
 * @param {number | undefined} status
 * @param {string} body
 */
function refusal(status, body) {
  /** @type {HookError} */
  let e;
  try {
    e = JSON.parse(body).error;
  } catch {
    e = { message: body.trim() || `HTTP ${status}` };
  }
  if (typeof e?.message !== "string") e = { message: body.trim() || `HTTP ${status}` };
  return new DaemonError(e.message, e.code);
}

/**
 * Reads execute's NDJSON answer: push throws on a line that is not JSON;
 * end returns the result, or throws the error line (or that there was
 * none). The daemon's result carries the exit only: the output chunks are
 * joined into its stdout and stderr, which Paperclip's
 * PluginEnvironmentExecuteResult requires whole; a log line is not.
 * @param {string} hook
 * @param {(line: ExecuteLine) => void} onLine
 */
function lineReader(hook, onLine) {
  let buf = "";
  /** @type {ExecuteLine | undefined} */
  let final;
  /** @type {{ stdout: string[], stderr: string[] }} */
  const out = { stdout: [], stderr: [] };
  return {
    /** @param {string} chunk */
    push(chunk) {
      buf += chunk;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (!line) continue;
        const msg = parseAnswer(hook, line);
        if (msg === null || typeof msg !== "object") {
          throw new DaemonError(`pcsync daemon: ${hook}: a line that is no object: ${JSON.stringify(line)}`, "daemon_bad_answer");
        }
        if ("result" in msg || "error" in msg) final = msg;
        else {
          if (typeof msg.stdout === "string") out.stdout.push(msg.stdout);
          if (typeof msg.stderr === "string") out.stderr.push(msg.stderr);
          onLine(msg);
        }
      }
    },
    end() {
      if (buf.trim()) this.push("\n");
      if (!final) throw new DaemonError(`pcsync daemon: ${hook}: the answer ended without a result`, "daemon_connection_lost");
      if (final.error) throw new DaemonError(final.error.message, final.error.code);
      const result = /** @type {Record<string, unknown>} */ (final.result);
      if (result && typeof result === "object") {
        for (const s of /** @type {const} */ (["stdout", "stderr"])) {
          if (typeof result[s] !== "string") result[s] = out[s].join("");
        }
      }
      return result;
    },
  };
}

/**
 * Posts body (bytes) to route of the daemon and returns the answer's bytes;
 * a non-2xx answer throws the daemon's refusal, and a lost or missing
 * daemon a DaemonError, as callHook does. The workspace sync's bytes go
 * this way (pkg/sandbox, api_sync.go).
 * @param {string} socket
 * @param {string} route
 * @param {Buffer[]} body the parts of the body, sent in order
 * @returns {Promise<Buffer>}
 */
export function send(socket, route, body) {
  const length = body.reduce((n, b) => n + b.length, 0);
  return new Promise((resolve, reject) => {
    let settled = false;
    const req = http.request({
      socketPath: socket,
      method: "POST",
      path: route,
      headers: { "content-type": "application/octet-stream", "content-length": length },
      agent: false,
    });
    /** @param {unknown} err */
    const fail = (err) => {
      if (settled) return;
      settled = true;
      reject(err);
      req.destroy();
    };
    const connected = guardConnect(req, socket, route, fail);
    req.on("response", (res) => {
      connected();
      /** @type {Buffer[]} */
      const chunks = [];
      res.on("data", (chunk) => chunks.push(chunk));
      res.on("error", (err) => fail(new DaemonError(`pcsync daemon: ${route}: ${err.message}`, "daemon_connection_lost")));
      res.on("end", () => {
        if (settled) return;
        const answer = Buffer.concat(chunks);
        if (res.statusCode !== 200) return fail(refusal(res.statusCode, answer.toString("utf8")));
        if (!res.complete) return fail(new DaemonError(`pcsync daemon: ${route}: the answer was cut off`, "daemon_connection_lost"));
        settled = true;
        resolve(answer);
      });
    });
    for (const b of body) req.write(b);
    req.end();
  });
}
