package images

// ACPInitializeRequest is the Agent Client Protocol's first request, one
// JSON-RPC line (without its newline) that a client writes on an ACP agent
// server's stdin: the server answers it with a result line, with no key and
// no network.
const ACPInitializeRequest = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// nodePath is where every image holds Node.js (BaseSpec.NodeVersion).
const nodePath = "/usr/local/bin/node"

// acpProbeScript is the Node.js program of ACPProbe. It runs the server
// argv[1] (by name, on PATH), writes argv[2] and a newline on its stdin and
// keeps stdin open, as an ACP client does, until a line answers id 1 (a
// server may quit at EOF before it answers: codex-acp does); it prints that
// line, closes stdin, and exits 0 once the server has exited. It exits
// non-zero, printing what the server printed, when the server cannot be
// run, exits first, or does not answer within a minute.
const acpProbeScript = `const [bin, req] = process.argv.slice(1);
const child = require("node:child_process").spawn(bin, [], { stdio: ["pipe", "pipe", "inherit"] });
let out = "", answered = false;
const fail = (why) => { process.stdout.write(out); console.error(bin + ": " + why); process.exit(1); };
child.on("error", (e) => fail(e.message));
child.on("exit", (code, sig) => answered ? process.exit(0) : fail("exited (" + (code ?? sig) + ") before it answered"));
child.stdout.on("data", (d) => {
  if (answered) return;
  out += d;
  for (const line of out.split("\n").slice(0, -1)) {
    let msg;
    try { msg = JSON.parse(line); } catch { continue; }
    if (msg.id !== 1) continue;
    answered = true;
    process.stdout.write(line + "\n");
    child.stdin.end();
    return;
  }
});
child.stdin.write(req + "\n");
setTimeout(() => { child.kill("SIGKILL"); fail("no answer in 60 s"); }, 60000);
`

// ACPProbe returns the argv that runs the image's ACP server (Spec.ACP) by
// its bare name, as Paperclip's ACP engine does, sends it
// ACPInitializeRequest, and prints its answer, one JSON-RPC line, on
// stdout (see acpProbeScript); nil when the image has no ACP server. It
// runs on the image's own Node, by its absolute path (the Go builder looks
// a command up before it enters the image's chroot); both the Go builder's
// verification and the real-node tests run it.
func (s Spec) ACPProbe() []string {
	if s.ACP.Name == "" {
		return nil
	}
	return []string{nodePath, "-e", acpProbeScript, s.ACP.Binary, ACPInitializeRequest}
}
