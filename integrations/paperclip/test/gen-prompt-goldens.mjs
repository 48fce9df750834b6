// Records, as test/fixtures/prompts/<case>.txt, the prompt Paperclip's
// built-in claude_local adapter (CLI engine) gives its CLI for each case of
// prompt-cases.mjs. Run it after changing the pinned Paperclip version:
//
//   npm install --prefix /tmp/cl @paperclipai/adapter-claude-local@<version>
//   CLAUDE_LOCAL=/tmp/cl/node_modules/@paperclipai/adapter-claude-local node test/gen-prompt-goldens.mjs
//
// The adapter runs a script that reads its stdin as its CLI; the prompt is
// taken from the adapter's onMeta.
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { agent, cases, runId, sessionId } from "./prompt-cases.mjs";

const dir = process.env.CLAUDE_LOCAL;
if (!dir) throw new Error("set CLAUDE_LOCAL to the directory of @paperclipai/adapter-claude-local");
const { execute } = await import(pathToFileURL(path.join(dir, "dist/server/index.js")).href);
const here = path.dirname(fileURLToPath(import.meta.url));
const cwd = mkdtempSync(path.join(os.tmpdir(), "prompt-golden-"));
const cli = path.join(cwd, "cli.sh");
writeFileSync(cli, "#!/bin/sh\ncat >/dev/null\n");
chmodSync(cli, 0o755);
for (const c of cases) {
  let prompt = null;
  await execute({
    runId,
    agent,
    runtime: c.resumed
      ? { sessionId, sessionParams: { sessionId, cwd }, sessionDisplayId: null, taskKey: null }
      : { sessionId: null, sessionParams: null, sessionDisplayId: null, taskKey: null },
    context: structuredClone(c.context),
    config: { engine: "cli", command: cli, cwd },
    onLog: async () => {},
    onMeta: async (m) => {
      prompt = m.prompt;
    },
  });
  if (typeof prompt !== "string") throw new Error(`${c.name}: claude_local gave no prompt`);
  writeFileSync(path.join(here, "fixtures", "prompts", `${c.name}.txt`), prompt);
  console.log(`${c.name}: ${prompt.length} characters`);
}
