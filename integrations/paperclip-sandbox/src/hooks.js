// @ts-check
// The environment-driver hooks: each is forwarded to the pcsync daemon as
// it is, but the workspace sync's (src/sync.js), which read and write the
// host's paths. getContext returns the plugin context (for
// ctx.execution.log).
import { AsyncResource } from "node:async_hooks";
import { callHook, DaemonError, socketPath } from "./client.js";
import { createSyncHooks } from "./sync.js";

/** @typedef {import("@paperclipai/plugin-sdk").PluginContext} PluginContext */
/** @typedef {import("@paperclipai/plugin-sdk").PluginEvent} PluginEvent */
/** @typedef {import("@paperclipai/plugin-sdk").PluginDefinition} PluginDefinition */
/**
 * The environment hooks of a plugin definition, and the handler of a
 * cancelled run's event.
 * @typedef {Required<Pick<PluginDefinition, "onEnvironmentValidateConfig" | "onEnvironmentProbe" |
 *   "onEnvironmentAcquireLease" | "onEnvironmentResumeLease" | "onEnvironmentReleaseLease" |
 *   "onEnvironmentDestroyLease" | "onEnvironmentRealizeWorkspace" | "onEnvironmentExecute" |
 *   "onEnvironmentSyncIn" | "onEnvironmentSyncOut">> &
 *   { onRunCancelled(event: PluginEvent): Promise<void>, onRunStarted(event: PluginEvent): Promise<void> }} Hooks
 */

/** How many runs' daemons, and agents' last acquires, the plugin keeps. */
const MAX_KEPT = 10000;

/**
 * Sets key to value in m as its newest entry, and drops the oldest entry
 * once m holds more than MAX_KEPT.
 * @template V
 * @param {Map<string, V>} m
 * @param {string} key
 * @param {V} value
 */
function setBounded(m, key, value) {
  m.delete(key);
  m.set(key, value);
  const oldest = m.keys().next().value;
  if (m.size > MAX_KEPT && oldest !== undefined) m.delete(oldest);
}

/** The hooks forwarded as they are, and the daemon's name of each. */
const forwarded = /** @type {const} */ ({
  onEnvironmentAcquireLease: "acquireLease",
  onEnvironmentResumeLease: "resumeLease",
  onEnvironmentReleaseLease: "releaseLease",
  onEnvironmentDestroyLease: "destroyLease",
  onEnvironmentRealizeWorkspace: "realizeWorkspace",
});

/**
 * createHooks returns the driver hooks and onRunCancelled, the handler of
 * Paperclip's agent.run.cancelled event: Paperclip marks the run cancelled
 * but lets the sandbox's command run on, so the plugin tells the daemon,
 * which ends the run's leases at once (commands killed, pods deleted).
 * onRunStarted handles agent.run.started, which Paperclip publishes when
 * it claims a run, a few hundred ms before it asks for the run's lease:
 * for an agent whose last lease the plugin acquired, it asks that
 * environment's daemon to begin the run's lease now (hook runStarted, with
 * that acquire's params), and the run's acquire takes it.
 * @param {() => PluginContext | undefined} getContext
 * @returns {Hooks}
 */
export function createHooks(getContext) {
  // The daemons that hold each run's leases (the event names no environment).
  /** @type {Map<string, string>} */
  const runSockets = new Map();
  /** @type {Set<string>} */
  const seenSockets = new Set();
  /**
   * @param {string} socket
   * @param {string | undefined} runId
   */
  const remember = (socket, runId) => {
    seenSockets.add(socket);
    if (runId) setBounded(runSockets, runId, socket);
  };
  // Each agent's last acquireLease params, by agent id (oldest first).
  /** @type {Map<string, Record<string, unknown>>} */
  const lastAcquire = new Map();
  /** @param {Record<string, any>} params */
  const rememberAcquire = (params) => {
    const agentId = params.agentId;
    if (typeof agentId !== "string" || agentId === "") return;
    const { driverKey, companyId, environmentId, config, adapterType } = params;
    setBounded(lastAcquire, agentId, { driverKey, companyId, environmentId, config, adapterType, agentId });
  };
  /** @type {Omit<Hooks, keyof typeof forwarded | "onEnvironmentSyncIn" | "onEnvironmentSyncOut">} */
  const own = {
    async onRunStarted(event) {
      const payload = /** @type {{ runId?: string, agentId?: string } | undefined} */ (event?.payload);
      const runId = payload?.runId ?? event?.entityId;
      const last = payload?.agentId ? lastAcquire.get(payload.agentId) : undefined;
      if (!runId || !last) return;
      const config = /** @type {Record<string, unknown> | undefined} */ (last.config);
      if (config?.prestart === false) return;
      try {
        await callHook(socketPath(config), "runStarted", { ...last, runId });
      } catch (err) {
        // The run's own acquire starts its lease: nothing is lost.
        getContext()?.logger?.warn?.("pcsync: could not begin the started run's lease", { runId, error: /** @type {Error} */ (err).message });
      }
    },
    async onRunCancelled(event) {
      const payload = /** @type {{ runId?: string } | undefined} */ (event?.payload);
      const runId = payload?.runId ?? event?.entityId;
      if (!runId) return;
      const held = runSockets.get(runId);
      const sockets = held ? [held] : [...seenSockets];
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
      const onLine = AsyncResource.bind((/** @type {import("./client.js").ExecuteLine} */ msg) => {
        if (typeof msg.stdout === "string") log?.log("stdout", msg.stdout);
        if (typeof msg.stderr === "string") log?.log("stderr", msg.stderr);
        if (typeof msg.log === "string") notices.push(msg.log);
      });
      /** @type {string[]} */
      const notices = [];
      /** @type {"stdout" | "stderr"} */
      let stream = "stderr";
      try {
        const res = await callHook(socketPath(params.config), "execute", params, onLine);
        // pcsync's own word (a resume's notice) goes in the run's log, not
        // in the result: on a stream the result has empty, as Paperclip
        // logs again the whole of a stream its streamed chunks do not start.
        if (res?.stderr && !res.stdout) stream = "stdout";
        return res;
      } finally {
        for (const n of notices) log?.log(stream, n);
      }
    },
  };
  /**
   * @param {string} hook
   * @returns {(params: { config: Record<string, unknown>, runId?: string }) => Promise<any>}
   */
  const forward = (hook) => (params) => {
    const socket = socketPath(params.config);
    remember(socket, params.runId);
    return callHook(socket, hook, params);
  };
  return {
    ...own,
    ...createSyncHooks(),
    onEnvironmentAcquireLease: (params) => {
      rememberAcquire(params);
      return forward(forwarded.onEnvironmentAcquireLease)(params);
    },
    onEnvironmentResumeLease: forward(forwarded.onEnvironmentResumeLease),
    onEnvironmentReleaseLease: forward(forwarded.onEnvironmentReleaseLease),
    onEnvironmentDestroyLease: forward(forwarded.onEnvironmentDestroyLease),
    onEnvironmentRealizeWorkspace: forward(forwarded.onEnvironmentRealizeWorkspace),
  };
}
