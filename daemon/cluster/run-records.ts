/**
 * Run records in a JetStream KV bucket, one key per run (`run.<runId>`), with transitions by
 * compare-and-set on the key's revision: the fence that keeps two members from both believing
 * they run the same child. A live view (a KV watch) mirrors every record into memory for the
 * fair pick, listings and waiters on this member.
 *
 * Rules and failures:
 * - `create` refuses an existing run id; `transition` refuses a stale revision. Both refusals
 *   are REVISION_CONFLICT: re-read, decide again.
 * - The bucket keeps a few revisions per key (`history`), so the last transitions of a run can
 *   be read back; the view holds only the newest.
 * - The view is eventually consistent: a member may see a record a moment late, never out of
 *   order for one key. Decisions that must not race go through `transition`.
 * - What the pool should see but need not keep is *told*, not stored (`tell`): a patch every
 *   view applies to the record it holds, at that record's revision, published on core NATS
 *   (`_TOLD.<bucket>`, which no stream captures), the patches of one turn in one message. A
 *   view that does not hold the record yet (a member that joined later, a watch running behind)
 *   never applies it, and the record's next stored write replaces it. Measured through a pool of
 *   one: telling a dispose instead of writing it raised the runs/s by a quarter or more.
 */
import { Kvm, type KV } from '@nats-io/kv';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { SubagentError } from '../../protocol/index.js';
import { KvWrites } from './kv-writes.js';
import { withoutStacks, type NatsLink } from './nats-link.js';

export interface Revisioned<T> {
  readonly record: T;
  readonly revision: number;
}

export type RecordListener<T> = (record: T, revision: number) => void;

const KEY_PREFIX = 'run.';
/** JetStream's "wrong last sequence": the key changed (or exists, for create). */
const WRONG_LAST_SEQUENCE = 10071;
/** Patches told in one message at the most (a message stays far below NATS's 1 MB payload limit). */
const TOLD_PER_MESSAGE = 1000;

interface Told<T> {
  readonly runId: string;
  readonly patch: Partial<T>;
}

export class RunRecords<T extends { readonly runId: string }> {
  private readonly view = new Map<string, Revisioned<T>>();
  private readonly listeners = new Set<RecordListener<T>>();
  private stopWatch: (() => void) | undefined;
  /** Patches told in this turn, published together at its end. */
  private told: Told<T>[] = [];
  private readonly hearing: Subscription;

  private constructor(
    private readonly kv: KV,
    /** The writes, straight to the bucket's subjects (kv-writes.ts); reads and the watch go through the KV client. */
    private readonly writes: KvWrites,
    private readonly nc: NatsConnection,
    /** Where told patches go (see the header). */
    private readonly toldSubject: string,
  ) {
    this.hearing = nc.subscribe(toldSubject, {
      callback: (error, msg) => {
        if (error === null) this.heard(msg);
      },
    });
  }

  static async open<T extends { readonly runId: string }>(link: NatsLink, bucket: string, history = 5): Promise<RunRecords<T>> {
    const kvm = new Kvm(link.js);
    // Members start together: when another created the bucket between our look and our add,
    // the server refuses ours ("subjects overlap"), and the bucket it made is the one to open.
    const kv = await kvm
      .create(bucket, { history, storage: 'file' } as never)
      .catch(async (error: unknown) => (await link.jsm.streams.info(`KV_${bucket}`).catch(() => Promise.reject(error)), kvm.open(bucket)));
    const records = new RunRecords<T>(kv, new KvWrites(link.nc, bucket), link.nc, `_TOLD.${bucket}`);
    await records.watch();
    return records;
  }

  /**
   * Stores a new record; REVISION_CONFLICT if the run id exists. `made`, when given, makes the
   * record as it leaves (at the end of this turn) from `record`; resolves with what was stored.
   */
  async create(record: T, made?: (record: T) => T): Promise<Revisioned<T>> {
    let stored = record;
    try {
      // A run id is new: its key has no revision before its create (a purged run's never comes back).
      const revision = await this.writes.write(KEY_PREFIX + record.runId, made ? () => JSON.stringify((stored = made(record))) : JSON.stringify(record), 0);
      this.observe(stored, revision);
      return { record: stored, revision };
    } catch (error) {
      throw conflictOr(error, `run ${record.runId} already has a record`);
    }
  }

  async get(runId: string): Promise<Revisioned<T> | undefined> {
    const entry = await withoutStacks(() => this.kv.get(KEY_PREFIX + runId));
    if (!entry || entry.operation !== 'PUT') return undefined;
    return { record: entry.json<T>(), revision: entry.revision };
  }

  /**
   * Purges the run's record if it is still at `expectedRevision` (its history goes too), and drops
   * it from the view; REVISION_CONFLICT otherwise. Every other view drops it when its watch sees
   * the purge (record-retention.ts).
   */
  async remove(runId: string, expectedRevision: number): Promise<void> {
    try {
      await withoutStacks(() => this.kv.purge(KEY_PREFIX + runId, { previousSeq: expectedRevision }));
    } catch (error) {
      throw conflictOr(error, `run ${runId} changed since revision ${expectedRevision}`);
    }
    if (this.view.get(runId)?.revision === expectedRevision) this.view.delete(runId);
  }

  /** Reads the record from the server into the view (a decision must not wait for the watch). */
  async refresh(runId: string): Promise<Revisioned<T> | undefined> {
    const current = await this.get(runId);
    if (current) this.observe(current.record, current.revision);
    return current;
  }

  /** Replaces the record if it is still at `expectedRevision`; REVISION_CONFLICT otherwise. */
  async transition(runId: string, next: T, expectedRevision: number): Promise<number> {
    try {
      const revision = await this.writes.write(KEY_PREFIX + runId, JSON.stringify(next), expectedRevision);
      this.observe(next, revision);
      return revision;
    } catch (error) {
      throw conflictOr(error, `run ${runId} changed since revision ${expectedRevision}`);
    }
  }

  /** Applies `patch` to the run's record in every member's view, this one at once, and stores it nowhere (see the header). */
  tell(runId: string, patch: Partial<T>): void {
    this.amend(runId, patch);
    if (this.told.length === 0) setImmediate(() => this.publishTold());
    this.told.push({ runId, patch });
  }

  /** The newest record of a run as this member has seen it (no round trip). */
  seen(runId: string): Revisioned<T> | undefined {
    return this.view.get(runId);
  }

  /** Every record this member has seen. */
  all(): IterableIterator<Revisioned<T>> {
    return this.view.values();
  }

  onChange(listener: RecordListener<T>): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    this.stopWatch?.();
    this.hearing.unsubscribe();
    this.writes.close();
  }

  private publishTold(): void {
    const told = this.told;
    this.told = [];
    for (let from = 0; from < told.length; from += TOLD_PER_MESSAGE) {
      try {
        this.nc.publish(this.toldSubject, JSON.stringify(told.slice(from, from + TOLD_PER_MESSAGE)));
      } catch {
        return; // the connection is closed: the other views keep the record as stored
      }
    }
  }

  /** Told patches from any member (our own come back too, and change nothing the second time); anything else is ignored. */
  private heard(msg: Msg): void {
    let told: unknown;
    try {
      told = msg.json<unknown>();
    } catch {
      return;
    }
    if (!Array.isArray(told)) return;
    for (const entry of told as unknown[]) {
      const { runId, patch } = (entry ?? {}) as { runId?: unknown; patch?: unknown };
      if (typeof runId === 'string' && typeof patch === 'object' && patch !== null && !Array.isArray(patch)) this.amend(runId, patch as Partial<T>);
    }
  }

  /** The view's record of `runId` with `patch` applied, at the revision it has; nothing when the view lacks it or it says so already. */
  private amend(runId: string, patch: Partial<T>): void {
    const known = this.view.get(runId);
    if (!known || Object.entries(patch).every(([key, value]) => known.record[key as keyof T] === value)) return;
    const record = { ...known.record, ...patch };
    this.view.set(runId, { record, revision: known.revision });
    for (const listener of this.listeners) listener(record, known.revision);
  }

  private observe(record: T, revision: number): void {
    const known = this.view.get(record.runId);
    if (known && known.revision >= revision) return;
    this.view.set(record.runId, { record, revision });
    for (const listener of this.listeners) listener(record, revision);
  }

  /** Starts the watch and resolves once the records stored before it are in the view. */
  private async watch(): Promise<void> {
    const stored = (await this.kv.status()).values;
    const watcher = await this.kv.watch({ key: `${KEY_PREFIX}>` });
    this.stopWatch = () => watcher.stop();
    let ready!: () => void;
    const caughtUp = new Promise<void>((resolve) => (ready = resolve));
    if (stored === 0) ready();
    void (async () => {
      for await (const entry of watcher) {
        // Its own writes come back through the watch too: those (and any older revision) are
        // skipped on the revision alone, before the entry's headers are decoded for its operation.
        const runId = entry.key.slice(KEY_PREFIX.length);
        if ((this.view.get(runId)?.revision ?? 0) < entry.revision) {
          if (entry.operation === 'PUT') this.observe(entry.json<T>(), entry.revision);
          else this.view.delete(runId); // purged past retention (record-retention.ts)
        }
        if (entry.delta === 0) ready();
      }
      ready();
    })();
    await caughtUp;
  }
}

function conflictOr(error: unknown, message: string): unknown {
  const code = (error as { code?: unknown }).code;
  const text = error instanceof Error ? error.message : '';
  if (code === WRONG_LAST_SEQUENCE || /wrong last sequence/i.test(text)) return new SubagentError('REVISION_CONFLICT', message);
  return error;
}
