// The environment-driver hooks: each is forwarded to the pcsync daemon as
// it is. getContext returns the plugin context (for ctx.execution.log).
import { AsyncResource } from "node:async_hooks";
import { callHook, DaemonError, socketPath } from "./client.js";

const forwarded = {
  onEnvironmentAcquireLease: "acquireLease",
  onEnvironmentResumeLease: "resumeLease",
  onEnvironmentReleaseLease: "releaseLease",
  onEnvironmentDestroyLease: "destroyLease",
  onEnvironmentRealizeWorkspace: "realizeWorkspace",
};

/**
 * createHooks returns the driver hooks and onRunCancelled, the handler of
 * Paperclip's agent.run.cancelled event: Paperclip marks the run cancelled
 * but lets the sandbox's command run on, so the plugin tells the daemon,
 * which ends the run's leases at once (commands killed, pods deleted).
 */
export function createHooks(getContext) {
  // The daemons that hold each run's leases (the event names no environment).
  const runSockets = new Map();
  const seenSockets = new Set();
  const remember = (socket, runId) => {
    seenSockets.add(socket);
    if (runId) {
      runSockets.set(runId, socket);
      if (runSockets.size > 10000) runSockets.delete(runSockets.keys().next().value);
    }
  };
  const hooks = {
    async onRunCancelled(event) {
      const runId = event?.payload?.runId ?? event?.entityId;
      if (!runId) return;
      const sockets = runSockets.has(runId) ? [runSockets.get(runId)] : [...seenSockets];
      runSockets.delete(runId);
      await Promise.all(sockets.map((socket) =>
        callHook(socket, "runCancelled", { runId, companyId: event.companyId ?? null }).catch((err) =>
          getContext()?.logger?.warn?.("pcsync: could not end the cancelled run's leases", { runId, error: err.message }))));
    },
    async onEnvironmentValidateConfig(params) {
      try {
        return await callHook(socketPath(params.config), "validateConfig", params);
      } catch (err) {
        if (err instanceof DaemonError) return { ok: false, errors: [err.message] };
        throw err;
      }
    },
    async onEnvironmentProbe(params) {
      try {
        return await callHook(socketPath(params.config), "probe", params);
      } catch (err) {
        if (!(err instanceof DaemonError)) throw err;
        return {
          ok: false,
          summary: err.message,
          diagnostics: [{ severity: "error", code: err.code ?? "daemon_error", message: err.message }],
        };
      }
    },
    async onEnvironmentExecute(params) {
      const log = getContext()?.execution;
      // ctx.execution.log stamps a chunk with the invocation of the async
      // context it runs in: bind the callback to this execute's, whatever
      // socket event delivers the chunk.
      const onLine = AsyncResource.bind((msg) => {
        if (typeof msg.stdout === "string") log?.log("stdout", msg.stdout);
        if (typeof msg.stderr === "string") log?.log("stderr", msg.stderr);
      });
      return callHook(socketPath(params.config), "execute", params, onLine);
    },
  };
  for (const [name, hook] of Object.entries(forwarded)) {
    hooks[name] = (params) => {
      const socket = socketPath(params.config);
      remember(socket, params.runId);
      return callHook(socket, hook, params);
    };
  }
  return hooks;
}
