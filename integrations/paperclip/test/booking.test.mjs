// Booking the spend of lost runs in Paperclip, once.

import assert from "node:assert/strict";
import { promises as fs } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { bookLost, costEventOf, recordFile } from "../dist/booking.js";
import { findLost } from "../dist/lost.js";
import { fakeApi, result, runId, tempSpool, writeLost, AGENT_ID, COMPANY_ID } from "./helpers.mjs";

const JWT = "header.payload.signature-of-the-run";
const finishedAt = "2026-11-20T10:11:12.000Z";
const spent = result({
  adapter: "claude_local",
  model: "claude-sonnet-4-6",
  usage: { inputTokens: 12, cachedInputTokens: 8567, cacheCreationInputTokens: 7812, outputTokens: 96 },
  costUsd: 0.0331,
  finishedAt,
});

async function setup(t, results = { [runId()]: spent }) {
  const sp = await tempSpool();
  t.after(sp.cleanup);
  const api = await fakeApi();
  t.after(api.close);
  for (const [name, r] of Object.entries(results)) await writeLost(sp.spool, name, r);
  const book = async (token = JWT) => {
    const { finished } = await findLost(sp.spool, AGENT_ID, "");
    return bookLost(
      { spoolDir: sp.spool, api: { baseUrl: api.url, token, timeoutMs: 2000 }, companyId: COMPANY_ID, agentId: AGENT_ID, runId: runId(), billingType: "api" },
      finished,
    );
  };
  return { sp, api, book, names: Object.keys(results) };
}

const record = async (spool, name) => JSON.parse(await fs.readFile(recordFile(spool, name), "utf8"));

test("a lost run's spend is booked as its own run, with the run's JWT, and only once", async (t) => {
  const { sp, api, book, names } = await setup(t);
  const [name] = names;
  const first = await book();
  assert.equal(first.length, 1);
  assert.equal(first[0].state, "booked");
  assert.equal(first[0].costCents, 3);
  assert.equal(api.events.length, 1);
  const { id, companyId, ...ev } = api.events[0];
  assert.equal(companyId, COMPANY_ID);
  assert.equal(first[0].costEventId, id);
  assert.deepEqual(ev, {
    agentId: AGENT_ID,
    heartbeatRunId: name,
    provider: "anthropic",
    model: "claude-sonnet-4-6",
    billingType: "metered_api",
    costStatus: "reported",
    inputTokens: 12,
    cachedInputTokens: 8567,
    outputTokens: 96,
    costCents: 3,
    occurredAt: finishedAt,
  });
  assert.equal(api.requests[0].authorization, `Bearer ${JWT}`);
  assert.ok(!api.requests[0].url.includes(JWT));
  assert.equal((await record(sp.spool, name)).state, "booked");

  // A retry of the booking run, or another wake: nothing is sent again.
  const second = await book();
  assert.deepEqual(
    second.map((b) => [b.state, b.costEventId]),
    [["already", id]],
  );
  assert.equal(api.events.length, 1);
  assert.equal(api.requests.length, 1);
});

test("a booking that died after the POST is settled by Paperclip's activity, not sent again", async (t) => {
  const { sp, api, book, names } = await setup(t);
  const [name] = names;
  // Paperclip stores the event but its answer never arrives.
  api.answer = 502;
  api.store = true;
  const first = await book();
  assert.equal(first[0].state, "failed");
  assert.match(first[0].error, /502/);
  assert.equal((await record(sp.spool, name)).state, "posting", "in doubt: the record stays");
  api.answer = 0;
  const second = await book();
  assert.equal(second[0].state, "already");
  assert.equal(second[0].costEventId, api.events[0].id);
  assert.equal(api.events.length, 1);
  assert.equal((await record(sp.spool, name)).costEventId, api.events[0].id);
});

test("a booking that never reached Paperclip is sent again", async (t) => {
  const { sp, api, book, names } = await setup(t);
  const [name] = names;
  api.answer = 503; // not stored
  assert.equal((await book())[0].state, "failed");
  api.answer = 0;
  const again = await book();
  assert.equal(again[0].state, "booked");
  assert.equal(api.events.length, 1);
  assert.equal((await record(sp.spool, name)).state, "booked");
});

test("a refused booking leaves no record, and the next try sends it", async (t) => {
  const { sp, api, book, names } = await setup(t);
  api.answer = 403;
  const refused = await book();
  assert.equal(refused[0].state, "failed");
  assert.match(refused[0].error, /403 Forbidden: answer 403/);
  await assert.rejects(fs.access(recordFile(sp.spool, names[0])));
  api.answer = 0;
  assert.equal((await book())[0].state, "booked");
  assert.equal(api.events.length, 1);
});

test("Paperclip unreachable: nothing is booked twice, and the JWT is in no error", async (t) => {
  const { sp, api, book, names } = await setup(t);
  await api.close();
  const down = await book();
  assert.equal(down[0].state, "failed");
  assert.match(down[0].error, /^POST http:\/\/127\.0\.0\.1:\d+\/api\/companies\/.*\/cost-events: fetch failed \(ECONNREFUSED\)$/);
  assert.equal((await record(sp.spool, names[0])).state, "posting");
  // Still down: the activity cannot be read, and nothing is sent blindly.
  const still = await book();
  assert.equal(still[0].state, "failed");
  assert.match(still[0].error, /did not hear back, and Paperclip's activity cannot tell whether it got there: GET .*activity/);
  for (const b of [...down, ...still]) assert.ok(!b.error.includes(JWT));
});

test("two lost runs of the same cost are told apart in the activity", async (t) => {
  const a = runId();
  const b = runId();
  const { api, book } = await setup(t, { [a]: spent, [b]: spent });
  api.answer = 502;
  api.store = true;
  await book();
  assert.equal(api.events.length, 2);
  api.answer = 0;
  const settled = await book();
  assert.deepEqual(settled.map((x) => x.state), ["already", "already"]);
  assert.notEqual(settled[0].costEventId, settled[1].costEventId);
  assert.equal(api.events.length, 2);
});

test("costEventOf figures the event as Paperclip books a result", () => {
  const entry = { name: "r", paperclipAgentId: AGENT_ID, agent: "coder", taskKey: null, writtenAt: finishedAt };
  const cases = [
    { name: "nothing used", r: result({ usage: null, costUsd: null }), bt: "api", want: null },
    { name: "zero usage", r: result({ usage: { inputTokens: 0, outputTokens: 0 }, costUsd: 0 }), bt: "api", want: null },
    { name: "subscription: tokens, no cents", r: spent, bt: "subscription", want: { billingType: "subscription_included", costCents: 0, costStatus: "reported" } },
    { name: "no cost: unpriced", r: result({ ...spent, costUsd: null }), bt: "unknown", want: { billingType: "unknown", costCents: 0, costStatus: "unpriced" } },
    { name: "rounded cents", r: result({ ...spent, costUsd: 1.235 }), bt: "credits", want: { billingType: "credits", costCents: 124, costStatus: "reported" } },
    { name: "provider from the model", r: result({ ...spent, adapter: "opencode_local", model: "openai/gpt-5" }), bt: "api", want: { provider: "openai", model: "openai/gpt-5" } },
    { name: "no model", r: result({ ...spent, adapter: "x", model: null }), bt: "api", want: { provider: "unknown", model: "unknown" } },
  ];
  for (const c of cases) {
    const ev = costEventOf({ entry, result: c.r }, AGENT_ID, c.bt);
    if (c.want === null) {
      assert.equal(ev, null, c.name);
      continue;
    }
    for (const [k, v] of Object.entries(c.want)) assert.equal(ev[k], v, `${c.name}: ${k}`);
  }
  const scoped = costEventOf({ entry: { ...entry, issueId: COMPANY_ID, projectId: "not-a-uuid" }, result: spent }, AGENT_ID, "api");
  assert.equal(scoped.issueId, COMPANY_ID);
  assert.equal(scoped.projectId, undefined);
});

test("the ledger's booked records do not pass for ledger entries", async (t) => {
  const { sp, book, names } = await setup(t);
  await book();
  const { finished } = await findLost(sp.spool, AGENT_ID, "");
  assert.deepEqual(finished.map((l) => l.entry.name), names);
  assert.ok((await fs.readdir(path.join(sp.spool, ".paperclip-adapter", "booked"))).includes(`${names[0]}.json`));
});
