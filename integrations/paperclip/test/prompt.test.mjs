// The prompt equals, byte for byte, the one Paperclip's built-in claude_local
// adapter gives its CLI (recorded by gen-prompt-goldens.mjs).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { buildPrompt } from "../dist/prompt.js";
import { agent, cases, runId } from "./prompt-cases.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));

for (const c of cases) {
  test(`prompt ${c.name} equals claude_local's`, () => {
    const want = readFileSync(path.join(here, "fixtures", "prompts", `${c.name}.txt`), "utf8");
    const got = buildPrompt({ runId, agent, context: structuredClone(c.context), resumed: c.resumed, promptTemplate: "", bootstrapPromptTemplate: "" });
    assert.equal(got.text, want);
  });
}

test("templates of the agent's config are used the built-in way", () => {
  const got = buildPrompt({
    runId,
    agent,
    context: { wakeReason: "manual" },
    resumed: false,
    promptTemplate: "Agent {{agent.name}} in {{company.id}}, run {{run.id}}.",
    bootstrapPromptTemplate: "First run of {{agentId}}.",
  });
  assert.equal(got.text, `First run of ${agent.id}.\n\nAgent Coder in c1, run ${runId}.`);
  const resumed = buildPrompt({ runId, agent, context: { wakeReason: "manual" }, resumed: true, promptTemplate: "P", bootstrapPromptTemplate: "B" });
  assert.equal(resumed.text, "P", "no bootstrap prompt for a resumed session");
});
