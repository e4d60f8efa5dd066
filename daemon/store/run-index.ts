/**
 * The run index: an append-only JSONL log in the state dir, one line per change of a run's
 * record. A run's first line in the log is its whole record; a later one is the change alone
 * (`{"runId", "change": {the fields that changed}}`), applied to the record before it when the log
 * is read, so a dispose does not write a run's output (up to `maxStoredOutputBytes`) again. A change
 * that removes a field is written whole, and a whole line replaces the record.
 * It is what outlives the daemon: who owns a run (a token hash), where
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
import { closeSync, copyFileSync, existsSync, fstatSync, ftruncateSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from '../../common/node-builtins.js';
import {
  DEFAULT_MAX_STORED_OUTPUT_BYTES,
  SubagentError,
  capBlocks,
  truncationNote,
  type SubagentResult,
} from '../../protocol/index.js';
import { RunArchive } from './run-archive.js';
import { storedRunFrom, type IndexedRun } from './indexed-run.js';

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
  /** Each run's record as the log file has it now, and about how long a whole line of it is. */
  private readonly logged = new Map<string, { readonly record: IndexedRun; readonly bytes: number }>();
  /** That length for each finished (settled, disposed) record held in memory, and their sum. */
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
    const lines = records.map((run) => this.lineOf(run));
    const text = lines.map((line) => line.text).join('');
    try {
      this.fd ??= openSync(this.path, 'a', 0o600);
      writeSync(this.fd, text);
      this.size += Buffer.byteLength(text);
      this.pending.clear();
      records.forEach((run, i) => this.logs(run, lines[i]!.bytes));
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

  /** `run`'s next line: its change since the log's record of it, or the whole record; and about how long a whole line of it is. */
  private lineOf(run: IndexedRun): { text: string; bytes: number } {
    const before = this.logged.get(run.runId);
    const change = before && changeOf(before.record, run);
    const text = `${JSON.stringify(change ? { runId: run.runId, change } : run)}\n`;
    // Lengths in UTF-16 units: near enough for a bound on memory.
    return { text, bytes: change ? before.bytes + text.length : text.length };
  }

  /** `run` is in the log as it is now; `heldFinishedBytes` stays the sum over the finished ones held. */
  private logs(run: IndexedRun, bytes: number): void {
    this.logged.set(run.runId, { record: run, bytes });
    const finished = run.state === 'settled' || run.state === 'disposed';
    this.heldFinishedBytes += (finished ? bytes : 0) - (this.finishedBytes.get(run.runId) ?? 0);
    if (finished) this.finishedBytes.set(run.runId, bytes);
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
        const value: unknown = JSON.parse(line);
        const change = changeLine(value);
        const before = change && this.logged.get(change.runId);
        if (change && !before) throw new Error('a change of a run with no record before it');
        const run = before ? { ...before.record, ...change!.change } : storedRunFrom(value);
        if (!run) throw new Error('not a run record');
        this.runs.set(run.runId, run);
        this.logged.set(run.runId, { record: run, bytes: (before?.bytes ?? 0) + line.length + 1 });
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
    const kept = [...this.runs.values()].map((run) => ({ run, line: `${JSON.stringify(run)}\n` }));
    try {
      writeFileSync(temp, kept.map(({ line }) => line).join(''), { mode: 0o600 });
      renameSync(temp, this.path);
    } catch (error) {
      rmSync(temp, { force: true });
      throw error;
    }
    // The log now holds each kept run as one whole line.
    this.logged.clear();
    for (const { run, line } of kept) this.logged.set(run.runId, { record: run, bytes: line.length });
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

/**
 * The fields of `after` that differ from `before` (by identity: a record's unchanged parts are the
 * same objects), or undefined when a field was removed or cleared (only a whole line can say so).
 */
function changeOf(before: IndexedRun, after: IndexedRun): Partial<IndexedRun> | undefined {
  const change: Record<string, unknown> = {};
  for (const key of Object.keys(before)) if (!(key in after)) return undefined;
  for (const [key, value] of Object.entries(after)) {
    if (before[key as keyof IndexedRun] === value) continue;
    if (value === undefined) return undefined; // JSON drops it: the change would keep the old value
    change[key] = value;
  }
  return change as Partial<IndexedRun>;
}

/** A change line's parts, or undefined when the value is not one (a whole record, or neither). */
function changeLine(value: unknown): { runId: string; change: Partial<IndexedRun> } | undefined {
  const line = value as { runId?: unknown; change?: unknown; state?: unknown };
  if (typeof line !== 'object' || line === null || typeof line.runId !== 'string' || line.state !== undefined) return undefined;
  if (typeof line.change !== 'object' || line.change === null || Array.isArray(line.change)) return undefined;
  return { runId: line.runId, change: line.change as Partial<IndexedRun> };
}
