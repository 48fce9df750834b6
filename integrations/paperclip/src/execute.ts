// execute: one Paperclip heartbeat run as one pcsync run through the spool.

import type { AdapterExecutionContext, AdapterExecutionResult } from "@paperclipai/adapter-utils";
import { agentNameFrom, ConfigError, defaultApiUrl, isDNSLabel, parseConfig, selfApiUrl, type AdapterConfig } from "./config.js";
import { bookLost, describeBooking, type Booking } from "./booking.js";
import { RunFollower } from "./follow.js";
import { describeLost, findLost, forget, remember, type LostRun } from "./lost.js";
import { buildPrompt, requestContext } from "./prompt.js";
import { toExecutionResult, type PcsyncResult } from "./result.js";
import { exists, readLiveness, spoolPaths, writeAtomic } from "./spool.js";

/** Error codes of failures the adapter finds itself (pcsync's codes pass through). */
export const ErrorCodes = {
  config: "pcsync_config",
  daemonDown: "pcsync_daemon_down",
  spool: "pcsync_spool_error",
  detached: "pcsync_detached",
} as const;

/**
 * LEASE_LOST matches the abort reason Paperclip gives when its server loses
 * control of a run (a shutdown stops its database first, and the run's
 * controller lease can no longer be renewed): the run must not be cancelled.
 */
const LEASE_LOST = /controller lease lost/i;

/** BOOKING_TIMEOUT_MS bounds each call to Paperclip's API that books a lost run's cost. */
const BOOKING_TIMEOUT_MS = 10_000;

function abortReason(signal: AbortSignal | undefined): string {
  const r: unknown = signal?.reason;
  if (r instanceof Error) return r.message;
  return typeof r === "string" ? r : "";
}

function failed(errorCode: string, errorMessage: string, extra: Partial<AdapterExecutionResult> = {}): AdapterExecutionResult {
  return { exitCode: null, signal: null, timedOut: false, errorCode, errorMessage, ...extra };
}

function asRecord(v: unknown): Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

function str(v: unknown): string {
  return typeof v === "string" ? v.trim() : "";
}

/** ledgerScope is the issue and project of a run's context, where Paperclip books its cost. */
function ledgerScope(context: Record<string, unknown>): { issueId?: string; projectId?: string } {
  const out: { issueId?: string; projectId?: string } = {};
  if (str(context.issueId)) out.issueId = str(context.issueId);
  if (str(context.projectId)) out.projectId = str(context.projectId);
  return out;
}

/** execute runs ctx through pcsync and returns its result for Paperclip. */
export async function execute(ctx: AdapterExecutionContext): Promise<AdapterExecutionResult> {
  const log = (line: string) => ctx.onLog("stdout", line);
  let cfg: AdapterConfig;
  try {
    cfg = parseConfig(ctx.config);
  } catch (err) {
    if (err instanceof ConfigError) return failed(ErrorCodes.config, `${err.message} (edit the agent's adapter configuration)`);
    throw err;
  }
  const agent = cfg.agent || agentNameFrom(ctx.agent.name ?? "");
  if (!isDNSLabel(agent) || agent === "") {
    return failed(
      ErrorCodes.config,
      `adapterConfig.agent: the Paperclip agent's name ${JSON.stringify(ctx.agent.name)} gives no pcsync agent name; set adapterConfig.agent to the name of the agent in pcsync's config`,
    );
  }
  const name = ctx.runId.toLowerCase();
  if (!isDNSLabel(name)) {
    return failed(ErrorCodes.spool, `the Paperclip run id ${JSON.stringify(ctx.runId)} is not a valid pcsync request name (a DNS label)`);
  }
  const companyRef = cfg.company ? { company: cfg.company } : { companyId: ctx.agent.companyId };
  const paths = spoolPaths(cfg.spoolDir, name);
  const files = { request: paths.request, log: paths.log, result: paths.result };
  const session = { agent, company: cfg.company || ctx.agent.companyId };

  // The same Paperclip run again (its request is in the spool): follow it
  // instead of writing a second one.
  const attached = await exists(paths.request);
  if (!attached) {
    const live = await readLiveness(cfg.stateDir, cfg.spoolDir);
    if (!live.alive) {
      return failed(ErrorCodes.daemonDown, `${live.reason}. Nothing was sent to pcsync; wake the agent again once the daemon runs.`);
    }
  }

  // Runs of this agent that finished while Paperclip was not listening.
  let lost: LostRun[] = [];
  try {
    const found = await findLost(cfg.spoolDir, ctx.agent.id, name);
    lost = found.finished;
    for (const l of lost) await log(describeLost(l, cfg.spoolDir));
    for (const n of found.unfinished) {
      await log(`[pcsync] an earlier run ${n} of this agent is still queued or running in pcsync; its result will be reported by a later run\n`);
    }
  } catch (err) {
    await log(`[pcsync] cannot read the adapter's ledger of earlier runs: ${(err as Error).message}\n`);
  }
  // Their spend, which Paperclip did not book (booking.ts).
  let bookings: Booking[] = [];
  if (lost.length > 0) {
    bookings = await bookLost(
      {
        spoolDir: cfg.spoolDir,
        // The server's own address (the adapter runs inside it), not
        // adapterConfig.apiUrl, which is the one agent pods reach, nor the
        // public URL, which the server may not resolve.
        api: { baseUrl: selfApiUrl(ctx.agent), token: ctx.authToken, timeoutMs: BOOKING_TIMEOUT_MS },
        companyId: ctx.agent.companyId,
        agentId: ctx.agent.id,
        runId: ctx.runId,
        billingType: cfg.billingType,
      },
      lost,
    );
    for (const b of bookings) {
      const line = describeBooking(b);
      if (line) await log(line);
    }
  }

  // The session to resume.
  const params = asRecord(ctx.runtime.sessionParams);
  let sessionId = str(params.sessionId) || str(ctx.runtime.sessionId);
  const sessionAgent = str(params.agent);
  if (sessionId && sessionAgent && sessionAgent !== agent) {
    await log(`[pcsync] session ${sessionId} belongs to pcsync agent "${sessionAgent}", not "${agent}"; starting a new session\n`);
    sessionId = "";
  }
  let resumedLost: string | null = null;
  if (!sessionId && cfg.resumeLostSessions && ctx.context.forceFreshSession !== true) {
    for (let i = lost.length - 1; i >= 0; i--) {
      const r = lost[i].result;
      const e = lost[i].entry;
      // Paperclip keeps sessions per task: resume only a session of this task.
      if (r.sessionId && (e.agent === agent || r.agent === agent) && (e.taskKey ?? null) === (ctx.runtime.taskKey ?? null)) {
        sessionId = r.sessionId;
        resumedLost = lost[i].entry.name;
        await log(`[pcsync] Paperclip gave no session: resuming session ${sessionId} of the lost run ${resumedLost}\n`);
        break;
      }
    }
  }

  const prompt = buildPrompt({
    runId: ctx.runId,
    agent: ctx.agent,
    context: ctx.context,
    resumed: sessionId !== "",
    promptTemplate: cfg.promptTemplate,
    bootstrapPromptTemplate: cfg.bootstrapPromptTemplate,
  });
  const context = requestContext(ctx.context);
  const request: Record<string, unknown> = {
    apiVersion: "pcsync.io/v1alpha1",
    kind: "Run",
    ...companyRef,
    agent,
    prompt: prompt.text,
  };
  if (sessionId) request.sessionId = sessionId;
  if (cfg.timeoutSec > 0) request.timeoutSec = cfg.timeoutSec;
  if (Object.keys(context).length > 0) request.context = context;
  const paperclip: Record<string, unknown> = {
    apiUrl: cfg.apiUrl || defaultApiUrl(ctx.agent),
    agentId: ctx.agent.id,
    runId: ctx.runId,
  };
  if (ctx.authToken) paperclip.apiKey = ctx.authToken;
  request.paperclip = paperclip;

  if (ctx.onMeta) {
    await ctx.onMeta({
      adapterType: "pcsync",
      command: "pcsync",
      cwd: cfg.spoolDir,
      commandArgs: [paths.request],
      commandNotes: [
        `pcsync agent "${agent}" of company ${cfg.company ? `"${cfg.company}"` : `id ${ctx.agent.companyId}`}`,
        sessionId ? `resuming session ${sessionId}` : "new session",
        cfg.timeoutSec > 0 ? `timeout ${cfg.timeoutSec} s` : "timeout: the agent's own in pcsync's config",
      ],
      prompt: prompt.text,
      promptMetrics: prompt.metrics,
      context: ctx.context,
    });
  }

  // Cancellation by signal from here on.
  if (ctx.onCancellationReady) await ctx.onCancellationReady();
  if (ctx.signal?.aborted && !attached) {
    return failed("cancelled", "the run was cancelled before it was sent to pcsync");
  }

  const timeoutMs = cfg.timeoutSec > 0 ? (cfg.timeoutSec + cfg.resultGraceSec) * 1000 : 0;
  let adapterTimedOut = false;
  let cancelSent = false;
  const follower = new RunFollower({
    spoolDir: cfg.spoolDir,
    stateDir: cfg.stateDir,
    paths,
    onLog: (chunk) => ctx.onLog("stdout", chunk),
    timeoutMs,
    onRunDeadline: async () => {
      adapterTimedOut = true;
      await log(`[pcsync] no result ${cfg.resultGraceSec} s past the run's timeout of ${cfg.timeoutSec} s; cancelling it\n`);
      await sendCancel();
    },
  });
  const sendCancel = async () => {
    if (cancelSent) return;
    cancelSent = true;
    try {
      await writeAtomic(paths.cancel, "cancelled by Paperclip\n");
    } catch (err) {
      await log(`[pcsync] cannot write ${paths.cancel}: ${(err as Error).message}\n`);
    }
    follower.cancelRequested(cfg.cancelWaitSec * 1000);
  };
  const onAbort = () => {
    const reason = abortReason(ctx.signal);
    if (LEASE_LOST.test(reason)) {
      // Paperclip is shutting down (its database went first) or another
      // server took the run over: not a cancel. The run goes on in pcsync.
      follower.detach(reason);
      return;
    }
    void sendCancel();
  };

  try {
    follower.start();
  } catch (err) {
    follower.stop();
    return failed(ErrorCodes.spool, `cannot watch the spool ${cfg.spoolDir}: ${(err as Error).message}; check spoolDir`);
  }
  try {
    if (!attached) {
      try {
        await remember(cfg.spoolDir, {
          name,
          paperclipAgentId: ctx.agent.id,
          agent,
          taskKey: ctx.runtime.taskKey ?? null,
          writtenAt: new Date().toISOString(),
          ...ledgerScope(ctx.context),
        });
        await writeAtomic(paths.request, JSON.stringify(request, null, 2) + "\n", true);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") {
          await forget(cfg.spoolDir, name).catch(() => undefined);
          return failed(
            ErrorCodes.spool,
            `cannot write the run request ${paths.request}: ${(err as Error).message}; the spool must be writable by the Paperclip server (see docs/paperclip.md)`,
          );
        }
      }
    } else {
      await log(`[pcsync] the request ${paths.request} is already in the spool; following it\n`);
    }
    ctx.onDispatch?.();
    follower.runStarted(Date.now());
    ctx.signal?.addEventListener("abort", onAbort, { once: true });
    if (ctx.signal?.aborted) onAbort();
    follower.check();

    const outcome = await follower.outcome;
    const lostJson = lost.map((l) => ({ name: l.entry.name, result: l.result, booking: bookings.find((b) => b.name === l.entry.name) ?? null }));
    switch (outcome.kind) {
      case "result": {
        const res = toExecutionResult(outcome.result as PcsyncResult, session, cfg.billingType, files);
        if (adapterTimedOut) {
          res.timedOut = true;
          res.errorCode = "timeout";
        }
        if (cancelSent) {
          // pcsync writes a result only once the process or Job has ended: the
          // stop is verified, which Paperclip's cancel waits to hear.
          res.resultJson = {
            ...res.resultJson,
            executionCancellation: { state: "acknowledged", acknowledgedAt: new Date().toISOString(), forced: res.signal === "SIGKILL" },
          };
        }
        if (lostJson.length > 0 || resumedLost) {
          res.resultJson = { ...res.resultJson, lostRuns: lostJson, resumedLostRun: resumedLost };
        }
        await forget(cfg.spoolDir, name);
        // A lost run whose spend is not booked stays for the next run to book.
        const unbooked = new Set(bookings.filter((b) => b.state === "failed").map((b) => b.name));
        for (const l of lost) if (!unbooked.has(l.entry.name)) await forget(cfg.spoolDir, l.entry.name);
        return res;
      }
      case "daemon_down":
        return failed(
          ErrorCodes.daemonDown,
          `${outcome.reason}. The run may still be queued or running; if it finishes, the next run of this agent reports it and resumes its session.`,
          { resultJson: { spool: files } },
        );
      case "detached":
        return failed(
          ErrorCodes.detached,
          `Paperclip stopped following this run (${outcome.reason}), most likely because the server is shutting down. The run goes on in pcsync (${paths.request}); the next run of this agent reports its result and resumes its session.`,
          { resultJson: { spool: files } },
        );
      default:
        return failed(
          adapterTimedOut ? "timeout" : "cancelled",
          `pcsync wrote no result within ${cfg.cancelWaitSec} s of the cancel (${paths.cancel}); the run may still end later: see \`pcsync runs show ${name}\``,
          { timedOut: adapterTimedOut, resultJson: { spool: files } },
        );
    }
  } finally {
    ctx.signal?.removeEventListener("abort", onAbort);
    follower.stop();
  }
}
