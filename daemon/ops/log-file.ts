/**
 * The daemon log's file writer: pino's lines are queued and written together once per event-loop
 * turn (a setImmediate), in order, by one synchronous write(2): no thread-pool round trip and no
 * wake-up per line, and a busy turn's many lines cost one call.
 *
 * What a crash can lose: `flushSync` runs on the process's 'exit' (a normal end, `process.exit`,
 * the daemon's fatal-error path) and on pino's `flush`, so only a death that runs no JavaScript
 * (SIGKILL, an OOM kill, a native crash) loses lines, and at most those of the turn it cut short.
 *
 * A write that fails (full or read-only disk) is reported to `faults` and never thrown; its bytes
 * stay first in the queue and are retried with the next turn's lines, never on a loop of their
 * own, so a daemon on a full disk can still exit. Lines past `maxQueuedBytes` are dropped and counted.
 */
import { mkdirSync, openSync, writeSync } from '../../common/node-builtins.js';
import { dirname } from 'node:path';
import type { StateFaults } from '../store/state-faults.js';

/** Writers with lines queued (only those, so none is kept alive by it): one 'exit' hook flushes them. */
const unwritten = new Set<LogFile>();
let exitHooked = false;

export class LogFile {
  private fd: number | undefined;
  private queue: string[] = [];
  /** Bytes kept from a failed or partial write: written first. */
  private carried: Buffer | undefined;
  private queued = 0;
  private scheduled = false;
  private faulted = false;
  /** Lines dropped while the file could not be written. */
  dropped = 0;

  constructor(
    private readonly path: string,
    private readonly faults: StateFaults | undefined,
    private readonly maxQueuedBytes: number,
  ) {
    this.open();
    if (!exitHooked) {
      exitHooked = true;
      process.on('exit', () => {
        for (const file of unwritten) file.flushSync();
      });
    }
  }

  /** pino's destination interface. */
  write(line: string): boolean {
    const size = Buffer.byteLength(line);
    if (this.queued + size > this.maxQueuedBytes) {
      this.dropped += 1;
      return true;
    }
    this.queue.push(line);
    this.queued += size;
    unwritten.add(this);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.flushSync();
      });
    }
    return true;
  }

  /** Writes what is queued now (pino's `logger.flush()` and the exit hook call it). */
  flushSync(): void {
    if ((this.queue.length === 0 && this.carried === undefined) || !this.open()) return;
    const text = Buffer.from(this.queue.join(''));
    this.queue = [];
    let chunk = this.carried ? Buffer.concat([this.carried, text]) : text;
    this.carried = undefined;
    try {
      while (chunk.length > 0) {
        const written = writeSync(this.fd!, chunk);
        chunk = chunk.subarray(written);
        this.queued -= written;
      }
      unwritten.delete(this);
      if (this.faulted) {
        this.faulted = false;
        this.faults?.cleared(this.path);
      }
    } catch (error) {
      this.carried = chunk; // kept at the head; the next turn's lines retry it
      this.fail(error);
    }
  }

  /** pino multistream's flush: synchronous here, so the callback runs after the write. */
  flush(done?: (error?: Error) => void): void {
    this.flushSync();
    done?.();
  }

  private open(): boolean {
    if (this.fd !== undefined) return true;
    try {
      mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
      this.fd = openSync(this.path, 'a', 0o600);
      return true;
    } catch (error) {
      this.fail(error);
      return false;
    }
  }

  private fail(error: unknown): void {
    this.faulted = true;
    this.faults?.report(this.path, error);
  }
}
