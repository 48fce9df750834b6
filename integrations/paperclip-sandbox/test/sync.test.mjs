// The native workspace sync hooks against a stand-in daemon on a Unix
// socket: syncIn sends each mapping's bytes raw after one JSON line, then
// runs the post-upload commands verbatim, in order, fail-fast; syncOut
// lands the daemon's bytes on the host with the mapping's mode and leaves
// nothing behind when it fails; a cwd outside the operation's targets is
// refused before any request. (test/realnode's TestWorkspaceSyncOnRealNode
// runs the same hooks against the real daemon and a real pod.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import http from "node:http";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createHooks } from "../src/hooks.js";
import manifest from "../src/manifest.js";

function tmpDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), "pcsync-sync-"));
}

// daemon serves handler(route, body, res) on a fresh socket and records
// each request's route and raw body.
async function daemon(t, handler) {
  const socket = path.join(tmpDir(), "s.sock");
  const seen = [];
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      seen.push({ route: req.url, body });
      handler(req.url, body, res);
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

function executeAnswer(res, result) {
  res.writeHead(200, { "content-type": "application/x-ndjson" });
  res.end(JSON.stringify({ result }) + "\n");
}

// head splits a put's body into its JSON line and its bytes.
function head(body) {
  const i = body.indexOf(10);
  return [JSON.parse(body.subarray(0, i).toString()), body.subarray(i + 1)];
}

const lease = { providerLeaseId: "pcsync-sbx-1", metadata: {} };

test("the manifest declares native sync, concurrent operations, and the worker has both hooks", () => {
  const caps = manifest.environmentDrivers[0].sandboxCapabilities;
  assert.equal(caps.nativeSyncIn, true);
  assert.equal(caps.nativeSyncOut, true);
  assert.equal(caps.concurrentSyncOperations, true, "operations may run at once: Paperclip runs them one at a time otherwise");
  const hooks = createHooks(() => undefined);
  assert.equal(typeof hooks.onEnvironmentSyncIn, "function");
  assert.equal(typeof hooks.onEnvironmentSyncOut, "function");
});

test("syncIn sends a file raw and a tree as a tar without its excludes, then runs the post-upload commands in order", async (t) => {
  const src = tmpDir();
  fs.writeFileSync(path.join(src, "keep.txt"), "kept\n");
  fs.writeFileSync(path.join(src, "drop.log"), "dropped\n");
  fs.symlinkSync("keep.txt", path.join(src, "alias"));
  const file = path.join(tmpDir(), "f.bin");
  const bytes = Buffer.from([0, 1, 2, 255, 10, 13]);
  fs.writeFileSync(file, bytes);
  const d = await daemon(t, (route, body, res) => {
    if (route === "/v1/sync/put") return json(res, 200, { bytes: head(body)[1].length });
    executeAnswer(res, { exitCode: 0, signal: null, timedOut: false, stdout: "", stderr: "" });
  });
  const hooks = createHooks(() => undefined);
  const config = { company: "acme", socketPath: d.socket, timeoutMs: 1234 };
  const got = await hooks.onEnvironmentSyncIn({ driverKey: "pcsync", companyId: "c", environmentId: "e", config, lease, operations: [{
    operationId: "op-1",
    files: [
      { sourcePath: file, targetPath: "/workspace/x/f.bin", kind: "file", mode: 0o600 },
      { sourcePath: src, targetPath: "/workspace/tree", kind: "directory", exclude: ["*.log"] },
    ],
    postUploadCommands: [{ command: "echo 'one' && true", cwd: "/workspace/tree" }, { command: "two", timeoutMs: 5 }],
  }] });
  assert.equal(d.seen.length, 4);
  const [h1, b1] = head(d.seen[0].body);
  assert.deepEqual(h1, { lease, targetPath: "/workspace/x/f.bin", kind: "file", mode: 0o600, timeoutMs: 1234 });
  assert.deepEqual(b1, bytes, "the file's bytes, raw");
  const [h2, b2] = head(d.seen[1].body);
  assert.deepEqual(h2, { lease, targetPath: "/workspace/tree", kind: "directory", mode: null, timeoutMs: 1234 });
  const listing = execFileSync("tar", ["-tv", "-f", "-"], { input: b2 }).toString();
  assert.match(listing, /keep\.txt/);
  assert.match(listing, /alias -> keep\.txt/, "a symlink stays a link");
  assert.doesNotMatch(listing, /drop\.log/);
  assert.doesNotMatch(listing, / \.\/?$/m, "no . entry");
  const cmds = d.seen.slice(2).map((s) => JSON.parse(s.body.toString()));
  assert.deepEqual(cmds.map((c) => [c.command, c.args, c.cwd, c.timeoutMs]), [
    ["sh", ["-c", "echo 'one' && true"], "/workspace/tree", 1234],
    ["sh", ["-c", "two"], "/", 5],
  ]);
  assert.equal(d.seen[2].route, "/v1/hooks/execute");
  assert.deepEqual(got, { operations: [{ operationId: "op-1", filesTransferred: 2, bytesTransferred: bytes.length + b2.length }] });
});


test("sync hooks of one lease run at once (Paperclip calls them concurrently): no put waits for another's answer", async (t) => {
  const file = path.join(tmpDir(), "f");
  fs.writeFileSync(file, "x");
  // The daemon answers no put until all four have arrived: a plugin that
  // sent them one after another would never finish.
  const held = [];
  const d = await daemon(t, (route, body, res) => {
    if (route !== "/v1/sync/put") return executeAnswer(res, { exitCode: 0, signal: null, timedOut: false, stdout: "", stderr: "" });
    held.push(() => json(res, 200, { bytes: 1 }));
    if (held.length === 4) held.forEach((answer) => answer());
  });
  const hooks = createHooks(() => undefined);
  const config = { company: "acme", socketPath: d.socket };
  const ids = ["op-1", "op-2", "op-3", "op-4"];
  const results = await Promise.all(ids.map((id) => hooks.onEnvironmentSyncIn({ config, lease, operations: [{
    operationId: id,
    files: [{ sourcePath: file, targetPath: `/workspace/${id}`, kind: "file" }],
    postUploadCommands: [{ command: `ls ${id}` }],
  }] })));
  assert.deepEqual(results.map((r) => r.operations[0].operationId), ids);
  const puts = d.seen.filter((x) => x.route === "/v1/sync/put").map((x) => head(x.body)[0].targetPath).sort();
  assert.deepEqual(puts, ids.map((id) => `/workspace/${id}`));
});

test("a failing post-upload command stops its operation and the rest, naming both", async (t) => {
  const file = path.join(tmpDir(), "f");
  fs.writeFileSync(file, "x");
  const d = await daemon(t, (route, body, res) => {
    if (route === "/v1/sync/put") return json(res, 200, { bytes: 1 });
    const exitCode = JSON.parse(body.toString()).args[1] === "fail" ? 7 : 0;
    executeAnswer(res, { exitCode, signal: null, timedOut: false, stdout: "", stderr: exitCode ? "it broke\n" : "" });
  });
  const hooks = createHooks(() => undefined);
  const config = { company: "acme", socketPath: d.socket };
  const ops = ["op-1", "op-2", "op-3"].map((id) => ({
    operationId: id,
    files: [{ sourcePath: file, targetPath: `/workspace/${id}`, kind: "file" }],
    postUploadCommands: id === "op-2" ? [{ command: "fail" }, { command: "after" }] : [{ command: "ok" }],
  }));
  await assert.rejects(hooks.onEnvironmentSyncIn({ config, lease, operations: ops }),
    (err) => err.message === "pcsync: syncIn op-2: post-upload command 1 (cwd /) exited 7: it broke");
  const routes = d.seen.map((x) => (x.route === "/v1/sync/put" ? head(x.body)[0].targetPath : JSON.parse(x.body.toString()).args[1]));
  assert.deepEqual(routes, ["/workspace/op-1", "ok", "/workspace/op-2", "fail"]);
});

test("a cwd outside the operation's targets is refused before any byte moves", async (t) => {
  const d = await daemon(t, (_r, _b, res) => json(res, 200, { bytes: 0 }));
  const hooks = createHooks(() => undefined);
  const config = { company: "acme", socketPath: d.socket };
  for (const cwd of ["/etc", "/workspace/tree/../..", "relative", "/workspace/treehouse"]) {
    await assert.rejects(hooks.onEnvironmentSyncIn({ config, lease, operations: [
      { operationId: "ok", files: [{ sourcePath: "/etc/hostname", targetPath: "/workspace/a", kind: "file" }] },
      { operationId: "bad", files: [{ sourcePath: "/etc/hostname", targetPath: "/workspace/tree", kind: "directory" }],
        postUploadCommands: [{ command: "true", cwd }] },
    ] }), (err) => err.message.startsWith(`pcsync: syncIn bad: post-upload command 1: cwd ${JSON.stringify(cwd)} is not confined`), cwd);
  }
  assert.equal(d.seen.length, 0);
});

test("syncOut lands a file with its mode and a tree whole, and a failure leaves nothing on the host", async (t) => {
  const tree = tmpDir();
  fs.mkdirSync(path.join(tree, "sub"));
  fs.writeFileSync(path.join(tree, "sub", "a.txt"), "a\n");
  fs.symlinkSync("sub/a.txt", path.join(tree, "alias"));
  const tarBytes = execFileSync("tar", ["-c", "-f", "-", "-C", tree, "sub", "alias"]);
  const d = await daemon(t, (_route, body, res) => {
    const req = JSON.parse(body.toString());
    if (req.sourcePath === "/workspace/missing") return json(res, 422, { error: { message: "cat: /workspace/missing: No such file or directory", code: "sync_failed" } });
    if (req.sourcePath === "/workspace/garbage") {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      return res.end("not a tar at all, but long enough to be read as one".repeat(40));
    }
    res.writeHead(200, { "content-type": "application/octet-stream" });
    res.end(req.kind === "directory" ? tarBytes : Buffer.from("secret\n"));
  });
  const hooks = createHooks(() => undefined);
  const config = { company: "acme", socketPath: d.socket };
  const host = tmpDir();
  fs.mkdirSync(path.join(host, "restore")); // Paperclip makes the target directory first
  fs.writeFileSync(path.join(host, "restore", "stale"), "old");
  const old = process.umask(0o022);
  t.after(() => process.umask(old));
  const got = await hooks.onEnvironmentSyncOut({ config, lease, operations: [{ operationId: "out-1", files: [
    { sourcePath: "/workspace/s", targetPath: path.join(host, "deep", "s.txt"), kind: "file", mode: 0o600 },
    { sourcePath: "/workspace", targetPath: path.join(host, "restore"), kind: "directory", exclude: ["x"], mode: 0o750 },
  ] }] });
  assert.deepEqual(got, { operations: [{ operationId: "out-1", filesTransferred: 2, bytesTransferred: 7 + tarBytes.length }] });
  assert.equal(fs.readFileSync(path.join(host, "deep", "s.txt"), "utf8"), "secret\n");
  assert.equal(fs.statSync(path.join(host, "deep", "s.txt")).mode & 0o7777, 0o600);
  assert.deepEqual(fs.readdirSync(path.join(host, "restore")).sort(), ["alias", "sub"], "the tree replaced the target whole");
  assert.equal(fs.readlinkSync(path.join(host, "restore", "alias")), "sub/a.txt");
  assert.equal(fs.statSync(path.join(host, "restore")).mode & 0o7777, 0o750);
  assert.deepEqual(JSON.parse(d.seen[1].body.toString()), { lease, sourcePath: "/workspace", kind: "directory", exclude: ["x"], followSymlinks: false, timeoutMs: 300000 });

  for (const [src, kind, want] of [
    ["/workspace/missing", "file", /^pcsync: syncOut out-2: \/workspace\/missing → .*: cat: \/workspace\/missing: No such file or directory$/],
    ["/workspace/garbage", "directory", /^pcsync: syncOut out-2: \/workspace\/garbage → .*: host tar -x exited 2/],
  ]) {
    const target = path.join(host, "fail", "t");
    await assert.rejects(hooks.onEnvironmentSyncOut({ config, lease, operations: [{ operationId: "out-2", files: [{ sourcePath: src, targetPath: target, kind, mode: 0o600 }] }] }),
      (err) => want.test(err.message), src);
    assert.deepEqual(fs.existsSync(path.join(host, "fail")) ? fs.readdirSync(path.join(host, "fail")) : [], [], `${src}: nothing left on the host`);
  }
});
