/**
 * The durable records of continuable children: an append-only JSONL file in the state dir, one
 * line per change of a child's record (last line wins), compacted at open. With the run index
 * (the child's current run and its token) and the session log, it is what lets a restarted
 * daemon resume a child, queue its messages and deliver its settlement notice to an owner that
 * was away.
 *
 * Writes are synchronous and unbatched: a record changes once per turn, not per event. A line
 * that cannot be read is kept as a diagnostic (listing reports it) rather than dropped silently;
 * a torn last line (a crash mid-write) is tolerated the same way.
 */
import { closeSync, existsSync, openSync, readFileSync, renameSync, writeFileSync, writeSync } from '../../common/node-builtins.js';
import type { ChildSettledNotice, ChildStatus, ContentBlock } from '../../protocol/index.js';

export interface QueuedMessage {
  readonly messageId: string;
  readonly content: ContentBlock[];
  /** Its sender's W3C trace context: the turn it becomes continues that trace. */
  readonly traceparent?: string;
}

export interface ChildRecord {
  /** The child's own id (its session id): what `child/send` and `child/interrupt` take. */
  readonly childId: string;
  /** sha256 of the owner key of the client that started the lineage. */
  readonly ownerHash: string;
  /** The parent session: a client's agent, or another child's id for nested delegation. */
  readonly parentId: string;
  readonly provider: string;
  readonly label?: string;
  /** The run of the child's latest turn, and that run's token (to take it back after a restart). */
  readonly runId: string;
  readonly runToken: string;
  readonly status: ChildStatus;
  /** The message whose turn runs now (or ran last): the settlement notice names it. */
  readonly messageId?: string;
  /** Messages that arrived while a turn ran: each becomes the next turn, in order. */
  readonly inbox: QueuedMessage[];
  /** Settlement notices no connection of the owner was there to receive. */
  readonly undelivered: ChildSettledNotice[];
  readonly createdAt: string;
}

export class ChildIndex {
  private readonly records = new Map<string, ChildRecord>();
  private fd: number | undefined;
  /** Lines that could not be read, as human-readable diagnostics. */
  readonly unreadable: string[] = [];

  constructor(path: string | undefined) {
    if (path === undefined) return;
    this.load(path);
    const temp = `${path}.${process.pid}.tmp`;
    writeFileSync(temp, [...this.records.values()].map((r) => `${JSON.stringify(r)}\n`).join(''), { mode: 0o600 });
    renameSync(temp, path);
    this.fd = openSync(path, 'a', 0o600);
  }

  get(childId: string): ChildRecord | undefined {
    return this.records.get(childId);
  }

  all(): ChildRecord[] {
    return [...this.records.values()];
  }

  put(record: ChildRecord): ChildRecord {
    this.records.set(record.childId, record);
    if (this.fd !== undefined) writeSync(this.fd, `${JSON.stringify(record)}\n`);
    return record;
  }

  update(childId: string, change: Partial<ChildRecord>): ChildRecord {
    const current = this.records.get(childId);
    if (!current) throw new Error(`no child record ${childId}`);
    return this.put({ ...current, ...change });
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private load(path: string): void {
    if (!existsSync(path)) return;
    const lines = readFileSync(path, 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (line === '') return;
      try {
        const record = JSON.parse(line) as ChildRecord;
        if (typeof record.childId !== 'string' || typeof record.ownerHash !== 'string' || typeof record.parentId !== 'string') {
          throw new Error('not a child record');
        }
        // Whatever ran when the previous daemon stopped is over: its run reads as interrupted.
        this.records.set(record.childId, record.status === 'running' ? { ...record, status: 'idle' } : record);
      } catch (error) {
        this.unreadable.push(`${path} line ${i + 1}: unreadable child record (${(error as Error).message})`);
      }
    });
  }
}
