/**
 * Tells the pcsync daemon beside Paperclip that Paperclip has loaded this
 * adapter (POST /v1/hello on the daemon's sandbox socket), so that the
 * daemon's /readyz can say whether Paperclip took what `pcsync paperclip
 * install` put in place (deploy/paperclip). It retries every 2 s until the
 * daemon answers, then repeats every 30 s; it never holds the process open
 * and never throws. Without a daemon on the socket it only retries.
 */

import { readFileSync } from "node:fs";
import http from "node:http";

/** The daemon's sandbox socket in deploy/paperclip; PCSYNC_SANDBOX_SOCKET overrides it. */
export const DEFAULT_SANDBOX_SOCKET = "/spool/.pcsync/sandbox.sock";

export interface Hello {
  component: string;
  name: string;
  version: string;
}

/** packageOf returns the name and version of the package.json at url. */
export function packageOf(url: URL): { name: string; version: string } {
  const pkg = JSON.parse(readFileSync(url, "utf8")) as { name?: unknown; version?: unknown };
  return { name: String(pkg.name ?? ""), version: String(pkg.version ?? "") };
}

/** postHello posts one hello and resolves whether the daemon took it (2xx). */
export function postHello(socket: string, body: Hello): Promise<boolean> {
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

/** startHello says hello on socket until the returned function is called. */
export function startHello(socket: string, body: Hello, opts: { retryMs?: number; refreshMs?: number } = {}): () => void {
  const retry = opts.retryMs ?? 2000;
  const refresh = opts.refreshMs ?? 30000;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const tick = async (): Promise<void> => {
    const ok = await postHello(socket, body);
    if (stopped) return;
    timer = setTimeout(() => void tick(), ok ? refresh : retry);
    timer.unref();
  };
  void tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

let started = false;

/** helloOnce starts this adapter's hello the first time Paperclip creates it. */
export function helloOnce(): void {
  if (started) return;
  started = true;
  const socket = process.env.PCSYNC_SANDBOX_SOCKET?.trim() || DEFAULT_SANDBOX_SOCKET;
  startHello(socket, { component: "adapter", ...packageOf(new URL("../package.json", import.meta.url)) });
}
