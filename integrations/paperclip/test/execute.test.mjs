// execute against a fake pcsync daemon on a temporary spool.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { promises as fs } from "node:fs";
import path from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { buildPaperclipEnv } from "@paperclipai/adapter-utils/server-utils";
import { createServerAdapter } from "../dist/index.js";
import { fakeApi, fakeContext, fakeDaemon, result, runId, tempSpool, writeLost, writeStatus, AGENT_ID, COMPANY_ID } from "./helpers.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const adapter = createServerAdapter();
const transcript = await fs.readFile(path.join(here, "..", "..", "..", "testdata", "agent-samples", "claude-obers-small-success.jsonl"), "utf8");
// Paperclip's API, where lost runs' spend is booked: the adapter calls the
// server's own PAPERCLIP_API_URL.
const api = await fakeApi();
process.env.PAPERCLIP_API_URL = api.url;
after(api.close);

test("success: the request, the live log and the mapped result", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  const id = runId();
  const daemon = await fakeDaemon(sp.spool, async (_req, io) => {
    // The transcript in three pieces, one of them cut inside a UTF-8 character.
    const bytes = Buffer.from(transcript + "é done\n");
    const cut1 = Math.floor(bytes.length / 3);
    const cut2 = bytes.length - 3; // inside "é"
    await io.log(bytes.subarray(0, cut1));
    await io.log(bytes.subarray(cut1, cut2));
    await io.log(bytes.subarray(cut2));
    await io.result(
      result({
        sessionId: "a836554c-7c11-46da-acea-90cedebe45e7",
        usage: { inputTokens: 12, cachedInputTokens: 8567, cacheCreationInputTokens: 7812, outputTokens: 96 },
        usageBasis: "per_run",
        costUsd: 0.0331,
        summary: "verdict pass",
        model: "claude-sonnet-4-6",
        numTurns: 1,
      }),
    );
  });
  t.after(daemon.stop);
  const { ctx, text, metas, calls } = fakeContext({
    spool: sp.spool,
    runId: id,
    config: { timeoutSec: 600 },
    context: { taskId: "TASK-1", wakeReason: "issue_assigned", issueIds: ["a", "b"] },
  });
  const res = await adapter.execute(ctx);

  assert.deepEqual(
    {
      exitCode: res.exitCode,
      signal: res.signal,
      timedOut: res.timedOut,
      errorCode: res.errorCode,
      errorMessage: res.errorMessage,
      usage: res.usage,
      usageBasis: res.usageBasis,
      sessionId: res.sessionId,
      sessionParams: res.sessionParams,
      provider: res.provider,
      model: res.model,
      costUsd: res.costUsd,
      billingType: res.billingType,
      summary: res.summary,
    },
    {
      exitCode: 0,
      signal: null,
      timedOut: false,
      errorCode: null,
      errorMessage: null,
      usage: { inputTokens: 12, outputTokens: 96, cachedInputTokens: 8567 },
      usageBasis: "per_run",
      sessionId: "a836554c-7c11-46da-acea-90cedebe45e7",
      sessionParams: { sessionId: "a836554c-7c11-46da-acea-90cedebe45e7", agent: "coder", company: COMPANY_ID },
      provider: "anthropic",
      model: "claude-sonnet-4-6",
      costUsd: 0.0331,
      billingType: "unknown",
      summary: "verdict pass",
    },
  );
  assert.equal(res.resultJson.cacheCreationInputTokens ?? res.resultJson.usage.cacheCreationInputTokens, 7812);
  assert.equal(text(), transcript + "é done\n");
  assert.equal(calls.cancellationReady, 1);
  assert.equal(calls.dispatch, 1);
  assert.equal(metas.length, 1);
  assert.equal(metas[0].adapterType, "pcsync");
  assert.equal(JSON.stringify(metas).includes("jwt.secret.value"), false, "the JWT is not in the meta");

  const req = daemon.requests.get(id);
  assert.equal(req.apiVersion, "pcsync.io/v1alpha1");
  assert.equal(req.kind, "Run");
  assert.equal(req.companyId, COMPANY_ID);
  assert.equal(req.company, undefined);
  assert.equal(req.agent, "coder", "default agent: the Paperclip agent's name, lower-cased");
  assert.equal(req.timeoutSec, 600);
  assert.equal(req.sessionId, undefined);
  assert.match(req.prompt, new RegExp(`You are agent ${AGENT_ID} \\(Coder\\)`));
  assert.deepEqual(req.context, { taskId: "TASK-1", wakeReason: "issue_assigned", linkedIssueIds: "a,b" });
  assert.deepEqual(req.paperclip, { apiUrl: buildPaperclipEnv(ctx.agent).PAPERCLIP_API_URL, agentId: AGENT_ID, runId: id, apiKey: "jwt.secret.value" });
  const st = await fs.stat(path.join(sp.spool, `${id}.json`));
  assert.equal(st.mode & 0o777, 0o600);
  assert.equal(daemon.links.get(id), 1, "one link when read: pcsync refuses hard-linked requests");
  const left = (await fs.readdir(sp.spool)).filter((f) => f.endsWith(".tmp"));
  assert.deepEqual(left, [], "no temporary file left");
  assert.deepEqual(await fs.readdir(path.join(sp.spool, ".paperclip-adapter")), [], "the ledger entry is removed once reported");
});

test("rejected: a failed run whose message says what pcsync refused", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  const id = runId();
  const daemon = await fakeDaemon(sp.spool, async (_req, io) => {
    await io.result(
      result({
        status: "rejected",
        exitCode: null,
        errorCode: "invalid_request",
        errorMessage: `${id}.json: agent: agent "coder" is not in company "acme" (agents: reviewer)`,
        startedAt: null,
        finishedAt: null,
        durationMs: null,
      }),
    );
  });
  t.after(daemon.stop);
  const { ctx } = fakeContext({ spool: sp.spool, runId: id, config: { company: "acme" } });
  const res = await adapter.execute(ctx);
  assert.equal(daemon.requests.get(id).company, "acme");
  assert.equal(daemon.requests.get(id).companyId, undefined);
  assert.equal(res.exitCode, null);
  assert.equal(res.timedOut, false);
  assert.equal(res.errorCode, "invalid_request");
  assert.match(res.errorMessage, /^pcsync rejected the run request: .*agent "coder" is not in company "acme".*docs\/paperclip\.md/);
});

test("daemon down: no status file, or a stale heartbeat, fails before writing", async (t) => {
  for (const [label, setup, want] of [
    ["no status file", async () => {}, /no pcsync daemon serves the spool .*status file .* does not exist; start it with `pcsync daemon --spool /],
    [
      "stale heartbeat",
      (sp) => writeStatus(sp.state, { heartbeatAt: new Date(Date.now() - 60_000), interval: 10 }),
      /is not running: its last heartbeat \(.*\) is 60 s old \(limit 30 s\); start it with/,
    ],
    [
      "stopped daemon",
      (sp) => writeStatus(sp.state, { stoppedAt: new Date(Date.now() - 45_000), interval: 10 }),
      /is not running: it stopped at .*, 45 s ago, and no daemon has started since; start it with/,
    ],
  ]) {
    const sp = await tempSpool();
    t.after(sp.cleanup);
    await setup(sp);
    const id = runId();
    const { ctx, calls } = fakeContext({ spool: sp.spool, runId: id });
    const res = await adapter.execute(ctx);
    assert.equal(res.errorCode, "pcsync_daemon_down", label);
    assert.match(res.errorMessage, want, label);
    assert.match(res.errorMessage, /Nothing was sent to pcsync/, label);
    assert.equal(calls.dispatch, 0, label);
    assert.equal(await fs.stat(path.join(sp.spool, `${id}.json`)).catch(() => null), null, label);
  }
});

test("daemon dies while the run waits: failed, and the ledger keeps the run", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  const id = runId();
  // A heartbeat that expires about a second after the request is written.
  const daemon = await fakeDaemon(sp.spool, async (_req, io) => io.log("started\n"), {
    heartbeatAt: new Date(Date.now() - 2000),
    interval: 1,
  });
  t.after(daemon.stop);
  const { ctx, text } = fakeContext({ spool: sp.spool, runId: id });
  const res = await adapter.execute(ctx);
  assert.equal(res.errorCode, "pcsync_daemon_down");
  assert.match(res.errorMessage, /is not running: its last heartbeat .*the next run of this agent reports it/);
  assert.equal(text(), "started\n");
  assert.deepEqual(await fs.readdir(path.join(sp.spool, ".paperclip-adapter")), [`${id}.json`]);
});

test("cancel: the signal writes <name>.cancel and the cancelled result comes back", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  const id = runId();
  const ac = new AbortController();
  const daemon = await fakeDaemon(sp.spool, async (_req, io) => {
    await io.log("working\n");
    await io.cancelled();
    await io.result(result({ status: "cancelled", exitCode: null, signal: "SIGTERM", errorCode: "cancelled", errorMessage: "cancelled by request" }));
  });
  t.after(daemon.stop);
  const { ctx, logs } = fakeContext({ spool: sp.spool, runId: id, signal: ac.signal });
  ctx.onLog = async (_s, chunk) => {
    logs.push(chunk);
    if (chunk.includes("working")) ac.abort();
  };
  const res = await adapter.execute(ctx);
  assert.equal(res.errorCode, "cancelled");
  assert.equal(res.signal, "SIGTERM");
  assert.equal(res.errorMessage, "cancelled by request");
  assert.equal(res.resultJson.executionCancellation.state, "acknowledged", "Paperclip's cancel waits for this");
  assert.equal((await fs.readFile(path.join(sp.spool, `${id}.cancel`), "utf8")).length > 0, true);
});

test("Paperclip shutting down (controller lease lost) is not a cancel: the run goes on", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  const id = runId();
  const ac = new AbortController();
  const daemon = await fakeDaemon(sp.spool, async (_req, io) => {
    await io.log("working\n");
  });
  t.after(daemon.stop);
  const { ctx, logs } = fakeContext({ spool: sp.spool, runId: id, signal: ac.signal });
  ctx.onLog = async (_s, chunk) => {
    logs.push(chunk);
    if (chunk.includes("working")) ac.abort(new Error("Legacy controller lease lost"));
  };
  const res = await adapter.execute(ctx);
  assert.equal(res.errorCode, "pcsync_detached");
  assert.match(res.errorMessage, /Paperclip stopped following this run \(Legacy controller lease lost\).*The run goes on in pcsync/);
  assert.equal(await fs.stat(path.join(sp.spool, `${id}.cancel`)).catch(() => null), null, "no cancel file");
  assert.deepEqual(await fs.readdir(path.join(sp.spool, ".paperclip-adapter")), [`${id}.json`], "the next run will report it");
});

test("timeout: pcsync's timed_out result, and the adapter's own bound when no result comes", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  const id1 = runId();
  const id2 = runId();
  const daemon = await fakeDaemon(sp.spool, async (req, io) => {
    if (io.name === id1) {
      await io.result(result({ status: "timed_out", exitCode: null, signal: "SIGTERM", timedOut: true, errorCode: "timeout", errorMessage: `the run passed its timeout of ${req.timeoutSec}s` }));
    }
    // id2: a daemon that never answers, not even the cancel.
  });
  t.after(daemon.stop);

  const a = fakeContext({ spool: sp.spool, runId: id1, config: { timeoutSec: 5 } });
  const r1 = await adapter.execute(a.ctx);
  assert.deepEqual([r1.timedOut, r1.errorCode, r1.errorMessage], [true, "timeout", "the run passed its timeout of 5s"]);

  const b = fakeContext({ spool: sp.spool, runId: id2, config: { timeoutSec: 1, resultGraceSec: 0, cancelWaitSec: 1 } });
  const r2 = await adapter.execute(b.ctx);
  assert.equal(r2.timedOut, true);
  assert.equal(r2.errorCode, "timeout");
  assert.match(r2.errorMessage, /pcsync wrote no result within 1 s of the cancel/);
  assert.match(b.text(), /no result 0 s past the run's timeout of 1 s; cancelling it/);
  assert.ok(await fs.stat(path.join(sp.spool, `${id2}.cancel`)));
});

test("resume: Paperclip's session goes into the request; another agent's session does not", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  const daemon = await fakeDaemon(sp.spool, async (req, io) => io.result(result({ sessionId: req.sessionId ?? "new-session" })));
  t.after(daemon.stop);

  const id1 = runId();
  const a = fakeContext({ spool: sp.spool, runId: id1, runtime: { sessionId: "s-1", sessionParams: { sessionId: "s-1", agent: "coder" } } });
  const r1 = await adapter.execute(a.ctx);
  assert.equal(daemon.requests.get(id1).sessionId, "s-1");
  assert.equal(r1.sessionId, "s-1");

  const id2 = runId();
  const b = fakeContext({ spool: sp.spool, runId: id2, runtime: { sessionId: "s-2", sessionParams: { sessionId: "s-2", agent: "reviewer" } } });
  const r2 = await adapter.execute(b.ctx);
  assert.equal(daemon.requests.get(id2).sessionId, undefined);
  assert.equal(r2.sessionId, "new-session");
  assert.match(b.text(), /session s-2 belongs to pcsync agent "reviewer", not "coder"/);
});

test("Paperclip dies mid-run: the next run reports the lost run and resumes its session", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  const lostId = runId();
  let finishLost, lostWritten;
  const lostDone = new Promise((r) => (finishLost = r));
  const lostResult = new Promise((r) => (lostWritten = r));
  const daemon = await fakeDaemon(sp.spool, async (req, io) => {
    if (io.name === lostId) {
      await io.log("lost run output\n");
      await lostDone; // pcsync goes on after Paperclip died
      await io.result(result({ sessionId: "lost-session", usage: { inputTokens: 1, cachedInputTokens: 2, cacheCreationInputTokens: 0, outputTokens: 3 }, costUsd: 0.5 }));
      lostWritten();
      return;
    }
    await io.result(result({ sessionId: req.sessionId ?? "fresh" }));
  });
  t.after(daemon.stop);

  // The first execute runs in a child process that is then killed, as a
  // Paperclip server that dies (SIGKILL) in the middle of the run.
  const child = spawn(process.execPath, [path.join(here, "run-execute.mjs")], { stdio: ["pipe", "pipe", "inherit"] });
  child.stdin.end(JSON.stringify({ spool: sp.spool, runId: lostId }));
  await new Promise((resolve, reject) => {
    child.stdout.on("data", (d) => {
      if (String(d).includes("lost run output")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`the child execute exited (${code}) before the run's log reached it`)));
  });
  child.removeAllListeners("exit");
  const exited = new Promise((r) => child.on("exit", r));
  child.kill("SIGKILL");
  await exited;
  finishLost();
  await lostResult;

  const id = runId();
  const next = fakeContext({ spool: sp.spool, runId: id });
  const res = await adapter.execute(next.ctx);
  assert.equal(daemon.requests.get(id).sessionId, "lost-session");
  assert.equal(res.sessionId, "lost-session");
  assert.match(next.text(), new RegExp(`run ${lostId} of this agent finished in pcsync while Paperclip was not waiting for it .*status succeeded, tokens in 1 / cached 2 / out 3, cost \\$0.5, session lost-session`));
  assert.match(next.text(), /Paperclip gave no session: resuming session lost-session/);
  assert.equal(res.resultJson.resumedLostRun, lostId);
  assert.equal(res.resultJson.lostRuns.length, 1);
  // Its spend is booked in Paperclip as its own run's, with the new run's JWT.
  const booked = api.events.filter((e) => e.heartbeatRunId === lostId);
  assert.equal(booked.length, 1);
  assert.equal(booked[0].costCents, 50);
  assert.equal(booked[0].agentId, AGENT_ID);
  assert.equal(api.requests.find((r) => r.body.includes(lostId)).authorization, "Bearer jwt.secret.value");
  assert.equal(res.resultJson.lostRuns[0].booking.state, "booked");
  assert.match(next.text(), new RegExp(`booked the spend of run ${lostId} in Paperclip \\(50 cents, cost event ${booked[0].id}\\)`));
  assert.deepEqual(await fs.readdir(path.join(sp.spool, ".paperclip-adapter")), ["booked"], "both runs are reported now");
  assert.deepEqual(await fs.readdir(path.join(sp.spool, ".paperclip-adapter", "booked")), []);

  // A wake that asks for a fresh session does not resume it (and nothing is left to resume).
  const id3 = runId();
  const third = fakeContext({ spool: sp.spool, runId: id3, context: { forceFreshSession: true } });
  await adapter.execute(third.ctx);
  assert.equal(daemon.requests.get(id3).sessionId, undefined);
});

test("a lost run's session is resumed only for the same Paperclip task", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  const daemon = await fakeDaemon(sp.spool, async (req, io) => io.result(result({ sessionId: req.sessionId ?? "fresh" })));
  t.after(daemon.stop);
  // A run of task A that finished while Paperclip was down.
  const lostId = runId();
  await fs.mkdir(path.join(sp.spool, ".paperclip-adapter"));
  await fs.writeFile(
    path.join(sp.spool, ".paperclip-adapter", `${lostId}.json`),
    JSON.stringify({ name: lostId, paperclipAgentId: AGENT_ID, agent: "coder", taskKey: "task-a", writtenAt: new Date().toISOString() }),
  );
  await fs.writeFile(path.join(sp.spool, `${lostId}.json`), "{}");
  await fs.writeFile(path.join(sp.spool, `${lostId}.result.json`), JSON.stringify(result({ sessionId: "session-a" })));

  const other = runId();
  const b = fakeContext({ spool: sp.spool, runId: other, runtime: { taskKey: "task-b" } });
  await adapter.execute(b.ctx);
  assert.equal(daemon.requests.get(other).sessionId, undefined, "task B does not get task A's session");
  assert.match(b.text(), new RegExp(`run ${lostId} of this agent finished in pcsync while Paperclip was not waiting`));
});

test("a lost run whose spend Paperclip refuses stays in the ledger, and the next run books it once", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  const daemon = await fakeDaemon(sp.spool, async (_req, io) => io.result(result({})));
  t.after(daemon.stop);
  const lostId = runId();
  await writeLost(sp.spool, lostId, result({ adapter: "claude_local", model: "m", usage: { inputTokens: 5, outputTokens: 7 }, costUsd: 0.2 }));
  api.answer = 422;
  t.after(() => (api.answer = 0));
  const a = fakeContext({ spool: sp.spool, runId: runId() });
  const ra = await adapter.execute(a.ctx);
  assert.equal(ra.resultJson.lostRuns[0].booking.state, "failed");
  assert.match(a.text(), new RegExp(`cannot book the spend of run ${lostId} in Paperclip \\(20 cents\\): POST .*: 422 Unprocessable Entity: answer 422; the agent's next run tries again`));
  assert.ok(!a.text().includes("jwt.secret.value"));
  api.answer = 0;
  const b = fakeContext({ spool: sp.spool, runId: runId() });
  await adapter.execute(b.ctx);
  assert.match(b.text(), new RegExp(`run ${lostId} of this agent finished in pcsync while Paperclip was not waiting`), "reported again");
  assert.match(b.text(), new RegExp(`booked the spend of run ${lostId}`));
  const c = fakeContext({ spool: sp.spool, runId: runId() });
  await adapter.execute(c.ctx);
  assert.doesNotMatch(c.text(), new RegExp(lostId), "a third run has nothing left to report");
  assert.equal(api.events.filter((e) => e.heartbeatRunId === lostId).length, 1);
});

test("a run that books a lost run's spend and is lost itself does not make the next run book it again", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  let release;
  const held = new Promise((r) => (release = r));
  const daemon = await fakeDaemon(sp.spool, async (_req, io) => {
    await held;
    await io.result(result({}));
  });
  t.after(daemon.stop);
  t.after(() => release());
  const lostId = runId();
  await writeLost(sp.spool, lostId, result({ adapter: "claude_local", model: "m2", usage: { inputTokens: 1, outputTokens: 1 }, costUsd: 0.07 }));
  // The run that books it is killed (Paperclip dies again) before its result.
  const second = runId();
  const child = spawn(process.execPath, [path.join(here, "run-execute.mjs")], { stdio: ["pipe", "pipe", "inherit"] });
  child.stdin.end(JSON.stringify({ spool: sp.spool, runId: second }));
  await new Promise((resolve, reject) => {
    child.stdout.on("data", (d) => {
      if (String(d).includes(`booked the spend of run ${lostId}`)) resolve();
    });
    child.on("exit", (code) => reject(new Error(`the child execute exited (${code}) before booking`)));
  });
  child.removeAllListeners("exit");
  const exited = new Promise((r) => child.on("exit", r));
  child.kill("SIGKILL");
  await exited;
  release();
  const third = fakeContext({ spool: sp.spool, runId: runId() });
  const res = await adapter.execute(third.ctx);
  assert.match(third.text(), new RegExp(`the spend of run ${lostId} is already booked in Paperclip \\(7 cents`));
  assert.equal(res.resultJson.lostRuns.find((l) => l.name === lostId).booking.state, "already");
  assert.equal(api.events.filter((e) => e.heartbeatRunId === lostId).length, 1);
});

test("the same Paperclip run again follows its request instead of writing another", async (t) => {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  await writeStatus(sp.state);
  const id = runId();
  await fs.writeFile(path.join(sp.spool, `${id}.json`), JSON.stringify({ apiVersion: "pcsync.io/v1alpha1", kind: "Run", companyId: COMPANY_ID, agent: "coder", prompt: "earlier" }));
  await fs.writeFile(path.join(sp.spool, `${id}.log`), "earlier output\n");
  await fs.writeFile(path.join(sp.spool, `${id}.result.json`), JSON.stringify(result({ summary: "earlier" })));
  const { ctx, text } = fakeContext({ spool: sp.spool, runId: id });
  const res = await adapter.execute(ctx);
  assert.equal(res.summary, "earlier");
  assert.equal(JSON.parse(await fs.readFile(path.join(sp.spool, `${id}.json`), "utf8")).prompt, "earlier");
  assert.match(text(), /is already in the spool; following it\n.*earlier output\n/s);
});

test("config errors come back as failed runs that name the field", async () => {
  for (const [config, want] of [
    [{ spoolDir: "" }, /adapterConfig\.spoolDir: is required/],
    [{ spoolDir: "spool" }, /adapterConfig\.spoolDir: must be an absolute path/],
    [{ spoolDir: "/x", agent: "Bad_Name" }, /adapterConfig\.agent: "Bad_Name" is not a pcsync agent name/],
    [{ spoolDir: "/x", timeoutSec: -1 }, /adapterConfig\.timeoutSec: must be a whole number/],
    [{ spoolDir: "/x", billingType: "free" }, /adapterConfig\.billingType: must be one of/],
  ]) {
    const { ctx } = fakeContext({ spool: "/unused", runId: runId() });
    ctx.config = config;
    const res = await adapter.execute(ctx);
    assert.equal(res.errorCode, "pcsync_config");
    assert.match(res.errorMessage, want);
  }
});
