/**
 * A child's append-only session log: a header and events, kept in memory and mirrored to
 * `${dir}/${id}.jsonl` (header line, then one event per line). Appends are kept in order and
 * written once per event-loop turn, all of that turn's lines in one write; `flush()` writes what
 * is waiting, waits for it and fsyncs, which the loop does at every turn end; `close()` fsyncs
 * only what was written since (a turn's flush then close costs one fsync, not two). A write failure (full or read-only disk) is kept and re-thrown by the next flush as a
 * `SessionWriteError` naming the file and errno: the log cannot silently diverge from its file.
 * After a failure nothing more is written and a partly written line is cut off, so what the file
 * already holds stays whole and readable.
 * The sessions dir is made (0700) only when creating a file finds it missing: one fs round trip
 * less on every child start. Creating writes the header (and a fork's seed) without an fsync: the
 * first flush syncs them with the first turn.
 */
import { mkdir, open, rm, type FileHandle } from 'node:fs/promises';
import { sessionFilePath } from '../ops/paths.js';
import type { SessionEvent, SessionHeader } from '../../protocol/index.js';
import { rememberSessionEventJson } from './session-event-json.js';
import { describeWriteFault, errnoOf } from './state-faults.js';
import { isoNow } from '../../common/iso-time.js';

export class SessionWriteError extends Error {
  override readonly name = 'SessionWriteError';
  readonly code: string;
  constructor(
    readonly path: string,
    cause: unknown,
  ) {
    super(`session log ${describeWriteFault(path, cause)}`, { cause });
    this.code = errnoOf(cause);
  }
}

export class SessionLog {
  private readonly log: SessionEvent[];
  /** Opened lazily, so a log closed between runs reopens on its next append. */
  private handle: Promise<FileHandle> | undefined;
  private writing: Promise<void> = Promise.resolve();
  /** Lines appended this turn, not yet handed to a write. */
  private queued = '';
  private scheduled = false;
  private failure: unknown;
  /** Bytes of whole lines in the file (undefined until known): a failed append is cut back to it. */
  private size: number | undefined;
  /** Lines written to the file since its last fsync. */
  private unsynced = false;

  private constructor(
    readonly path: string,
    readonly header: SessionHeader,
    events: SessionEvent[],
    handle: FileHandle | undefined,
  ) {
    this.log = events;
    this.handle = handle ? Promise.resolve(handle) : undefined;
  }

  private setSize(bytes: number): this {
    this.size = bytes;
    return this;
  }

  private markUnsynced(): this {
    this.unsynced = true;
    return this;
  }

  /** Continues a log already on disk (a child restored by a later daemon); appends reopen it. */
  static reopen(path: string, header: SessionHeader, events: SessionEvent[]): SessionLog {
    return new SessionLog(path, header, events, undefined);
  }

  /** Creates the file (never overwriting one) with the header and the seed, and syncs it. */
  static async create(dir: string, header: SessionHeader, seed: readonly SessionEvent[] = []): Promise<SessionLog> {
    const path = sessionFilePath(dir, header.id);
    let handle: FileHandle;
    try {
      handle = await createFile(dir, path);
    } catch (error) {
      throw new SessionWriteError(path, error);
    }
    try {
      const events = seed.map((event) => stamp(structuredClone(event)));
      const lines = [header, ...events].map((entry) => `${JSON.stringify(entry)}\n`).join('');
      await handle.write(lines);
      // No fsync here: the first flush (the first turn's end) syncs the header with the turn.
      // The run index's record of this run is not fsynced either (run-index.ts: the page cache
      // survives the daemon's death), so a sync at create guarded against a power cut only a
      // header whose run could be lost with it, and cost every child start a disk flush.
      return new SessionLog(path, header, events, handle).setSize(Buffer.byteLength(lines)).markUnsynced();
    } catch (error) {
      await handle.close().catch(() => undefined);
      await rm(path, { force: true });
      throw new SessionWriteError(path, error);
    }
  }

  /** The live event array (seed included). Callers must treat it as read-only. */
  get events(): readonly SessionEvent[] {
    return this.log;
  }

  /**
   * Stamps `at`, keeps the event in memory and queues its line for this turn's write. Returns the
   * stored event, its JSON kept for the stream (session-event-json.ts).
   */
  append(event: SessionEvent): SessionEvent {
    const stored = stamp(event);
    this.log.push(stored);
    const json = JSON.stringify(stored);
    rememberSessionEventJson(stored, json);
    this.queued += `${json}\n`;
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.writeQueued());
    }
    return stored;
  }

  /** Hands the turn's lines to one write, after the writes before it. */
  private writeQueued(): void {
    this.scheduled = false;
    const lines = this.queued;
    if (lines === '') return;
    this.queued = '';
    const handle = (this.handle ??= open(this.path, 'a'));
    this.writing = this.writing
      .then(async () => {
        if (this.failure !== undefined) return; // the file stays as it was at the first failure
        const opened = await handle;
        this.size ??= (await opened.stat()).size;
        await opened.write(lines);
        this.size += Buffer.byteLength(lines);
        this.unsynced = true;
      })
      .catch(async (error: unknown) => {
        this.failure ??= new SessionWriteError(this.path, error);
        if (this.size === undefined) return;
        await handle.then((opened) => opened.truncate(this.size)).catch(() => undefined);
      });
  }

  /** Writes and waits for queued appends, and fsyncs; re-throws any write failure since the log opened. */
  async flush(): Promise<void> {
    this.writeQueued();
    await this.writing;
    if (this.failure !== undefined) throw this.failure;
    if (this.handle && this.unsynced) {
      this.unsynced = false;
      try {
        await (await this.handle).sync();
      } catch (error) {
        throw (this.failure = new SessionWriteError(this.path, error));
      }
    }
  }

  /** Flushes and releases the file handle; a later append reopens it. */
  async close(): Promise<void> {
    this.writeQueued();
    const handle = this.handle;
    this.handle = undefined;
    await this.writing;
    const opened = await handle?.catch(() => undefined); // an open that failed is already this.failure
    if (!opened) {
      if (this.failure !== undefined) throw this.failure;
      return;
    }
    try {
      if (this.failure === undefined && this.unsynced) {
        this.unsynced = false;
        await opened.sync();
      }
    } finally {
      await opened.close();
    }
    if (this.failure !== undefined) throw this.failure;
  }

  /** Closes and deletes the file: for a child rolled back before it was ever published. */
  async discard(): Promise<void> {
    await this.close().catch(() => undefined);
    await rm(this.path, { force: true });
  }
}

function stamp(event: SessionEvent): SessionEvent {
  return event.at === undefined ? { ...event, at: isoNow() } : event;
}

/** Creates `path` exclusively (0600), making its dir first only if it is missing. */
async function createFile(dir: string, path: string): Promise<FileHandle> {
  try {
    return await open(path, 'ax', 0o600);
  } catch (error) {
    if (errnoOf(error) !== 'ENOENT') throw error;
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return await open(path, 'ax', 0o600);
  }
}
