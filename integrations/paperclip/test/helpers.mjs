// Test helpers: a fake pcsync daemon on a temporary spool, and a fake
// Paperclip execution context.

import { watch, promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";

export const COMPANY_ID = "3f0b6c1e-8d0a-4c55-9a51-2b7f1f0c9a10";
export const AGENT_ID = "a9d1a7c2-6a57-4f0e-93c4-1c2d3e4f5a6b";

/** tempSpool makes a spool directory with its state directory. */
export async function tempSpool() {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "pcsync-adapter-test-"));
  const spool = path.join(dir, "spool");
  await fs.mkdir(path.join(spool, ".pcsync"), { recursive: true });
  return { dir, spool, state: path.join(spool, ".pcsync"), cleanup: () => fs.rm(dir, { recursive: true, force: true }) };
}

/** writeStatus writes the daemon's status file as pcsync does (temp + rename). */
export async function writeStatus(state, { heartbeatAt = new Date(), interval = 10, companies, runs = {}, stoppedAt } = {}) {
  const st = {
    apiVersion: "pcsync.io/v1alpha1",
    kind: "DaemonStatus",
    version: "v0.test",
    pid: process.pid,
    executor: "local",
    startedAt: heartbeatAt.toISOString(),
    heartbeatAt: heartbeatAt.toISOString(),
    heartbeatIntervalSec: interval,
    updatedAt: heartbeatAt.toISOString(),
    ...(stoppedAt ? { stoppedAt: stoppedAt.toISOString() } : {}),
    companies: companies ?? [{ slug: "acme", id: COMPANY_ID, agents: [{ name: "coder", adapter: "claude_local" }] }],
    runs,
  };
  const tmp = path.join(state, ".status.json.tmp");
  await fs.writeFile(tmp, JSON.stringify(st));
  await fs.rename(tmp, path.join(state, "status.json"));
}

/** result is a full pcsync result with the given fields changed. */
export function result(fields = {}) {
  return {
    apiVersion: "pcsync.io/v1alpha1",
    kind: "RunResult",
    runId: "x",
    company: "acme",
    agent: "coder",
    adapter: "claude_local",
    status: "succeeded",
    exitCode: 0,
    signal: null,
    timedOut: false,
    errorCode: null,
    errorMessage: null,
    sessionId: null,
    usage: null,
    usageBasis: null,
    costUsd: null,
    summary: null,
    model: null,
    numTurns: null,
    startedAt: new Date().toISOString(),
    finishedAt: new Date().toISOString(),
    durationMs: 5,
    job: null,
    ...fields,
  };
}

/** writeResult writes <name>.result.json atomically. */
export async function writeResult(spool, name, r) {
  const tmp = path.join(spool, `.${name}.result.json.tmp`);
  await fs.writeFile(tmp, JSON.stringify(r));
  await fs.rename(tmp, path.join(spool, `${name}.result.json`));
}

/**
 * fakeDaemon answers requests in spool like pcsync: for each new request it
 * calls handle(req, io), where io has log(text) (appends to <name>.log),
 * result(r) (writes the result), cancelled() (a promise of <name>.cancel)
 * and name. It writes a fresh status file first.
 */
export async function fakeDaemon(spool, handle, statusOpts = {}) {
  const state = path.join(spool, ".pcsync");
  await writeStatus(state, statusOpts);
  const seen = new Set();
  const requests = new Map();
  const links = new Map();
  const cancelWaiters = new Map();
  const tasks = [];
  const onEntry = async (file) => {
    if (file.endsWith(".cancel")) {
      const name = file.slice(0, -".cancel".length);
      cancelWaiters.get(name)?.();
      return;
    }
    if (!file.endsWith(".json") || file.startsWith(".") || file.endsWith(".result.json") || seen.has(file)) return;
    seen.add(file);
    const name = file.slice(0, -".json".length);
    let req;
    try {
      req = JSON.parse(await fs.readFile(path.join(spool, file), "utf8"));
    } catch {
      seen.delete(file);
      return;
    }
    requests.set(name, req);
    links.set(name, (await fs.stat(path.join(spool, file))).nlink);
    let cancelled;
    const cancelledP = new Promise((r) => (cancelled = r));
    cancelWaiters.set(name, cancelled);
    const io = {
      name,
      log: (text) => fs.appendFile(path.join(spool, `${name}.log`), text),
      result: (r) => writeResult(spool, name, { runId: name, ...r }),
      cancelled: () => cancelledP,
    };
    tasks.push(handle(req, io));
  };
  const w = watch(spool, (_e, file) => {
    if (file) void onEntry(file);
  });
  for (const f of await fs.readdir(spool)) await onEntry(f);
  return {
    requests,
    /** links: each request's link count when the daemon read it. */
    links,
    async stop() {
      w.close();
      await Promise.allSettled(tasks);
    },
  };
}

/** fakeContext is an AdapterExecutionContext with recording callbacks. */
export function fakeContext({ spool, runId, config = {}, runtime = {}, context = {}, signal, authToken = "jwt.secret.value" } = {}) {
  const logs = [];
  const metas = [];
  const calls = { dispatch: 0, cancellationReady: 0 };
  const ctx = {
    runId,
    agent: { id: AGENT_ID, companyId: COMPANY_ID, name: "Coder", adapterType: "pcsync", adapterConfig: {} },
    runtime: { sessionId: null, sessionParams: null, sessionDisplayId: null, taskKey: null, ...runtime },
    config: { spoolDir: spool, ...config },
    context,
    signal,
    authToken,
    onLog: async (stream, chunk) => {
      logs.push({ stream, chunk });
    },
    onMeta: async (m) => {
      metas.push(m);
    },
    onCancellationReady: async () => {
      calls.cancellationReady++;
    },
    onDispatch: () => {
      calls.dispatch++;
    },
  };
  return { ctx, logs, metas, calls, text: () => logs.map((l) => l.chunk).join("") };
}

/** runId makes a fresh Paperclip-style run id (a UUID). */
export function runId() {
  return crypto.randomUUID();
}

/**
 * fakeApi stands in for the part of Paperclip's API that books costs: POST
 * /api/companies/:cid/cost-events (201 with the event, and a cost.reported
 * activity entry as Paperclip's route logs it) and GET
 * /api/companies/:cid/activity. Set answer to a status to make the next
 * POSTs fail with it; with store, a failing POST still stores the event
 * (an answer lost after the insert).
 */
export async function fakeApi() {
  const { createServer } = await import("node:http");
  const state = { events: [], activity: [], requests: [], answer: 0, store: false };
  const srv = createServer(async (req, res) => {
    let body = "";
    for await (const c of req) body += c;
    state.requests.push({ method: req.method, url: req.url, authorization: req.headers.authorization ?? null, body });
    const send = (status, v) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(v));
    };
    const u = new URL(req.url, "http://x");
    const m = u.pathname.match(/^\/api\/companies\/([^/]+)\/(cost-events|activity)$/);
    if (!m) return send(404, { error: "not found" });
    if (m[2] === "activity" && req.method === "GET") {
      const agentId = u.searchParams.get("agentId");
      return send(200, state.activity.filter((a) => !agentId || a.agentId === agentId).slice().reverse());
    }
    if (m[2] === "cost-events" && req.method === "POST") {
      const ev = JSON.parse(body);
      const stored = () => {
        const e = { id: crypto.randomUUID(), companyId: m[1], ...ev };
        state.events.push(e);
        state.activity.push({ id: crypto.randomUUID(), action: "cost.reported", entityType: "cost_event", entityId: e.id, agentId: ev.agentId, details: { costCents: ev.costCents, model: ev.model }, createdAt: new Date().toISOString() });
        return e;
      };
      if (state.answer) {
        if (state.store) stored();
        return send(state.answer, { error: `answer ${state.answer}` });
      }
      return send(201, stored());
    }
    return send(405, { error: "method" });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return Object.assign(state, {
    url: `http://127.0.0.1:${srv.address().port}`,
    close: () => new Promise((r) => srv.close(r)),
  });
}

/**
 * writeLost puts a run that finished while Paperclip was down into the
 * ledger and its result into the spool (not its request: a fakeDaemon
 * would answer it).
 */
export async function writeLost(spool, name, r, entry = {}) {
  await fs.mkdir(path.join(spool, ".paperclip-adapter"), { recursive: true });
  await fs.writeFile(
    path.join(spool, ".paperclip-adapter", `${name}.json`),
    JSON.stringify({ name, paperclipAgentId: AGENT_ID, agent: "coder", taskKey: null, writtenAt: new Date().toISOString(), ...entry }),
  );
  await writeResult(spool, name, r);
}
