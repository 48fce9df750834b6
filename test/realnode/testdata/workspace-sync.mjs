// Drives pcsync's plugin hooks (integrations/paperclip-sandbox/src) against
// a running daemon API, for test/realnode's workspace-sync test and
// benchmark. Its one argument is a JSON request:
//
//   {"plugin": "<dir of the plugin's src>", "socket": "...", "leaseId": "...",
//    "calls": [{"verb": "syncIn"|"syncOut"|"execute", "params": {...}}]}
//     → one JSON line per call: {"result": ...} or {"error": "<message>"}
//
//   {"plugin": ..., "socket": ..., "leaseId": ..., "bench": {"adapterUtils": "<dir>",
//    "workspace": "<host dir>", "remoteCwd": "/workspace", "mode": "fallback"|"native", "samples": N}}
//     → one JSON line per sample: {"inMs", "outMs", "transferInMs", "transferOutMs",
//       "executesIn", "executesOut", "syncCalls"}
//
// The benchmark runs Paperclip's own code: adapter-utils'
// prepareCommandManagedRuntime (the workspace staged through the client's
// syncIn) and restoreWorkspace (read back), with the runner Paperclip's
// server builds for a plugin sandbox (environment-execution-target.js):
// execute through the plugin's onEnvironmentExecute, and syncIn/syncOut
// through its onEnvironmentSyncIn/Out only in native mode. Without them,
// adapter-utils moves the tar as base64 through execute in 4 MB chunks.
import path from "node:path";
import { pathToFileURL } from "node:url";

const req = JSON.parse(process.argv[2]);
const { createHooks } = await import(pathToFileURL(path.join(req.plugin, "hooks.js")).href);
const hooks = createHooks(() => undefined);
const config = { provider: "pcsync", company: "bench", socketPath: req.socket };
const base = { driverKey: "pcsync", companyId: "c", environmentId: "e", config, lease: { providerLeaseId: req.leaseId, metadata: {} } };
const method = { syncIn: "onEnvironmentSyncIn", syncOut: "onEnvironmentSyncOut", execute: "onEnvironmentExecute" };

if (req.calls) {
  for (const call of req.calls) {
    try {
      const result = await hooks[method[call.verb]]({ ...base, ...call.params });
      console.log(JSON.stringify({ result }));
    } catch (err) {
      console.log(JSON.stringify({ error: err.message }));
    }
  }
} else {
  await bench(req.bench);
}

async function bench(b) {
  const { prepareCommandManagedRuntime } = await import(pathToFileURL(path.join(b.adapterUtils, "dist", "command-managed-runtime.js")).href);
  let executes = 0;
  let syncCalls = 0;
  let transferMs = 0; // time inside execute and the sync hooks: the transport, without the host's hashing, tar and merge
  const timed = async (f) => { const t = performance.now(); try { return await f(); } finally { transferMs += performance.now() - t; } };
  const runner = {
    supportsSingleStreamStdinProgress: false,
    allowConcurrentSyncOperations: false,
    execute: async (input) => {
      executes++;
      return timed(() => hooks.onEnvironmentExecute({ ...base, command: input.command, args: input.args, cwd: input.cwd ?? b.remoteCwd,
        env: input.env, stdin: input.stdin, timeoutMs: input.timeoutMs }));
    },
    ...(b.mode === "native"
      ? {
          syncIn: (operations) => { syncCalls++; return timed(() => hooks.onEnvironmentSyncIn({ ...base, operations })); },
          syncOut: (operations) => { syncCalls++; return timed(() => hooks.onEnvironmentSyncOut({ ...base, operations })); },
        }
      : {}),
  };
  for (let i = 0; i < b.samples; i++) {
    executes = 0;
    syncCalls = 0;
    transferMs = 0;
    let t = performance.now();
    const prepared = await prepareCommandManagedRuntime({
      runner,
      spec: { remoteCwd: b.remoteCwd, timeoutMs: 300_000, providerKey: "pcsync", leaseId: req.leaseId },
      adapterKey: "claude",
      workspaceLocalDir: b.workspace,
    });
    const inMs = performance.now() - t;
    const executesIn = executes;
    const transferInMs = transferMs;
    t = performance.now();
    await prepared.restoreWorkspace();
    const outMs = performance.now() - t;
    console.log(JSON.stringify({ inMs, outMs, transferInMs, transferOutMs: transferMs - transferInMs,
      executesIn, executesOut: executes - executesIn, syncCalls }));
  }
}
