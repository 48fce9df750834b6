// @ts-check
// The plugin worker: a thin forwarder to `pcsync daemon --sandbox`. It holds
// no cluster credentials; the daemon does the work.
import { definePlugin, runWorker } from "@paperclipai/plugin-sdk";
import { createHooks } from "./hooks.js";
import { DEFAULT_SOCKET } from "./defaults.js";
import { packageOf, startHello } from "./hello.js";

/** @type {import("@paperclipai/plugin-sdk").PluginContext | undefined} */
let context;
const { onRunCancelled, onRunStarted, ...hooks } = createHooks(() => context);
const plugin = definePlugin({
  async setup(ctx) {
    context = ctx;
    ctx.events.on("agent.run.cancelled", onRunCancelled);
    // A started run's lease begins before Paperclip asks for it.
    ctx.events.on("agent.run.started", onRunStarted);
    // Paperclip loaded the plugin: tell the daemon (its /readyz waits for it).
    startHello(DEFAULT_SOCKET, { component: "plugin", ...packageOf(new URL("../package.json", import.meta.url)) });
  },
  ...hooks,
});

export default plugin;
runWorker(plugin, import.meta.url);
