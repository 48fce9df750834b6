// testEnvironment: each check, each failure explained.

import assert from "node:assert/strict";
import { promises as fs } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { createServerAdapter } from "../dist/index.js";
import { tempSpool, writeStatus, COMPANY_ID } from "./helpers.mjs";

const adapter = createServerAdapter();

async function run(config, { companyId = COMPANY_ID, status } = {}) {
  const sp = await tempSpool();
  try {
    if (status) await writeStatus(sp.state, status);
    const res = await adapter.testEnvironment({ companyId, adapterType: "pcsync", config: { spoolDir: sp.spool, ...config(sp) } });
    return { status: res.status, checks: res.checks.map((c) => `${c.level} ${c.code}: ${c.message}${c.hint ? ` | ${c.hint}` : ""}`) };
  } finally {
    await sp.cleanup();
  }
}

test("pass: spool writable, daemon alive, company by id, agent present", async () => {
  const r = await run(() => ({ agent: "coder" }), { status: {} });
  assert.equal(r.status, "pass", r.checks.join("\n"));
  assert.deepEqual(r.checks.map((c) => c.split(":")[0]), [
    "info pcsync_spool_writable",
    "info pcsync_daemon",
    "info pcsync_company",
    "info pcsync_agent",
  ]);
  assert.match(r.checks[1], /pcsync v0\.test serves the spool \(executor local/);
});

test("each failure says what is wrong and what to do", async () => {
  for (const [label, config, opts, want] of [
    ["no spoolDir", () => ({ spoolDir: "" }), {}, /error pcsync_config: adapterConfig\.spoolDir: is required/],
    ["missing spool", (sp) => ({ spoolDir: path.join(sp.dir, "nope") }), {}, /error pcsync_spool_writable: The spool .*nope is not a writable directory: ENOENT.*\| Mount the same directory/],
    ["no daemon", () => ({}), {}, /error pcsync_daemon: no pcsync daemon serves the spool .* start it with `pcsync daemon --spool/],
    ["stale daemon", () => ({}), { status: { heartbeatAt: new Date(Date.now() - 3_600_000) } }, /error pcsync_daemon: the pcsync daemon of the spool .* is not running: its last heartbeat/],
    ["unknown company id", () => ({}), { companyId: "other-id", status: {} }, /error pcsync_company: No company in pcsync's config has this Paperclip company's id other-id \(companies: acme \(id .*\)\)\. \| Set `id: other-id` in the spec/],
    ["unknown company slug", () => ({ company: "globex" }), { status: {} }, /error pcsync_company: pcsync has no company "globex"/],
    ["unknown agent", () => ({ agent: "writer" }), { status: {} }, /error pcsync_agent: pcsync company "acme" has no agent "writer" \(agents: coder \(claude_local\)\)/],
  ]) {
    const r = await run(config, opts);
    assert.equal(r.status, "fail", label);
    assert.match(r.checks.at(-1), want, label);
  }
});

test("warn: no agent set names the agents to choose from", async () => {
  const r = await run(() => ({}), { status: {} });
  assert.equal(r.status, "warn");
  assert.match(r.checks.at(-1), /warn pcsync_agent: No agent is set.*Agents of "acme": coder \(claude_local\)/);
});

test("the probe file does not stay in the spool", async () => {
  const sp = await tempSpool();
  try {
    await writeStatus(sp.state);
    await adapter.testEnvironment({ companyId: COMPANY_ID, adapterType: "pcsync", config: { spoolDir: sp.spool, agent: "coder" } });
    assert.deepEqual((await fs.readdir(sp.spool)).sort(), [".pcsync"]);
  } finally {
    await sp.cleanup();
  }
});
