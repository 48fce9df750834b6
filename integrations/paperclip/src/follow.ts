// Following one run in the spool: its log as it grows, its result, and the
// daemon's heartbeat, all by watching directories (inotify), never by polling.

import { watch, type FSWatcher, promises as fs } from "node:fs";
import path from "node:path";
import { StringDecoder } from "node:string_decoder";
import { readJSON, readLiveness, type Liveness, type SpoolPaths } from "./spool.js";

/** LogSink receives the run's log text in order. */
export type LogSink = (chunk: string) => Promise<void>;

/**
 * LogTail copies a file to a sink from an offset to its end each time pump
 * is called. Calls are serialized; a call during a read makes one more read.
 */
export class LogTail {
  private offset = 0;
  private readonly decoder = new StringDecoder("utf8");
  private running: Promise<void> | null = null;
  private again = false;

  constructor(
    private readonly file: string,
    private readonly sink: LogSink,
  ) {}

  /** pump reads what was appended since the last read. */
  pump(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.readToEnd();
        } while (this.again);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  /** finish reads to the end and flushes a trailing partial character. */
  async finish(): Promise<void> {
    await this.pump();
    const rest = this.decoder.end();
    if (rest) await this.sink(rest);
  }

  private async readToEnd(): Promise<void> {
    let fh: fs.FileHandle;
    try {
      fh = await fs.open(this.file, "r");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
      throw err;
    }
    try {
      const buf = Buffer.alloc(64 * 1024);
      for (;;) {
        const { bytesRead } = await fh.read(buf, 0, buf.length, this.offset);
        if (bytesRead === 0) break;
        this.offset += bytesRead;
        const text = this.decoder.write(buf.subarray(0, bytesRead));
        if (text) await this.sink(text);
      }
    } finally {
      await fh.close();
    }
  }
}

/** Outcome is how waiting for a run ended. */
export type Outcome =
  | { kind: "result"; result: Record<string, unknown> }
  | { kind: "daemon_down"; reason: string }
  | { kind: "deadline" }
  | { kind: "detached"; reason: string };

/** FollowOptions tune RunFollower. */
export interface FollowOptions {
  spoolDir: string;
  stateDir: string;
  paths: SpoolPaths;
  /** onLog receives the log text. */
  onLog: LogSink;
  /** timeoutMs bounds the run from its start (0: no bound but liveness). */
  timeoutMs: number;
  /** onRunDeadline is called once when timeoutMs has passed (it should cancel). */
  onRunDeadline: () => Promise<void>;
}

/**
 * RunFollower watches the spool directory (the log and the result of one
 * run) and the state directory (the daemon's status file). It resolves once
 * the result exists, the daemon is found dead, or a deadline passes. Timers
 * exist only for deadlines: the next heartbeat's expiry, the run's bound, a
 * cancel's bound.
 */
export class RunFollower {
  private readonly tail: LogTail;
  private readonly watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | null = null;
  private settle!: (o: Outcome) => void;
  private fail!: (e: unknown) => void;
  private done = false;
  /** When the daemon must have written its next heartbeat by. */
  private heartbeatDeadline = Infinity;
  /** When the run must have ended by (its start + timeout + grace). */
  private runDeadline = Infinity;
  private cancelDeadline = Infinity;
  private runStartedAt: number | null = null;
  private timeoutFired = false;
  private checking: Promise<void> | null = null;
  private recheck = false;
  readonly outcome: Promise<Outcome>;

  constructor(private readonly o: FollowOptions) {
    this.tail = new LogTail(o.paths.log, o.onLog);
    this.outcome = new Promise<Outcome>((resolve, reject) => {
      this.settle = resolve;
      this.fail = reject;
    });
  }

  /** start begins watching; call it before the request is written. */
  start(): void {
    const logName = path.basename(this.o.paths.log);
    const resultName = path.basename(this.o.paths.result);
    this.watchers.push(
      watch(this.o.spoolDir, { persistent: false }, (_event, filename) => {
        if (filename === logName) {
          this.tail.pump().catch((err) => this.fail(err));
        } else if (filename === resultName || filename === null) {
          this.check();
        }
      }),
    );
    try {
      this.watchers.push(
        watch(this.o.stateDir, { persistent: false }, (_event, filename) => {
          if (filename === "status.json" || filename === null) this.check();
        }),
      );
    } catch {
      // No state directory: the liveness check says the daemon is down.
    }
    for (const w of this.watchers) w.on("error", (err) => this.fail(err));
  }

  /** runStarted sets the run's start (request written, or adopted). */
  runStarted(at: number): void {
    this.runStartedAt = at;
    this.updateRunDeadline(null);
  }

  /** cancelRequested bounds the remaining wait to ms from now. */
  cancelRequested(ms: number): void {
    this.cancelDeadline = Date.now() + ms;
    this.arm();
  }

  /** check looks at the result and the status file now (one at a time). */
  check(): void {
    if (this.done) return;
    if (this.checking) {
      this.recheck = true;
      return;
    }
    this.checking = (async () => {
      try {
        do {
          this.recheck = false;
          await this.checkOnce();
        } while (this.recheck && !this.done);
      } catch (err) {
        this.fail(err);
      } finally {
        this.checking = null;
      }
    })();
  }

  private async checkOnce(): Promise<void> {
    let result: unknown = null;
    try {
      result = await readJSON(this.o.paths.result);
    } catch {
      // Not JSON yet (a writer that does not rename): the next event rereads it.
    }
    if (result !== null && typeof result === "object") {
      await this.tail.finish();
      this.end({ kind: "result", result: result as Record<string, unknown> });
      return;
    }
    const now = Date.now();
    if (now >= this.cancelDeadline) {
      await this.tail.finish();
      this.end({ kind: "deadline" });
      return;
    }
    if (now >= this.runDeadline) {
      this.runDeadline = Infinity;
      this.timeoutFired = true;
      await this.o.onRunDeadline();
    }
    const live = await readLiveness(this.o.stateDir, this.o.spoolDir);
    if (!live.alive) {
      // The result may have landed just before the daemon stopped.
      if ((await readJSON(this.o.paths.result).catch(() => null)) !== null) {
        this.recheck = true;
        return;
      }
      await this.tail.finish();
      this.end({ kind: "daemon_down", reason: live.reason });
      return;
    }
    this.observe(live);
    this.arm();
  }

  private observe(live: Extract<Liveness, { alive: true }>): void {
    const st = live.status;
    // One second of slack past 3 heartbeats: the file's rename lands a little late.
    this.heartbeatDeadline = (st.stoppedAt ?? st.heartbeatAt!).getTime() + 3 * st.heartbeatIntervalSec * 1000 + 1000;
    this.updateRunDeadline(st.runs[this.o.paths.name] ?? null);
  }

  private updateRunDeadline(run: { state: string; startedAt: string | null } | null): void {
    if (this.o.timeoutMs <= 0 || this.timeoutFired) return;
    let from = this.runStartedAt ?? Date.now();
    if (run) {
      if (run.state === "queued") {
        // Waiting for a slot does not count against the run's time.
        from = Date.now();
      } else if (run.startedAt) {
        const t = new Date(run.startedAt).getTime();
        if (!Number.isNaN(t)) from = t;
      }
    }
    this.runDeadline = Math.max(this.runDeadline === Infinity ? 0 : this.runDeadline, from + this.o.timeoutMs);
    this.arm();
  }

  private arm(): void {
    if (this.done) return;
    const next = Math.min(this.heartbeatDeadline, this.runDeadline, this.cancelDeadline);
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (next === Infinity) return;
    this.timer = setTimeout(() => this.check(), Math.max(0, Math.min(next - Date.now(), 2 ** 31 - 1)));
  }

  private end(o: Outcome): void {
    if (this.done) return;
    this.done = true;
    this.stop();
    this.settle(o);
  }

  /** detach stops following without waiting for the result. */
  detach(reason: string): void {
    this.end({ kind: "detached", reason });
  }

  /** stop closes the watchers and timers. */
  stop(): void {
    for (const w of this.watchers) w.close();
    this.watchers.length = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
