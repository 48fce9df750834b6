// testEnvironment: can this configuration run agents through pcsync?

import { promises as fs } from "node:fs";
import path from "node:path";
import type {
  AdapterEnvironmentCheck,
  AdapterEnvironmentTestContext,
  AdapterEnvironmentTestResult,
} from "@paperclipai/adapter-utils";
import { ADAPTER_TYPE, ConfigError, parseConfig } from "./config.js";
import { readLiveness } from "./spool.js";

/** testEnvironment checks the config, the spool, the daemon, the company and the agent. */
export async function testEnvironment(ctx: AdapterEnvironmentTestContext): Promise<AdapterEnvironmentTestResult> {
  const checks: AdapterEnvironmentCheck[] = [];
  const done = (): AdapterEnvironmentTestResult => ({
    adapterType: ADAPTER_TYPE,
    status: checks.some((c) => c.level === "error") ? "fail" : checks.some((c) => c.level === "warn") ? "warn" : "pass",
    checks,
    testedAt: new Date().toISOString(),
  });

  let cfg;
  try {
    cfg = parseConfig(ctx.config);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    checks.push({
      code: "pcsync_config",
      level: "error",
      message: err.message,
      hint: "Set spoolDir to the absolute path of the pcsync daemon's spool as the Paperclip server sees it (docs/paperclip.md).",
    });
    return done();
  }

  // The spool: a directory the server can create files in.
  try {
    const st = await fs.stat(cfg.spoolDir);
    if (!st.isDirectory()) throw new Error("not a directory");
    const probe = path.join(cfg.spoolDir, `.paperclip-probe-${process.pid}-${Date.now()}.tmp`);
    await fs.writeFile(probe, "", { mode: 0o600, flag: "wx" });
    await fs.rm(probe, { force: true });
    checks.push({ code: "pcsync_spool_writable", level: "info", message: `The spool ${cfg.spoolDir} is writable.` });
  } catch (err) {
    checks.push({
      code: "pcsync_spool_writable",
      level: "error",
      message: `The spool ${cfg.spoolDir} is not a writable directory: ${(err as Error).message}.`,
      hint: "Mount the same directory in the Paperclip server and in pcsync (deploy/paperclip shares an emptyDir), and let the server's user write to it.",
    });
    return done();
  }

  // The daemon: a fresh heartbeat in its status file.
  const live = await readLiveness(cfg.stateDir, cfg.spoolDir);
  if (!live.alive) {
    checks.push({ code: "pcsync_daemon", level: "error", message: live.reason, hint: "Start pcsync daemon on this spool (docs/paperclip.md)." });
    return done();
  }
  const st = live.status;
  checks.push({
    code: "pcsync_daemon",
    level: "info",
    message: `pcsync ${st.version ?? "(version unknown)"} serves the spool (executor ${st.executor ?? "unknown"}, pid ${st.pid ?? "?"}, heartbeat ${Math.round(live.ageSec)} s ago).`,
  });

  // The company: by slug when configured, else by this Paperclip company's id.
  if (st.companies === null) {
    checks.push({
      code: "pcsync_company",
      level: "warn",
      message: "The daemon's status file does not list its companies; the company and agent cannot be checked.",
      hint: "Upgrade pcsync.",
    });
    return done();
  }
  const known = st.companies.map((c) => (c.id ? `${c.slug} (id ${c.id})` : `${c.slug} (no id)`)).join(", ") || "none";
  const company = cfg.company
    ? st.companies.find((c) => c.slug === cfg.company)
    : st.companies.find((c) => c.id === ctx.companyId);
  if (!company) {
    checks.push({
      code: "pcsync_company",
      level: "error",
      message: cfg.company
        ? `pcsync has no company "${cfg.company}" (companies: ${known}).`
        : `No company in pcsync's config has this Paperclip company's id ${ctx.companyId} (companies: ${known}).`,
      hint: cfg.company
        ? "Fix adapterConfig.company, or add the company to pcsync's config."
        : `Set \`id: ${ctx.companyId}\` in the spec of the pcsync Company that runs this company's agents.`,
    });
    return done();
  }
  checks.push({ code: "pcsync_company", level: "info", message: `pcsync company "${company.slug}" matches.` });

  // The agent.
  const agents = company.agents.map((a) => `${a.name} (${a.adapter})`).join(", ") || "none";
  if (!cfg.agent) {
    checks.push({
      code: "pcsync_agent",
      level: "warn",
      message: `No agent is set: each Paperclip agent runs as the pcsync agent named after it (lower-case, "-" for other characters). Agents of "${company.slug}": ${agents}.`,
      hint: "Set adapterConfig.agent to one of these names.",
    });
    return done();
  }
  const a = company.agents.find((x) => x.name === cfg.agent);
  if (!a) {
    checks.push({
      code: "pcsync_agent",
      level: "error",
      message: `pcsync company "${company.slug}" has no agent "${cfg.agent}" (agents: ${agents}).`,
      hint: "Fix adapterConfig.agent, or add the agent to the company in pcsync's config.",
    });
    return done();
  }
  checks.push({ code: "pcsync_agent", level: "info", message: `pcsync agent "${a.name}" runs ${a.adapter}.` });
  return done();
}
