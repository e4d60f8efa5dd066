/**
 * An endpoint's limits held for a whole cluster: the endpoint's limit state (limit-state.ts) lives
 * in one JetStream KV key per endpoint (its identity hashed: never the key), changed only by
 * compare-and-set, so every rule a single daemon keeps holds for the pool:
 * - the adaptive concurrency limit: a 429/503 seen by any member cuts it for all, successes probe
 *   it back up; `maxConcurrent` caps it. Each request in flight is a leased holder in the key,
 *   renewed while it lives; a lease (LEASE_MS) bounds what a member that died holding permits keeps.
 * - a `Retry-After` (or any 429/503): the pause is written into the key; no member sends before it ends.
 * - `requestsPerMinute` and `tokensPerMinute`: sliding windows of the pool's sends and tokens
 *   (a request reserves tokens at its send, its usage replaces the reservation at its end).
 * A member writes the key three times per request (its send, its first data, its end) and polls it
 * while the pool is full.
 */
import { Kvm, type KV } from '@nats-io/kv';
import { createHash, randomUUID } from '../../common/node-builtins.js';
import { admit, markServing, newLimitState, settle, view, type Holder, type LimitState, type WindowLimits } from './limit-state.js';
import type { SharedLimit, SharedPermit } from './shared-limit.js';

/**
 * A held permit's lease, renewed every RENEW_MS while its request lives: a member that dies (its
 * requests with it) frees its permits within LEASE_MS, and the pool's limit is not held by the dead.
 */
export const LEASE_MS = 30_000;
const RENEW_MS = 10_000;
/** How often a member that found the pool full looks again. */
const POLL_MS = 50;
/** The longest sleep while only time (a pause, a window) stands in the way: a cancel is heard sooner. */
const MAX_SLEEP_MS = 500;

/** What an edit decides: a new state to write, or how long to wait before looking again. */
type Decision = { readonly next: LimitState } | { readonly waitMs: number };

export class KvPermits {
  /** The state each key had at this member's last read or write (for status). */
  private readonly seen = new Map<string, LimitState>();
  /** One member's writes to one key go in order (a release lands before the next ask). */
  private readonly tails = new Map<string, Promise<unknown>>();
  /** The permits this member holds, by key, with the limits they were taken under: their leases are renewed. */
  private readonly held = new Map<string, { ids: Set<string>; limits: WindowLimits }>();
  private renewer: NodeJS.Timeout | undefined;

  private constructor(private readonly kv: KV) {}

  /** Opens (or creates) the bucket; members starting together may race to create it. */
  static async open(js: ConstructorParameters<typeof Kvm>[0], bucket: string): Promise<KvPermits> {
    const kvm = new Kvm(js);
    const kv = await kvm.create(bucket, { history: 1 } as never).catch(() => kvm.open(bucket));
    return new KvPermits(kv);
  }

  /** The pool-wide limit of one endpoint. */
  limit(endpointId: string): SharedLimit {
    const key = `ep_${createHash('sha256').update(endpointId).digest('hex').slice(0, 32)}`;
    return {
      acquire: (signal, limits) => this.acquire(key, limits, signal),
      view: (limits) => {
        void this.change(key, limits, () => ({ waitMs: 0 })).catch(() => undefined); // a fresher look for the next call
        const state = this.seen.get(key);
        return state === undefined ? undefined : view(structuredClone(state), limits, Date.now());
      },
    };
  }

  private async acquire(key: string, limits: WindowLimits, signal: AbortSignal): Promise<SharedPermit> {
    const id = randomUUID();
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const decision = await this.change(key, limits, (state, now) => {
        const wait = admit(state, limits, now, id, LEASE_MS);
        return wait === 0 ? { next: state } : { waitMs: Math.min(MAX_SLEEP_MS, wait === Number.POSITIVE_INFINITY ? POLL_MS : wait) };
      });
      if ('waitMs' in decision) {
        await sleep(decision.waitMs, signal);
        continue;
      }
      this.hold(key, id, limits);
      let released = false;
      const write = (edit: (state: LimitState, now: number) => void): void => {
        void this.change(key, limits, (state, now) => {
          edit(state, now);
          return { next: state };
        }).catch(() => undefined); // the lease bounds what a lost write keeps
      };
      return {
        streaming: () => {
          if (!released) write((state) => markServing(state, id));
        },
        release: (outcome) => {
          if (released) return;
          released = true;
          this.unhold(key, id);
          write((state, now) => settle(state, limits, id, outcome, now));
        },
      };
    }
  }

  private hold(key: string, id: string, limits: WindowLimits): void {
    const entry = this.held.get(key) ?? { ids: new Set<string>(), limits };
    entry.ids.add(id);
    entry.limits = limits;
    this.held.set(key, entry);
    if (this.renewer === undefined) {
      this.renewer = setInterval(() => this.renew(), RENEW_MS);
      this.renewer.unref();
    }
  }

  private unhold(key: string, id: string): void {
    const entry = this.held.get(key);
    entry?.ids.delete(id);
    if (entry?.ids.size === 0) this.held.delete(key);
    if (this.held.size === 0 && this.renewer !== undefined) {
      clearInterval(this.renewer);
      this.renewer = undefined;
    }
  }

  /** One write per key extends the leases of every permit this member still holds there. */
  private renew(): void {
    for (const [key, { ids, limits }] of this.held) {
      void this.change(key, limits, (state, now) => {
        for (const id of ids) {
          const holder = state.h[id];
          if (holder !== undefined) holder.u = now + LEASE_MS;
        }
        return { next: state };
      }).catch(() => undefined); // the next renewal tries again, well within the lease
    }
  }

  /** Applies `edit` to the key's live state by compare-and-set, after this member's earlier edits of the key. */
  private change(key: string, limits: WindowLimits, edit: (state: LimitState, now: number) => Decision): Promise<Decision> {
    const run = (this.tails.get(key) ?? Promise.resolve()).catch(() => undefined).then(() => this.casLoop(key, limits, edit));
    this.tails.set(key, run);
    void run.finally(() => {
      if (this.tails.get(key) === run) this.tails.delete(key);
    }).catch(() => undefined);
    return run;
  }

  private async casLoop(key: string, limits: WindowLimits, edit: (state: LimitState, now: number) => Decision): Promise<Decision> {
    for (let attempt = 0; ; attempt++) {
      const entry = await this.kv.get(key);
      const now = Date.now();
      const state = readState(entry !== null && entry.operation === 'PUT' ? entry.json<unknown>() : undefined, limits, now);
      const decision = edit(state, now);
      if (!('next' in decision)) {
        this.seen.set(key, state);
        return decision;
      }
      try {
        if (entry === null) await this.kv.create(key, JSON.stringify(decision.next));
        else await this.kv.update(key, JSON.stringify(decision.next), entry.revision);
        this.seen.set(key, decision.next);
        return decision;
      } catch (error) {
        // Another member changed the key since we read it: read again (a failure that persists is no race).
        if (attempt >= 50) throw error;
      }
    }
  }
}

/** The key's value as a limit state; an older value (holders only, or holders and a minute counter) keeps its holders and pause. */
function readState(value: unknown, limits: WindowLimits, now: number): LimitState {
  const state = newLimitState(limits);
  if (value === null || typeof value !== 'object') return state;
  const raw = value as Partial<LimitState> & Record<string, unknown>;
  if (typeof raw.limit === 'number' && raw.h !== undefined && raw.w !== undefined) return raw as LimitState;
  const holders = (raw.h !== undefined && typeof raw.h === 'object' ? raw.h : raw) as Record<string, unknown>;
  for (const [id, until] of Object.entries(holders)) {
    if (typeof until === 'number' && until > now) state.h[id] = { u: until, r: -1, b: 0, k: 0 } satisfies Holder;
  }
  if (typeof raw.pausedUntil === 'number') state.pausedUntil = raw.pausedUntil;
  return state;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
