// Each lease is a directory; each execute a process group of its own.
import { spawn } from "node:child_process";
import { appendFileSync, mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { definePlugin, runWorker } from "@paperclipai/plugin-sdk";

let context;
const groups = new Map(); // lease id → Set of process group ids

function end(id) {
  for (const pgid of groups.get(id) ?? []) {
    try { process.kill(-pgid, "SIGKILL"); } catch {}
  }
  groups.delete(id);
  rmSync(id, { recursive: true, force: true });
  return { providerLeaseId: id, state: "destroyed" };
}

const plugin = definePlugin({
  async setup(ctx) { context = ctx; },
  async onEnvironmentValidateConfig({ config }) {
    return { ok: true, normalizedConfig: { ...config, timeoutMs: config.timeoutMs ?? 120000 } };
  },
  async onEnvironmentProbe() { return { ok: true, summary: "local processes" }; },
  async onEnvironmentAcquireLease({ config, requestedExpiresAt }) {
    const id = mkdtempSync(join(config.root || tmpdir(), "lease-"));
    for (const d of ["workspace", "home", "tmp"]) mkdirSync(join(id, d));
    groups.set(id, new Set());
    return {
      providerLeaseId: id,
      expiresAt: requestedExpiresAt ?? null,
      metadata: { remoteCwd: join(id, "workspace"), shellCommand: "sh" },
    };
  },
  async onEnvironmentResumeLease({ providerLeaseId }) {
    return { providerLeaseId, metadata: { remoteCwd: join(providerLeaseId, "workspace"), shellCommand: "sh" } };
  },
  async onEnvironmentReleaseLease({ providerLeaseId }) { return providerLeaseId ? end(providerLeaseId) : undefined; },
  async onEnvironmentDestroyLease({ providerLeaseId }) { return providerLeaseId ? end(providerLeaseId) : undefined; },
  async onEnvironmentRealizeWorkspace({ lease }) { return { cwd: lease.metadata.remoteCwd }; },
  async onEnvironmentExecute({ config, lease, command, args = [], cwd, env = {}, stdin, timeoutMs }) {
    const id = lease.providerLeaseId;
    // config.init (e.g. ["tini", "-s", "--"]) runs the command under a
    // reaping init, as a container's PID 1 would.
    const init = Array.isArray(config.init) ? config.init : [];
    const argv = [...init, command, ...args];
    // config.log (a file) gets one line per execute: what ran, for the
    // bench's count of executes by kind.
    if (config.log) appendFileSync(config.log, JSON.stringify({ argv: [command, ...args].map((a) => String(a).slice(0, 160)), stdin: (stdin ?? "").length }) + "\n");
    const child = spawn(argv[0], argv.slice(1), {
      cwd: cwd || lease.metadata.remoteCwd,
      env: { HOME: join(id, "home"), TMPDIR: join(id, "tmp"), PATH: config.path || process.env.PATH || "/usr/bin:/bin", ...env },
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
    });
    groups.get(id)?.add(child.pid);
    let stdout = "", stderr = "", timedOut = false;
    child.stdout.on("data", (b) => { stdout += b; context.execution.log("stdout", b.toString()); });
    child.stderr.on("data", (b) => { stderr += b; context.execution.log("stderr", b.toString()); });
    child.stdin.on("error", () => {});
    child.stdin.end(stdin ?? "");
    const timer = timeoutMs > 0 ? setTimeout(() => {
      timedOut = true;
      try { process.kill(-child.pid, "SIGKILL"); } catch {}
    }, timeoutMs) : null;
    const [code, signal] = await new Promise((resolve) => {
      child.on("error", (err) => { stderr += String(err) + "\n"; resolve([127, null]); });
      // All output once the pipes close; 50 ms after the exit at most (a
      // background child may hold them).
      child.on("exit", (c, s) => setTimeout(() => resolve([c, s]), 50));
      child.on("close", (c, s) => resolve([c, s]));
    });
    if (timer) clearTimeout(timer);
    groups.get(id)?.delete(child.pid);
    return { exitCode: code, signal, timedOut, stdout, stderr };
  },
});

export default plugin;
runWorker(plugin, import.meta.url);
