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
  environmentDrivers: [{
    driverKey: "benchlocal",
    kind: "sandbox_provider",
    displayName: "Local processes (benchmark)",
    configSchema: { type: "object", properties: { root: { type: "string" }, path: { type: "string" } } },
  }],
};
