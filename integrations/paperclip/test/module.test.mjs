// The module Paperclip's plugin loader gets: its shape, session codec,
// and that the config schema, the configuration doc and parseConfig agree.

import assert from "node:assert/strict";
import { test } from "node:test";
import { configTable } from "../dist/config-doc.js";
import { BILLING_TYPES, parseConfig } from "../dist/config.js";
import { createServerAdapter } from "../dist/index.js";

const adapter = createServerAdapter();

test("createServerAdapter returns the pcsync adapter with what Paperclip calls", async () => {
  assert.equal(adapter.type, "pcsync");
  assert.equal(typeof adapter.execute, "function");
  assert.equal(typeof adapter.testEnvironment, "function");
  assert.equal(adapter.supportsLocalAgentJwt, true, "without it Paperclip gives no run JWT (authToken)");
  assert.equal(adapter.sessionManagement.supportsSessionResume, true);
});

test("session codec keeps the session with its pcsync agent and company", () => {
  const c = adapter.sessionCodec;
  assert.deepEqual(c.deserialize({ sessionId: " s-1 ", agent: "coder", company: "acme", junk: 1 }), { sessionId: "s-1", agent: "coder", company: "acme" });
  assert.deepEqual(c.deserialize({ session_id: "s-2" }), { sessionId: "s-2" });
  assert.equal(c.deserialize({ agent: "coder" }), null);
  assert.equal(c.deserialize("s-1"), null);
  assert.deepEqual(c.serialize({ sessionId: "s-3", agent: "coder" }), { sessionId: "s-3", agent: "coder" });
  assert.equal(c.serialize(null), null);
  assert.equal(c.getDisplayId({ sessionId: "s-4" }), "s-4");
});

test("every config field is in the schema and the doc, and parseConfig knows it", async () => {
  const schema = await adapter.getConfigSchema();
  const keys = schema.fields.map((f) => f.key);
  const parsed = parseConfig({ spoolDir: "/spool" });
  for (const k of keys) {
    assert.ok(k in parsed, `${k} is not read by parseConfig`);
  }
  assert.deepEqual(
    Object.keys(parsed).sort(),
    [...keys].sort(),
    "parseConfig and the schema list the same fields",
  );
  assert.deepEqual(schema.fields.filter((f) => f.required).map((f) => f.key), ["spoolDir"]);
  assert.ok(adapter.agentConfigurationDoc.includes("\n\n" + configTable(schema) + "\n"), "agentConfigurationDoc holds configSchema's table");
});

test("the form offers every billingType parseConfig takes", async () => {
  const schema = await adapter.getConfigSchema();
  const values = schema.fields.find((f) => f.key === "billingType").options.map((o) => o.value);
  assert.deepEqual(values, [...BILLING_TYPES]);
  for (const v of values) assert.equal(parseConfig({ spoolDir: "/s", billingType: v }).billingType, v);
  assert.throws(() => parseConfig({ spoolDir: "/s", billingType: "free" }), /billingType: must be one of/);
});

test("parseConfig fills the defaults", () => {
  assert.deepEqual(parseConfig({ spoolDir: "/var/spool/pcsync/" }), {
    spoolDir: "/var/spool/pcsync",
    stateDir: "/var/spool/pcsync/.pcsync",
    agent: "",
    company: "",
    timeoutSec: 0,
    resultGraceSec: 120,
    cancelWaitSec: 60,
    apiUrl: "",
    promptTemplate: "",
    bootstrapPromptTemplate: "",
    billingType: "unknown",
    resumeLostSessions: true,
  });
  assert.equal(parseConfig({ spoolDir: "/s", timeoutSec: "900" }).timeoutSec, 900, "numbers typed into the form arrive as strings");
});
