// @ts-check
// Tells the pcsync daemon beside Paperclip that Paperclip has loaded this
// package (POST /v1/hello on its sandbox socket), so that the daemon's
// /readyz can say whether Paperclip took what `pcsync paperclip install`
// put in place. It retries until the daemon answers, then repeats every
// 30 s (a restarted daemon learns it again); it never holds the process
// open and never throws.
import fs from "node:fs";
import http from "node:http";

/** How long between tries while the daemon does not answer, and after it did (ms). */
export const RETRY_MS = 2000;
export const REFRESH_MS = 30000;

/**
 * The name and version of the package whose package.json is at url.
 * @param {URL} url
 * @returns {{name: string, version: string}}
 */
export function packageOf(url) {
  const pkg = JSON.parse(fs.readFileSync(url, "utf8"));
  return { name: String(pkg.name ?? ""), version: String(pkg.version ?? "") };
}

/**
 * Posts one hello; resolves true on a 2xx answer, false otherwise.
 * @param {string} socket
 * @param {object} body
 * @returns {Promise<boolean>}
 */
export function postHello(socket, body) {
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve) => {
    const req = http.request({
      socketPath: socket, method: "POST", path: "/v1/hello", agent: false, timeout: 5000,
      headers: { "content-type": "application/json", "content-length": data.length },
    });
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300));
      res.on("error", () => resolve(false));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
    req.end(data);
  });
}

/**
 * Starts saying hello for component on socket; returns what stops it.
 * @param {string} socket
 * @param {{component: string, name: string, version: string}} body
 * @param {{retryMs?: number, refreshMs?: number}} [opts]
 * @returns {() => void}
 */
export function startHello(socket, body, opts = {}) {
  const retry = opts.retryMs ?? RETRY_MS;
  const refresh = opts.refreshMs ?? REFRESH_MS;
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  let stopped = false;
  const tick = async () => {
    const ok = await postHello(socket, body);
    if (stopped) return;
    timer = setTimeout(tick, ok ? refresh : retry);
    timer.unref();
  };
  void tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
