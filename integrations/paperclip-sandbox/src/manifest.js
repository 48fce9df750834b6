// @ts-check
// The manifest of pcsync's sandbox-provider plugin: one environment driver,
// provider key "pcsync" (Paperclip reserves "kubernetes" for its own). The
// defaults are the daemon's (src/defaults.js, generated from pkg/sandbox).
import { DEFAULT_LEASE_TTL_SEC, DEFAULT_SOCKET, DEFAULT_TIMEOUT_MS, DRIVER_KEY, MAX_LEASE_TTL_SEC } from "./defaults.js";

export { DEFAULT_SOCKET, DEFAULT_TIMEOUT_MS, DRIVER_KEY };

/** @type {import("@paperclipai/plugin-sdk").PaperclipPluginManifestV1} */
const manifest = {
  id: "pcsync.sandbox",
  apiVersion: 1,
  version: "0.1.0",
  displayName: "pcsync (Kubernetes)",
  description:
    "Runs Paperclip's stock adapters in hardened pods of the tenant namespaces that pcsync keeps from Git: one pod per lease, every command over one stream.",
  author: "pcsync",
  categories: ["automation"],
  // events.subscribe: a cancelled run (agent.run.cancelled) ends its lease at
  // once; Paperclip does not stop a sandbox's running command itself. A
  // started run (agent.run.started) has its lease begun before Paperclip
  // asks for it (config prestart).
  capabilities: ["environment.drivers.register", "events.subscribe"],
  entrypoints: { worker: "./dist/worker.js" },
  environmentDrivers: [
    {
      driverKey: DRIVER_KEY,
      kind: "sandbox_provider",
      displayName: "Kubernetes (pcsync)",
      description: "A pod per lease in the tenant namespace of a pcsync Company; needs `pcsync daemon --sandbox`.",
      // A lease (its pod) may serve several runs of an agent when the
      // environment sets reuseLease: Claude's and Codex's sessions resume
      // only in the lease and working directory they were made in. Executes
      // run concurrently and independently on the pod's command server.
      // An execute's output reaches Paperclip as it is written (the
      // daemon streams it; the worker passes each chunk on), so the ACP
      // engine may run its agent as one long execute and read its output
      // live (incrementalSessionOutput) instead of polling output files
      // through an execute ten times a second. Workspace sync is native
      // (src/sync.js): one raw tar per mapping over the daemon's socket and
      // one command of the lease's stream, in place of Paperclip's base64
      // chunks through execute. Sync operations may run concurrently
      // (concurrentSyncOperations): each mapping is a command of its own on
      // the pod's server and lands under a temporary name of its own, so
      // Paperclip stages a run's workspace, skills and configs (up to 4
      // operations) at once instead of one after another, as it does
      // through execute without native sync.
      sandboxCapabilities: {
        reusableLeases: true,
        independentControlCommands: true,
        incrementalSessionOutput: true,
        nativeSyncIn: true,
        nativeSyncOut: true,
        concurrentSyncOperations: true,
      },
      configSchema: {
        type: "object",
        required: ["company"],
        properties: {
          company: {
            type: "string",
            description: "The pcsync Company (metadata.name) whose tenant namespace hosts the pods.",
          },
          socketPath: {
            type: "string",
            default: DEFAULT_SOCKET,
            description: "The pcsync daemon's sandbox socket (pcsync daemon --sandbox-socket; default <state-dir>/sandbox.sock) as this server sees it.",
          },
          image: {
            type: "string",
            description: "Image instead of the pcsync config's image of the run's adapter type; must be allowed by the config.",
          },
          leaseTtlSec: {
            type: "integer",
            minimum: 1,
            description: `How long a lease lives when Paperclip asks for no expiry (default ${DEFAULT_LEASE_TTL_SEC}, at most ${MAX_LEASE_TTL_SEC}).`,
          },
          timeoutMs: {
            type: "integer",
            minimum: 1,
            default: DEFAULT_TIMEOUT_MS,
            description: "Paperclip's timeout of a hook; acquiring a lease waits for its pod (and an image pull).",
          },
          prestart: {
            type: "boolean",
            default: true,
            description:
              "Begin a run's lease (its pod) when Paperclip starts the run, a few hundred ms before it asks for the lease, with the params of the agent's last lease; the run's acquire takes it, and a lease no acquire takes within a minute is deleted.",
          },
          envAllow: {
            type: "array",
            items: { type: "string" },
            description: "Further environment keys (names or PREFIX_*) that may reach the pod.",
          },
        },
      },
    },
  ],
};

export default manifest;
