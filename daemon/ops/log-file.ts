/**
 * The daemon log's file writer: appends pino's lines with asynchronous writes, in order. A write
 * that fails (full or read-only disk) is reported to `faults` and never thrown; its bytes stay
 * first in the queue and are retried when the next line arrives, never on a loop of their own,
 * so a daemon on a full disk can still exit. Lines past `maxQueuedBytes` are dropped and counted.
 */
import { mkdirSync, openSync, write } from 'node:fs';
import { dirname } from 'node:path';
import type { StateFaults } from '../store/state-faults.js';

export class LogFile {
  private fd: number | undefined;
  private queue: Buffer[] = [];
  private queued = 0;
  private writing = false;
  private faulted = false;
  /** Lines dropped while the file could not be written. */
  dropped = 0;

  constructor(
    private readonly path: string,
    private readonly faults: StateFaults | undefined,
    private readonly maxQueuedBytes: number,
  ) {
    this.open();
  }

  /** pino's destination interface. */
  write(line: string): boolean {
    const bytes = Buffer.from(line);
    if (this.queued + bytes.length > this.maxQueuedBytes) {
      this.dropped += 1;
      return true;
    }
    this.queue.push(bytes);
    this.queued += bytes.length;
    this.kick();
    return true;
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

  private kick(): void {
    if (this.writing || this.queue.length === 0 || !this.open()) return;
    const chunk = Buffer.concat(this.queue);
    this.queue = [chunk];
    this.writing = true;
    write(this.fd!, chunk, 0, chunk.length, null, (error, written) => {
      this.writing = false;
      if (error) return this.fail(error); // kept at the head; the next line retries it
      const rest = chunk.subarray(written);
      this.queue[0] = rest;
      if (rest.length === 0) this.queue.shift();
      this.queued -= written;
      if (this.faulted) {
        this.faulted = false;
        this.faults?.cleared(this.path);
      }
      this.kick();
    });
  }

  private fail(error: unknown): void {
    this.faulted = true;
    this.faults?.report(this.path, error);
  }
}
