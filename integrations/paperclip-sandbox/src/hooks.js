// The environment-driver hooks: each is forwarded to the pcsync daemon as
// it is. getContext returns the plugin context (for ctx.execution.log).
import { callHook, DaemonError, socketPath } from "./client.js";

const forwarded = {
  onEnvironmentAcquireLease: "acquireLease",
  onEnvironmentResumeLease: "resumeLease",
  onEnvironmentReleaseLease: "releaseLease",
  onEnvironmentDestroyLease: "destroyLease",
  onEnvironmentRealizeWorkspace: "realizeWorkspace",
};

export function createHooks(getContext) {
  const hooks = {
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
      return callHook(socketPath(params.config), "execute", params, (msg) => {
        if (typeof msg.stdout === "string") log?.log("stdout", msg.stdout);
        if (typeof msg.stderr === "string") log?.log("stderr", msg.stderr);
      });
    },
  };
  for (const [name, hook] of Object.entries(forwarded)) {
    hooks[name] = (params) => callHook(socketPath(params.config), hook, params);
  }
  return hooks;
}
