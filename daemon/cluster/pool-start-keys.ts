/**
 * The pool's idempotency keys: a JetStream KV bucket (`<PREFIX>_KEYS`) whose entries live for
 * the keys' window (the bucket's TTL, limits.idempotencyWindowMs), keyed by the sha256 of the
 * owner (the start's parent session) and the key. So a start repeated through any member finds
 * the run the first one made (the seam: idempotency/start-keys.ts).
 *
 * An entry is `{runId, member, runToken}` from the moment a start claims the key
 * (create-if-absent: of members racing on one key exactly one creates it): the token is minted
 * before the claim, so a start's key costs this one write. The token is handed out only once
 * the run's record carries its hash (the start was answered). A repeat that finds:
 * - the run answered: answers that run (the service attaches it to the asking connection by its token);
 * - the run not answered yet, and the start is still being made (its front lives, or its record
 *   is queued or running): waits, re-reading every RECHECK_MS, until its start's signal ends the wait;
 * - the start parked (its front died with it queued: parked-starts.ts): takes the entry over by
 *   compare-and-set and adopts the parked start, which runs under its first run id;
 * - the start never reached the pool (its front died before queueing it) or failed unstarted:
 *   takes the entry over and starts afresh.
 * A start that began its child but whose front died before answering cannot be answered (its
 * token died with the front): the repeat is refused with RUN_STATE rather than run twice.
 */
import { Kvm, type KV } from '@nats-io/kv';
import { createHash } from '../../common/node-builtins.js';
import { SubagentError } from '../../protocol/index.js';
import type { FirstStart, KeyClaim, KeyedRun, StartKeyStore } from '../idempotency/start-keys.js';
import type { ClusterRun } from './cluster-run.js';
import type { MemberRelay } from './member-relay.js';
import { KvWrites } from './kv-writes.js';
import { withoutStacks, type NatsLink } from './nats-link.js';
import type { ClusterNames } from './names.js';
import type { RunRecords } from './run-records.js';

interface KeyEntry {
  readonly runId: string;
  /** The member the start under this key is being made through. */
  readonly member: string;
  /** The token its start is answered with (written with the claim; absent in an entry a member of an earlier version claimed). */
  readonly runToken?: string;
}

/** How often a repeat re-reads a key whose start is still being made. */
const RECHECK_MS = 250;
/** JetStream's "wrong last sequence": the key changed (or exists, for create). */
const WRONG_LAST_SEQUENCE = 10071;

type Verdict = 'wait' | 'adopt' | 'replace';

export class PoolStartKeys implements StartKeyStore {
  private constructor(
    private readonly kv: KV,
    /** Claims and take-overs, straight to the bucket's subjects (kv-writes.ts). */
    private readonly writes: KvWrites,
    private readonly records: RunRecords<ClusterRun>,
    private readonly relay: MemberRelay,
    /** Parked starts this member is adopting: the stand-in re-queues them instead of writing a record (cluster-provider.ts). */
    private readonly adoptions: Set<string>,
  ) {}

  static async open(link: NatsLink, names: ClusterNames, windowMs: number, records: RunRecords<ClusterRun>, relay: MemberRelay, adoptions: Set<string>): Promise<PoolStartKeys> {
    const kvm = new Kvm(link.js);
    // As with the run records: when another member created the bucket first, open that one.
    const kv = await kvm
      .create(names.keysBucket, { history: 1, ttl: windowMs, storage: 'file' } as never)
      .catch(async (error: unknown) => (await link.jsm.streams.info(`KV_${names.keysBucket}`).catch(() => Promise.reject(error)), kvm.open(names.keysBucket)));
    return new PoolStartKeys(kv, new KvWrites(link.nc, names.keysBucket), records, relay, adoptions);
  }

  async claim(owner: string, key: string, runId: string, signal: AbortSignal, runToken?: string): Promise<KeyClaim> {
    const name = `k.${createHash('sha256').update(`${owner}\n${key}`).digest('hex')}`;
    const mine: KeyEntry = { runId, member: this.relay.memberId, ...(runToken !== undefined && { runToken }) };
    for (;;) {
      signal.throwIfAborted();
      const created = await this.write(name, mine, 0);
      if (created !== undefined) return this.first(name, created, mine);
      const stored = await this.unavailable(() => this.kv.get(name));
      if (!stored) continue; // expired meanwhile: create it
      if (stored.operation !== 'PUT') {
        // A failed start's removal marker: the key is free, claimed over the marker.
        const claimed = await this.write(name, mine, stored.revision);
        if (claimed !== undefined) return this.first(name, claimed, mine);
        continue;
      }
      const entry = stored.json<KeyEntry>();
      const record = (await this.unavailable(() => this.records.refresh(entry.runId)))?.record;
      // Answered: its record has the token's hash (an earlier version wrote the token only then).
      if (entry.runToken !== undefined && record?.tokenHash !== undefined) return { run: { runId: entry.runId, runToken: entry.runToken } };
      const verdict = await this.judge(entry, record);
      if (verdict !== 'wait') {
        const next: KeyEntry = verdict === 'adopt' ? { ...mine, runId: entry.runId } : mine;
        const taken = await this.write(name, next, stored.revision);
        if (taken !== undefined) {
          if (verdict === 'adopt') this.adoptions.add(next.runId);
          return this.first(name, taken, next);
        }
        continue; // another member took it over first: read again
      }
      await new Promise((resolve) => setTimeout(resolve, RECHECK_MS));
    }
  }

  /** What a repeat does about a key whose start was not answered (yet). */
  private async judge(entry: KeyEntry, record: ClusterRun | undefined): Promise<Verdict> {
    if (!record) return (await this.relay.alive(entry.member)) ? 'wait' : 'replace';
    if (record.state === 'queued') return record.parked !== undefined ? 'adopt' : 'wait';
    if (record.childId === undefined) return record.state === 'running' ? 'wait' : 'replace';
    if (await this.relay.alive(entry.member)) return 'wait'; // answered in a moment: the token comes
    throw new SubagentError(
      'RUN_STATE',
      `the start under this idempotency key began run ${entry.runId}, but its front member ${entry.member} died before answering: its token is lost, and the task is not started again`,
    );
  }

  private first(name: string, revision: number, entry: KeyEntry): FirstStart {
    return {
      runId: entry.runId,
      first: (run: KeyedRun | undefined) => {
        this.adoptions.delete(entry.runId);
        // Made with the token claimed: the entry already says all a repeat needs.
        if (run && run.runId === entry.runId && run.runToken === entry.runToken) return;
        const write = run
          ? this.writes.write(name, JSON.stringify({ ...entry, runToken: run.runToken } satisfies KeyEntry), revision)
          : this.kv.delete(name, { previousSeq: revision });
        void write.catch(() => undefined);
      },
    };
  }

  /** Writes `entry` at `name` if its revision is still `expected`: the revision written, or undefined when the key changed meanwhile. */
  private async write(name: string, entry: KeyEntry, expected: number): Promise<number | undefined> {
    try {
      return await this.writes.write(name, JSON.stringify(entry), expected);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (code === WRONG_LAST_SEQUENCE || /wrong last sequence|key exists/i.test(error instanceof Error ? error.message : '')) return undefined;
      throw unavailable(error);
    }
  }

  private async unavailable<T>(call: () => Promise<T>): Promise<T> {
    return withoutStacks(call).catch((error: unknown) => Promise.reject(unavailable(error)));
  }
}

function unavailable(error: unknown): SubagentError {
  if (error instanceof SubagentError) return error;
  return new SubagentError('CLUSTER_UNAVAILABLE', `the pool's idempotency keys cannot be read: ${error instanceof Error ? error.message : String(error)}`);
}
