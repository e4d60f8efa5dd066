/**
 * The run index: an append-only JSONL log in the state dir, one line per change of a run's
 * record (last line wins). It is what outlives the daemon: who owns a run (a token hash), where
 * its session lives, how it ended — so a restarted daemon can answer `run/wait`, mark runs it
 * never saw finish as interrupted, and never show a dead daemon's run as running.
 *
 * Changes are batched per event-loop turn into one synchronous write(2) to the open file (group
 * commit, no thread-pool hop), and `flush()` writes them at once: the daemon calls it before each
 * write to a client (write-ahead), so whatever a client has heard of (a run's token in its start
 * reply, its result in `subagent/end`) is in the file first. No fsync: the page cache survives
 * the daemon's death (`kill -9`, a crash); such a death loses at most changes no client heard of
 * yet (a start never answered; a later change then reads as interrupted). A power cut may lose
 * the tail, which the reader tolerates as a torn line.
 *
 * Only runs that may still change are kept in memory (running, starting, checkpointed, and this
 * daemon's own until they are archived). At open, at each `archiveFinished` (gc), and after a
 * batch that leaves more than `maxHeld` runs, or more than `maxHeldBytes` of finished records, in
 * memory, settled and disposed runs move to the archive on disk (run-archive.ts), written before
 * the log is rewritten without them, so start-up reads the short log and the archive's offset
 * index, never every stored record. The byte bound is for runs with large outputs (a record keeps
 * up to `maxStoredOutputBytes` of it): by count alone, 10,000 runs of 64 KiB held 640 MiB of heap
 * and grew the log by 1.2 GiB before a pass, whose one archive write then peaked at 1.5 GiB RSS.
 *
 * A failed write (ENOSPC, EROFS, EIO...) never throws at a caller and never leaves a torn line:
 * the file is cut back to its last whole line, the unwritten records stay queued (one per run,
 * the latest) and are retried on the next change and every few seconds; the fault is reported to
 * `StateFaults` until a retry succeeds. While faulted, `assertRecordable` refuses new runs.
 * At open, a compaction that cannot be written keeps the file as it is (it stays readable).
 */
import { closeSync, copyFileSync, existsSync, fstatSync, ftruncateSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import {
  DEFAULT_MAX_STORED_OUTPUT_BYTES,
  SubagentError,
  capBlocks,
  truncationNote,
  type SubagentResult,
} from '../../protocol/index.js';
import { RunArchive } from './run-archive.js';
import { readStoredRun, type IndexedRun } from './indexed-run.js';

export type { IndexedRun, IndexedState } from './indexed-run.js';
import { describeWriteFault, StateFaults } from './state-faults.js';

/** While faulted, how often queued records are retried without a new change to carry them. */
const RETRY_MS = 2000;

/** Finished records' bytes in memory past which a write batch archives them. */
export const DEFAULT_MAX_HELD_BYTES = 16 * 1024 * 1024;

export interface IndexProblems {
  tornTail: boolean;
  readonly corrupt: Array<{ line: number; reason: string }>;
}

export class RunIndex {
  private readonly runs = new Map<string, IndexedRun>();
  private fd: number | undefined;
  /** Records not yet written, latest per run (last line wins, so older ones need not be). */
  private pending = new Map<string, IndexedRun>();
  /** Bytes of whole lines in the file: a failed append is cut back to this. */
  private size = 0;
  private fault: unknown;
  private retry: NodeJS.Timeout | undefined;
  private batchScheduled = false;
  readonly problems: IndexProblems;
  readonly archive: RunArchive;
  private archiveAt: number;
  /** The written line length of each finished (settled, disposed) record held in memory, and their sum. */
  private readonly finishedBytes = new Map<string, number>();
  private heldFinishedBytes = 0;

  constructor(
    private readonly path: string,
    /** The most output one record keeps: a record is a line rewritten on every change, and held in memory. */
    private readonly maxStoredOutputBytes = DEFAULT_MAX_STORED_OUTPUT_BYTES,
    private readonly faults = new StateFaults(),
    /** Runs in memory past which a write batch also archives the finished ones (a long-lived daemon). */
    private readonly maxHeld = 10_000,
    /** Bytes of finished records in memory past which a write batch archives them. */
    private readonly maxHeldBytes = DEFAULT_MAX_HELD_BYTES,
  ) {
    this.problems = this.load();
    this.archiveAt = maxHeld;
    this.archive = new RunArchive(path.replace(/\.jsonl$/, '') + '.archive.jsonl');
    try {
      // Keep the evidence: compaction would otherwise drop the unreadable lines for good.
      if (this.problems.corrupt.length > 0) copyFileSync(path, `${path}.corrupt-${Date.now()}`);
      this.compact();
    } catch (error) {
      this.faulted(error); // the old file stays as it was: still whole, just not compacted
    }
    try {
      this.fd = openSync(path, 'a', 0o600);
      this.size = fstatSync(this.fd).size;
    } catch (error) {
      this.faulted(error); // opened by the first retry that succeeds
    }
  }

  /** A run's newest record: from memory, else read from the archive. */
  get(runId: string): IndexedRun | undefined {
    return this.runs.get(runId) ?? this.archive.get(runId);
  }

  /** A run's record if it is held in memory (it may still change); the archive is not read. */
  held(runId: string): IndexedRun | undefined {
    return this.runs.get(runId);
  }

  /** The runs held in memory (every one that may still change), oldest first. */
  all(): IndexedRun[] {
    return [...this.runs.values()];
  }

  /** Every stored run, newest first: memory, then the archive read backwards as iterated. */
  *newestFirst(): Generator<IndexedRun> {
    const held = this.all();
    for (let at = held.length - 1; at >= 0; at--) yield held[at]!;
    for (const run of this.archive.newestFirst()) if (!this.runs.has(run.runId)) yield run;
  }

  /**
   * Moves settled and disposed runs to the archive (oldest start first), then rewrites the log
   * with what is left. A run that changes later is read back and archived again (last wins).
   * Returns how many it moved; a write fault is thrown (gc reports it).
   */
  archiveFinished(): number {
    this.flush();
    const moved = this.compact();
    this.reopen();
    return moved;
  }

  /** Seen by `get` at once; written with the rest of this event-loop turn's changes. */
  put(given: IndexedRun): void {
    const run = given.result ? { ...given, result: storedResult(given.result, this.maxStoredOutputBytes) } : given;
    if (this.closed) return void this.runs.set(run.runId, run);
    this.runs.set(run.runId, run);
    if (!this.batchScheduled) {
      // Scheduled even while records wait for a retry: a retry rides on the next change.
      this.batchScheduled = true;
      setImmediate(() => this.flushBatch());
    }
    this.pending.delete(run.runId); // re-inserted last: the newest record is written last
    this.pending.set(run.runId, run);
  }

  /**
   * Writes the queued records now (a no-op when none waits); a failure is kept (see the header),
   * never thrown: the records stay queued, and the next start is refused (`assertRecordable`).
   */
  flush(): void {
    if (this.closed || this.pending.size === 0) return;
    this.write();
  }

  private write(): void {
    const records = [...this.pending.values()];
    const lines = records.map((run) => `${JSON.stringify(run)}\n`);
    const text = lines.join('');
    try {
      this.fd ??= openSync(this.path, 'a', 0o600);
      writeSync(this.fd, text);
      this.size += Buffer.byteLength(text);
      this.pending.clear();
      records.forEach((run, i) => this.countFinished(run, lines[i]!.length));
      if (this.fault !== undefined) {
        this.fault = undefined;
        this.faults.cleared(this.path);
      }
    } catch (error) {
      if (this.fd !== undefined) {
        try {
          ftruncateSync(this.fd, this.size); // drop a partly written line; needs no space
        } catch {
          // the next successful load reads a torn line as torn; nothing else is lost
        }
      }
      this.faulted(error);
    }
  }

  /** Keeps `heldFinishedBytes` the sum of the held finished records' line lengths (UTF-16 units: near enough). */
  private countFinished(run: IndexedRun, length: number): void {
    const finished = run.state === 'settled' || run.state === 'disposed';
    this.heldFinishedBytes += (finished ? length : 0) - (this.finishedBytes.get(run.runId) ?? 0);
    if (finished) this.finishedBytes.set(run.runId, length);
    else this.finishedBytes.delete(run.runId);
  }

  /** A batch's write, then, past `archiveAt` runs or `maxHeldBytes` of finished records in memory, an archiving pass. */
  private flushBatch(): void {
    this.batchScheduled = false;
    this.flush();
    if (this.closed || this.fault !== undefined) return;
    if (this.runs.size <= this.archiveAt && this.heldFinishedBytes <= this.maxHeldBytes) return;
    try {
      this.archiveFinished();
    } catch (error) {
      this.faulted(error);
    }
    // Everything left may still change: wait for twice as many before trying again.
    this.archiveAt = Math.max(this.maxHeld, this.runs.size * 2);
  }

  /**
   * Refuses a new run while the index cannot be written: a run nobody can find after a restart
   * is lost work. Retries the queued records first, so a freed disk is noticed at once.
   */
  assertRecordable(): void {
    if (this.fault === undefined) return;
    this.retryWrite();
    if (this.fault === undefined) return;
    throw new SubagentError('START_FAILED', `the daemon cannot record new runs: ${describeWriteFault(this.path, this.fault)}`);
  }

  close(): void {
    this.flush();
    clearInterval(this.retry);
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
    this.archive.close();
    this.closed = true;
  }

  private closed = false;

  private faulted(error: unknown): void {
    this.fault ??= error;
    this.faults.report(this.path, error);
    if (this.retry) return;
    this.retry = setInterval(() => {
      if (this.fault === undefined || this.closed) {
        clearInterval(this.retry);
        this.retry = undefined;
        return;
      }
      this.retryWrite();
    }, RETRY_MS);
    this.retry.unref();
  }

  /**
   * Queued records are retried as an append. With nothing queued (the open or the compaction
   * failed) only a real write proves the file writable again: the compaction is retried.
   */
  private retryWrite(): void {
    if (this.pending.size > 0) return this.flush();
    try {
      this.compact();
      this.reopen();
      this.fault = undefined;
      this.faults.cleared(this.path);
    } catch (error) {
      this.fault = error;
    }
  }

  private load(): IndexProblems {
    const problems: IndexProblems = { tornTail: false, corrupt: [] };
    if (!existsSync(this.path)) return problems;
    const lines = readFileSync(this.path, 'utf8').split('\n');
    const last = lines.length - 1; // after the final newline: '' when the tail is whole
    lines.forEach((line, i) => {
      if (line === '') return;
      try {
        const run = readStoredRun(line);
        if (!run) throw new Error('not a run record');
        this.runs.set(run.runId, run);
      } catch (error) {
        if (i === last) problems.tornTail = true;
        else problems.corrupt.push({ line: i + 1, reason: (error as Error).message });
      }
    });
    return problems;
  }

  /** The rename replaced the file `fd` pointed at: append to the new one. */
  private reopen(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
    this.fd = openSync(this.path, 'a', 0o600);
    this.size = fstatSync(this.fd).size;
  }

  /** Moves finished runs to the archive, then rewrites the log as one line per run left. */
  private compact(): number {
    const finished = [...this.runs.values()].filter((r) => r.state === 'settled' || r.state === 'disposed');
    finished.sort((a, b) => (a.startedAt < b.startedAt ? -1 : a.startedAt > b.startedAt ? 1 : 0));
    this.archive.append(finished); // before the log forgets them
    for (const run of finished) this.runs.delete(run.runId);
    this.finishedBytes.clear();
    this.heldFinishedBytes = 0;
    const temp = `${this.path}.${process.pid}.tmp`;
    try {
      writeFileSync(temp, [...this.runs.values()].map((r) => `${JSON.stringify(r)}\n`).join(''), { mode: 0o600 });
      renameSync(temp, this.path);
    } catch (error) {
      rmSync(temp, { force: true });
      throw error;
    }
    return finished.length;
  }
}

/**
 * A result as a record keeps it: output cut to `cap` bytes with the protocol's marker, a
 * structured value larger than `cap` dropped, and the diagnostic saying so.
 */
export function storedResult(result: SubagentResult, cap: number): SubagentResult {
  const output = capBlocks(result.output, cap);
  const structuredTooBig = result.structured !== undefined && (JSON.stringify(result.structured)?.length ?? 0) > cap;
  if (!output.truncated && !structuredTooBig) return result;
  const { structured: _dropped, ...rest } = result;
  const notes = [result.diagnostic, output.truncated && truncationNote('stored output', cap), structuredTooBig && `structured value over ${cap} bytes not stored`];
  return {
    ...(structuredTooBig ? rest : result),
    output: output.blocks,
    diagnostic: notes.filter((note): note is string => typeof note === 'string' && note !== '').join('; '),
  };
}
