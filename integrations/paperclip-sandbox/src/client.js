// The way to the pcsync daemon: HTTP/1.1 on its Unix socket. Every hook is
// POST /v1/hooks/<name> with the hook's params; execute answers NDJSON
// (output chunks, then one result or error line). Nothing goes in a URL.
import http from "node:http";
import path from "node:path";
import { DEFAULT_SOCKET } from "./manifest.js";

/** How long a connect may take before the daemon counts as unreachable. */
export const CONNECT_TIMEOUT_MS = 1000;

/** An error of the daemon, or of the way to it; `code` is a stable word. */
export class DaemonError extends Error {
  constructor(message, code) {
    super(message);
    this.name = "DaemonError";
    this.code = code;
  }
}

/** The socket path of an environment config (absolute, else an error). */
export function socketPath(config) {
  const p = config?.socketPath ?? DEFAULT_SOCKET;
  if (typeof p !== "string" || !path.isAbsolute(p)) {
    throw new DaemonError(`config.socketPath: ${JSON.stringify(p)} is not an absolute path`, "config_invalid");
  }
  return p;
}

function unreachable(socket, err) {
  return new DaemonError(
    `pcsync daemon not reachable at ${socket} (${err.code ?? err.message}): start pcsync daemon with --sandbox, ` +
      "and share its state directory with Paperclip (docs/paperclip.md, Sandbox environments)",
    "daemon_unreachable",
  );
}

/**
 * Calls one hook. With onLine, the answer is read as NDJSON: every line but
 * the last goes to onLine, and the final {"result"} is returned (an
 * {"error"} line throws).
 */
export function callHook(socket, hook, params, onLine) {
  const body = Buffer.from(JSON.stringify(params ?? {}));
  return new Promise((resolve, reject) => {
    let connected = false;
    const req = http.request({
      socketPath: socket,
      method: "POST",
      path: `/v1/hooks/${hook}`,
      headers: { "content-type": "application/json", "content-length": body.length },
      agent: false,
    });
    const timer = setTimeout(() => {
      if (!connected) req.destroy(Object.assign(new Error("connect timeout"), { code: "ETIMEDOUT" }));
    }, CONNECT_TIMEOUT_MS);
    req.on("socket", (s) => s.on("connect", () => { connected = true; clearTimeout(timer); }));
    req.on("error", (err) => {
      clearTimeout(timer);
      reject(connected ? new DaemonError(`pcsync daemon: ${hook}: ${err.message}`, "daemon_connection_lost") : unreachable(socket, err));
    });
    req.on("response", (res) => {
      connected = true;
      clearTimeout(timer);
      res.setEncoding("utf8");
      let buf = "";
      let final;
      res.on("data", (chunk) => {
        buf += chunk;
        if (!onLine || res.statusCode !== 200) return;
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (!line) continue;
          const msg = JSON.parse(line);
          if ("result" in msg || "error" in msg) final = msg;
          else onLine(msg);
        }
      });
      res.on("error", (err) => reject(new DaemonError(`pcsync daemon: ${hook}: ${err.message}`, "daemon_connection_lost")));
      res.on("end", () => {
        if (res.statusCode !== 200) {
          let e;
          try { e = JSON.parse(buf).error; } catch { e = { message: buf.trim() || `HTTP ${res.statusCode}` }; }
          return reject(new DaemonError(e.message, e.code));
        }
        if (!onLine) return resolve(buf ? JSON.parse(buf) : null);
        if (!final) return reject(new DaemonError(`pcsync daemon: ${hook}: the answer ended without a result`, "daemon_connection_lost"));
        if (final.error) return reject(new DaemonError(final.error.message, final.error.code));
        resolve(final.result);
      });
    });
    req.end(body);
  });
}
