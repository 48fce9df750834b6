// A Paperclip stand-in for one execute, in a process of its own (the test
// kills it mid-run): reads {spool, runId} on stdin, prints the run's log.
import { createServerAdapter } from "../dist/index.js";
import { fakeContext } from "./helpers.mjs";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { spool, runId } = JSON.parse(input);
const { ctx } = fakeContext({ spool, runId });
ctx.onLog = async (_stream, chunk) => {
  process.stdout.write(chunk);
};
await createServerAdapter().execute(ctx);
