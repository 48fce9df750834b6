// The plugin's hooks against a stand-in daemon on a Unix socket: each hook
// posts its params verbatim to /v1/hooks/<name> and returns the answer
// verbatim; execute streams its chunks to ctx.execution.log; a daemon that
// is missing or refuses fails fast with a clear message.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createHooks } from "../src/hooks.js";
import manifest, { DRIVER_KEY } from "../src/manifest.js";
import { DEFAULT_LEASE_TTL_SEC, DEFAULT_SOCKET, DEFAULT_TIMEOUT_MS, MAX_LEASE_TTL_SEC } from "../src/defaults.js";

function tmpSocket() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pcsbx-"));
  return path.join(dir, "s.sock");
}

// daemon serves handler(hook, params, res) on a fresh socket.
async function daemon(t, handler) {
  const socket = tmpSocket();
  const seen = [];
  const srv = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const hook = req.url.replace("/v1/hooks/", "");
      const params = JSON.parse(body);
      seen.push({ method: req.method, hook, params });
      handler(hook, params, res);
    });
  });
  await new Promise((r) => srv.listen(socket, r));
  t.after(() => srv.close());
  return { socket, seen };
}

function json(res, status, v) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(v));
}

function recorder() {
  const logs = [];
  return { logs, ctx: { execution: { log: (stream, chunk) => logs.push([stream, chunk]) } } };
}

test("every hook posts its params verbatim and returns the answer verbatim", async (t) => {
  const answers = {
    validateConfig: { ok: true, normalizedConfig: { company: "acme", timeoutMs: 300000 } },
    probe: { ok: true, summary: "ready", diagnostics: [] },
    acquireLease: { providerLeaseId: "pcsync-sbx-1", expiresAt: "2026-11-25T05:00:00Z", metadata: { remoteCwd: "/workspace" } },
    resumeLease: { providerLeaseId: "pcsync-sbx-1", metadata: { remoteCwd: "/workspace" } },
    releaseLease: { providerLeaseId: "pcsync-sbx-1", state: "destroyed" },
    destroyLease: { providerLeaseId: "pcsync-sbx-1", state: "destroyed" },
    realizeWorkspace: { cwd: "/workspace" },
  };
  const d = await daemon(t, (hook, _p, res) => json(res, 200, answers[hook]));
  const hooks = createHooks(() => undefined);
  const config = { provider: DRIVER_KEY, company: "acme", socketPath: d.socket };
  const calls = {
    validateConfig: ["onEnvironmentValidateConfig", { driverKey: "pcsync", config }],
    probe: ["onEnvironmentProbe", { driverKey: "pcsync", companyId: "c1", environmentId: "e1", config }],
    acquireLease: ["onEnvironmentAcquireLease", { driverKey: "pcsync", companyId: "c1", environmentId: "e1", config, runId: "r1", adapterType: "claude_local", requestedExpiresAt: null }],
    resumeLease: ["onEnvironmentResumeLease", { driverKey: "pcsync", companyId: "c1", environmentId: "e1", config, providerLeaseId: "pcsync-sbx-1" }],
    releaseLease: ["onEnvironmentReleaseLease", { driverKey: "pcsync", companyId: "c1", environmentId: "e1", config, providerLeaseId: "pcsync-sbx-1", cancelActiveWork: true }],
    destroyLease: ["onEnvironmentDestroyLease", { driverKey: "pcsync", companyId: "c1", environmentId: "e1", config, providerLeaseId: "pcsync-sbx-1" }],
    realizeWorkspace: ["onEnvironmentRealizeWorkspace", { driverKey: "pcsync", companyId: "c1", environmentId: "e1", config, lease: { providerLeaseId: "pcsync-sbx-1" }, workspace: {} }],
  };
  for (const [hook, [method, params]] of Object.entries(calls)) {
    const got = await hooks[method](params);
    assert.deepEqual(got, answers[hook], method);
    const last = d.seen.at(-1);
    assert.equal(last.method, "POST");
    assert.equal(last.hook, hook);
    assert.deepEqual(last.params, params, `${method} params`);
  }
});

test("execute streams chunks to ctx.execution.log in order and returns the result, its output the chunks joined", async (t) => {
  const d = await daemon(t, (_hook, params, res) => {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    res.write(JSON.stringify({ stdout: `${params.command}:1\n` }) + "\n");
    res.write(JSON.stringify({ stderr: "warn\n" }) + "\n");
    setTimeout(() => {
      res.write(JSON.stringify({ stdout: `${params.command}:2\n` }) + "\n");
      // The daemon's result is the exit: the output was in the chunks.
      res.end(JSON.stringify({ result: { exitCode: 0, signal: null, timedOut: false } }) + "\n");
    }, 20);
  });
  const { logs, ctx } = recorder();
  const hooks = createHooks(() => ctx);
  const config = { company: "acme", socketPath: d.socket };
  const [a, b] = await Promise.all([
    hooks.onEnvironmentExecute({ config, lease: { providerLeaseId: "l" }, command: "a", env: { SECRET: "x" }, stdin: "in" }),
    hooks.onEnvironmentExecute({ config, lease: { providerLeaseId: "l" }, command: "b" }),
  ]);
  assert.deepEqual(a, { exitCode: 0, signal: null, timedOut: false, stdout: "a:1\na:2\n", stderr: "warn\n" });
  assert.equal(b.stdout, "b:1\nb:2\n");
  for (const c of ["a", "b"]) {
    const mine = logs.filter(([, chunk]) => chunk.startsWith(c + ":"));
    assert.deepEqual(mine, [["stdout", `${c}:1\n`], ["stdout", `${c}:2\n`]]);
  }
  assert.equal(logs.filter(([s]) => s === "stderr").length, 2);
  assert.deepEqual(d.seen[0].params.env ?? d.seen[1].params.env, { SECRET: "x" });
});

test("a log line reaches ctx.execution.log on a stream the result has empty, and is not in the result", async (t) => {
  const notice = "[pcsync] lease l resumed: its workspace and HOME were kept on claim l while suspended for 1m0s (suspended after 30s idle)\n";
  const d = await daemon(t, (_hook, params, res) => {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    if (params.command === "resumed") res.write(JSON.stringify({ log: notice }) + "\n");
    res.write(JSON.stringify({ stdout: "out\n" }) + "\n");
    if (params.args?.[0] === "warn") res.write(JSON.stringify({ stderr: "warn\n" }) + "\n");
    res.end(JSON.stringify({ result: { exitCode: 0, signal: null, timedOut: false } }) + "\n");
  });
  const config = { socketPath: d.socket };
  for (const [command, args, want, wantLogs] of [
    ["resumed", [], { stdout: "out\n", stderr: "" }, [["stdout", "out\n"], ["stderr", notice]]],
    // The result's stderr is not empty: the notice goes on stderr still,
    // unless stdout is the empty one.
    ["resumed", ["warn"], { stdout: "out\n", stderr: "warn\n" }, [["stdout", "out\n"], ["stderr", "warn\n"], ["stderr", notice]]],
    ["plain", [], { stdout: "out\n", stderr: "" }, [["stdout", "out\n"]]],
  ]) {
    const { logs, ctx } = recorder();
    const got = await createHooks(() => ctx).onEnvironmentExecute({ config, lease: { providerLeaseId: "l" }, command, args });
    assert.deepEqual(got, { exitCode: 0, signal: null, timedOut: false, ...want }, `${command} ${args}`);
    assert.deepEqual(logs, wantLogs, `${command} ${args}`);
  }
});

test("a refusal throws the daemon's message and code", async (t) => {
  const d = await daemon(t, (_h, _p, res) => json(res, 422, { error: { message: "image \"x\" is not allowed", code: "image_not_allowed" } }));
  const hooks = createHooks(() => undefined);
  await assert.rejects(
    hooks.onEnvironmentAcquireLease({ config: { company: "acme", socketPath: d.socket } }),
    (err) => err.message === 'image "x" is not allowed' && err.code === "image_not_allowed",
  );
});

test("an execute whose answer ends in an error line throws it", async (t) => {
  const d = await daemon(t, (_h, _p, res) => {
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    res.end(JSON.stringify({ stdout: "partial" }) + "\n" + JSON.stringify({ error: { message: "lease l is Releasing", code: "execute_failed" } }) + "\n");
  });
  const { logs, ctx } = recorder();
  await assert.rejects(
    createHooks(() => ctx).onEnvironmentExecute({ config: { socketPath: d.socket }, lease: {}, command: "x" }),
    /lease l is Releasing/,
  );
  assert.deepEqual(logs, [["stdout", "partial"]]);
});

test("a line from the daemon that is not JSON rejects the hook, and the worker goes on", async (t) => {
  const answers = {
    // A chunk, then a line that is no JSON, then more: the hook rejects at
    // the bad line.
    "bad line": (res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(JSON.stringify({ stdout: "before" }) + "\n");
      res.end("<html>oops</html>\n" + JSON.stringify({ result: { exitCode: 0 } }) + "\n");
    },
    // A line that is JSON but no object.
    "no object": (res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end("42\n");
    },
    // A last line cut off before its end.
    "cut off": (res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end('{"result":{"exitCode":');
    },
  };
  let which;
  const d = await daemon(t, (hook, _p, res) =>
    hook === "execute" ? answers[which](res) : (res.writeHead(200, { "content-type": "application/json" }), res.end("not json")));
  const { logs, ctx } = recorder();
  const hooks = createHooks(() => ctx);
  const config = { socketPath: d.socket };
  for (which of Object.keys(answers)) {
    await assert.rejects(
      hooks.onEnvironmentExecute({ config, lease: { providerLeaseId: "l" }, command: "x" }),
      (err) => err.code === "daemon_bad_answer" && /pcsync daemon: execute: /.test(err.message),
      which,
    );
  }
  assert.deepEqual(logs, [["stdout", "before"]]);
  await assert.rejects(
    hooks.onEnvironmentAcquireLease({ config }),
    (err) => err.code === "daemon_bad_answer" && err.message.includes('"not json"'),
  );
  // The worker still serves hooks.
  const r = await hooks.onEnvironmentValidateConfig({ config });
  assert.equal(r.ok, false);
  assert.match(r.errors[0], /an answer that is not JSON/);
});

test("the manifest's defaults are the daemon's (src/defaults.js, generated from pkg/sandbox)", () => {
  const props = manifest.environmentDrivers[0].configSchema.properties;
  assert.equal(props.socketPath.default, DEFAULT_SOCKET);
  assert.equal(props.timeoutMs.default, DEFAULT_TIMEOUT_MS);
  assert.match(props.leaseTtlSec.description, new RegExp(`default ${DEFAULT_LEASE_TTL_SEC}, at most ${MAX_LEASE_TTL_SEC}\\)`));
});

test("a missing daemon fails within a second with what to do", async () => {
  const hooks = createHooks(() => undefined);
  const config = { company: "acme", socketPath: tmpSocket() };
  for (const [name, check] of [
    ["onEnvironmentValidateConfig", (r) => r.ok === false && /pcsync daemon not reachable at .* --sandbox/.test(r.errors[0])],
    ["onEnvironmentProbe", (r) => r.ok === false && r.diagnostics[0].code === "daemon_unreachable"],
  ]) {
    const begin = Date.now();
    const r = await hooks[name]({ config });
    assert.ok(check(r), `${name}: ${JSON.stringify(r)}`);
    assert.ok(Date.now() - begin < 1000, `${name} took ${Date.now() - begin} ms`);
  }
  const begin = Date.now();
  await assert.rejects(hooks.onEnvironmentAcquireLease({ config }), (err) => err.code === "daemon_unreachable");
  assert.ok(Date.now() - begin < 1000);
});

test("a socket where nothing accepts fails within a second", async (t) => {
  // A listening socket whose backlog nobody drains still connects; a stale
  // socket file with no listener refuses at once.
  const socket = tmpSocket();
  const srv = net.createServer();
  await new Promise((r) => srv.listen(socket, r));
  await new Promise((r) => srv.close(r));
  fs.writeFileSync(socket, ""); // a stale file, not a socket
  const begin = Date.now();
  const r = await createHooks(() => undefined).onEnvironmentProbe({ config: { socketPath: socket } });
  assert.equal(r.ok, false);
  assert.match(r.summary, /not reachable/);
  assert.ok(Date.now() - begin < 1000);
  t.after(() => fs.rmSync(path.dirname(socket), { recursive: true, force: true }));
});

test("a relative socketPath is refused before any connect", async () => {
  const r = await createHooks(() => undefined).onEnvironmentValidateConfig({ config: { socketPath: "sandbox.sock" } });
  assert.deepEqual(r, { ok: false, errors: ['config.socketPath: "sandbox.sock" is not an absolute path'] });
});

test("the manifest declares one sandbox provider, pcsync, that the host accepts", async () => {
  assert.equal(manifest.environmentDrivers.length, 1);
  const d = manifest.environmentDrivers[0];
  assert.equal(d.driverKey, "pcsync");
  assert.equal(d.kind, "sandbox_provider");
  assert.deepEqual(d.configSchema.required, ["company"]);
  assert.ok(manifest.capabilities.includes("environment.drivers.register"));
  let shared;
  try {
    shared = await import("@paperclipai/shared");
  } catch {
    shared = null;
  }
  const schema = shared?.pluginManifestV1Schema;
  assert.ok(schema, "@paperclipai/shared exports pluginManifestV1Schema (the host's manifest validator)");
  const r = schema.safeParse(manifest);
  assert.ok(r.success, JSON.stringify(r.error?.issues));
});

test("a cancelled run is told to the daemon that holds its lease", async (t) => {
  const d = await daemon(t, (hook, params, res) =>
    json(res, 200, hook === "acquireLease" ? { providerLeaseId: "l1", metadata: {} } : { released: 1 }));
  const hooks = createHooks(() => undefined);
  await hooks.onEnvironmentAcquireLease({ config: { company: "acme", socketPath: d.socket }, runId: "run-7" });
  await hooks.onRunCancelled({ eventType: "agent.run.cancelled", entityId: "run-7", companyId: "c1", payload: { runId: "run-7" } });
  const last = d.seen.at(-1);
  assert.equal(last.hook, "runCancelled");
  assert.deepEqual(last.params, { runId: "run-7", companyId: "c1" });
});

test("a started run of an agent whose lease the plugin acquired begins its lease at the same daemon, with that acquire's params", async (t) => {
  const d = await daemon(t, (hook, _p, res) =>
    json(res, 200, hook === "acquireLease" ? { providerLeaseId: "l1", metadata: {} } : { prestarted: true }));
  const hooks = createHooks(() => undefined);
  const config = { company: "acme", socketPath: d.socket, reuseLease: true };
  const started = (runId, agentId) =>
    hooks.onRunStarted({ eventType: "agent.run.started", entityId: runId, companyId: "c1", payload: { runId, agentId, status: "running" } });

  await started("run-0", "agent-1");
  assert.equal(d.seen.length, 0, "an agent with no acquire yet: no hook");

  await hooks.onEnvironmentAcquireLease({ driverKey: "pcsync", companyId: "c1", environmentId: "e1", config, runId: "run-1",
    agentId: "agent-1", adapterType: "claude_local", requestedExpiresAt: null, executionWorkspaceId: "w1" });
  await started("run-2", "agent-1");
  const last = d.seen.at(-1);
  assert.equal(last.hook, "runStarted");
  assert.deepEqual(last.params, { driverKey: "pcsync", companyId: "c1", environmentId: "e1", config, runId: "run-2",
    agentId: "agent-1", adapterType: "claude_local" });

  await started("run-3", "agent-2");
  assert.equal(d.seen.length, 2, "another agent, none of whose leases the plugin acquired: no hook");
});

test("an environment with prestart false begins no lease, and a daemon that cannot be reached fails no started run", async (t) => {
  const d = await daemon(t, (_hook, _p, res) => json(res, 200, { providerLeaseId: "l1", metadata: {} }));
  const warned = [];
  const hooks = createHooks(() => /** @type {any} */ ({ logger: { warn: (msg, meta) => warned.push([msg, meta]) } }));
  await hooks.onEnvironmentAcquireLease({ companyId: "c1", environmentId: "e1", config: { company: "acme", socketPath: d.socket, prestart: false },
    runId: "run-1", agentId: "agent-1" });
  await hooks.onRunStarted({ entityId: "run-2", payload: { runId: "run-2", agentId: "agent-1" } });
  assert.deepEqual(d.seen.map((s) => s.hook), ["acquireLease"]);

  const gone = await daemon(t, (_hook, _p, res) => json(res, 200, { providerLeaseId: "l2", metadata: {} }));
  await hooks.onEnvironmentAcquireLease({ companyId: "c1", environmentId: "e2", config: { company: "acme", socketPath: gone.socket },
    runId: "run-3", agentId: "agent-2" });
  fs.rmSync(gone.socket);
  await hooks.onRunStarted({ entityId: "run-4", payload: { runId: "run-4", agentId: "agent-2" } });
  assert.equal(warned.length, 1);
  assert.match(warned[0][0], /could not begin the started run's lease/);
  assert.equal(warned[0][1].runId, "run-4");
});
