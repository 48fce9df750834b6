// selfApiUrl: the adapter books a lost run's spend at the address its own
// server listens on (a wildcard host as loopback), never at the public URL
// (deploy/paperclip's is a Service name the server's pod may not resolve).
import { test } from "node:test";
import assert from "node:assert/strict";
import { selfApiUrl } from "../dist/config.js";

const agent = { id: "a", companyId: "c", name: "Coder", adapterType: "pcsync", adapterConfig: {} };

test("selfApiUrl is the listen address, a wildcard as loopback", () => {
  const cases = [
    [{ PAPERCLIP_LISTEN_HOST: "0.0.0.0", PAPERCLIP_LISTEN_PORT: "3100", PAPERCLIP_API_URL: "http://paperclip-server.paperclip.svc:3100" }, "http://127.0.0.1:3100"],
    [{ PAPERCLIP_LISTEN_HOST: "127.0.0.1", PAPERCLIP_LISTEN_PORT: "41234" }, "http://127.0.0.1:41234"],
    [{ PAPERCLIP_LISTEN_HOST: "10.1.2.3", PAPERCLIP_LISTEN_PORT: "3100" }, "http://10.1.2.3:3100"],
    [{ PAPERCLIP_LISTEN_HOST: "::", PAPERCLIP_LISTEN_PORT: "3100" }, "http://127.0.0.1:3100"],
    [{ PAPERCLIP_LISTEN_HOST: "fd00::5", PAPERCLIP_LISTEN_PORT: "3100" }, "http://[fd00::5]:3100"],
  ];
  for (const [env, want] of cases) {
    assert.equal(selfApiUrl(agent, env), want, JSON.stringify(env));
  }
});

test("selfApiUrl falls back to the default API URL without a listen port", () => {
  const got = selfApiUrl(agent, {});
  assert.match(got, /^https?:\/\//);
  assert.doesNotMatch(got, /undefined/);
});
