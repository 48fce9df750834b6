// The benchmark's peer: a sandbox provider whose every execute is a local
// process on the Paperclip host (no isolation at all). It bounds from below
// what any provider can cost a run.
export default {
  id: "pcsync.bench-local",
  apiVersion: 1,
  version: "0.0.1",
  displayName: "Local processes (pcsync benchmark)",
  description: "Runs each execute as a local process; for benchmarks only.",
  author: "pcsync",
  categories: ["automation"],
  capabilities: ["environment.drivers.register"],
  entrypoints: { worker: "./worker.js" },
  // Two drivers of one worker: "benchlocal" as a provider that declares no
  // opt-in capability (the ACP engine polls its agent's output files), and
  // "benchlocal-stream", whose executes' output reaches Paperclip live
  // (incrementalSessionOutput: the ACP engine reads it from one execute).
  environmentDrivers: ["benchlocal", "benchlocal-stream"].map((driverKey) => ({
    driverKey,
    kind: "sandbox_provider",
    displayName: `Local processes (benchmark, ${driverKey})`,
    ...(driverKey === "benchlocal-stream" ? { sandboxCapabilities: { incrementalSessionOutput: true } } : {}),
    configSchema: { type: "object", properties: { root: { type: "string" }, path: { type: "string" } } },
  })),
};
