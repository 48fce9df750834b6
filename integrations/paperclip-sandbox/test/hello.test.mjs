// The plugin's hello: posted to /v1/hello on the daemon's socket with the
// package's own name and version, retried while the daemon is missing or
// refuses, repeated after it answered, and stopped on demand.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { packageOf, startHello } from "../src/hello.js";

const own = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8"));

function serve(t, socket, status) {
  const seen = [];
  const srv = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, body: JSON.parse(body) });
      res.writeHead(status()).end();
    });
  });
  t.after(() => srv.close());
  return new Promise((resolve) => srv.listen(socket, () => resolve(seen)));
}

async function until(cond) {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), "condition not reached in 5 s");
}

test("packageOf reads the plugin's own package.json", () => {
  assert.deepEqual(packageOf(new URL("../package.json", import.meta.url)), { name: own.name, version: own.version });
});

test("hello retries until the daemon is up and accepts, then repeats", async (t) => {
  const socket = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "pchello-")), "s.sock");
  const body = { component: "plugin", name: own.name, version: own.version };
  const stop = startHello(socket, body, { retryMs: 20, refreshMs: 60 });
  t.after(stop);
  await new Promise((r) => setTimeout(r, 100)); // no daemon yet: tries fail quietly
  let refuse = true;
  const seen = await serve(t, socket, () => (refuse ? 503 : 204));
  await until(() => seen.length >= 2);
  refuse = false;
  const accepted = seen.length;
  await until(() => seen.length >= accepted + 2);
  assert.deepEqual(seen[0], { method: "POST", url: "/v1/hello", body });
  stop();
  const after = seen.length;
  await new Promise((r) => setTimeout(r, 200));
  assert.ok(seen.length <= after + 1, `hellos after stop: ${seen.length - after}`);
});
