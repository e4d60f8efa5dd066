/**
 * An endpoint's limits held for a whole cluster, in one JetStream KV key per endpoint (its identity
 * hashed: never the key), changed only by compare-and-set:
 * - `maxConcurrent`: leased permits. A member takes one by writing itself into the key's holders
 *   while fewer than `max` hold one, and removes it when the request ends. A lease (LEASE_MS)
 *   bounds what a member that died holding permits keeps: past it, its permits no longer count.
 * - `requestsPerMinute`: a counter of the requests the pool sent in the current calendar minute
 *   (a fixed window, reset when the minute turns); a member sends only while it is below the limit.
 * - a `Retry-After` (or any 429/503): the pause is written into the key, and every member waits
 *   it out before its next request to the endpoint.
 * The adaptive limit and `tokensPerMinute` stay per member (governor.ts).
 */
import { Kvm, type KV } from '@nats-io/kv';
import { createHash, randomUUID } from '../../common/node-builtins.js';
import type { EndpointLimits } from './governor.js';
import type { SharedLimit, SharedPermit } from './shared-limit.js';

/** Longer than a model step may take (10 min by default), so a live request never loses its permit. */
export const LEASE_MS = 11 * 60_000;
/** How often a member that found the pool full looks again. */
const POLL_MS = 50;
/** The longest sleep while only time (a pause, the minute window) stands in the way: a cancel is heard sooner. */
const MAX_SLEEP_MS = 500;
/** A pause pushed back longer than this is capped (as the governor's own). */
const MAX_PAUSE_MS = 60_000;
/** A push-back without Retry-After pauses the pool this long. */
const PUSHBACK_PAUSE_MS = 1_000;
const MINUTE_MS = 60_000;

type Holders = Record<string, number>;

/** The key's value. Before pool-wide pauses and RPM it was the holders alone (still read). */
interface PoolState {
  h: Holders;
  /** Epoch ms until which no member sends (a Retry-After). */
  pausedUntil?: number;
  /** The calendar minute (epoch ms / 60 000) `sent` counts. */
  minute?: number;
  sent?: number;
}

/** What an edit decides: a new state to write, nothing to write (go), or how long to wait before looking again. */
type Decision = { readonly next: PoolState } | { readonly waitMs: number } | { readonly unchanged: true };

export class KvPermits {
  private constructor(private readonly kv: KV) {}

  /** Opens (or creates) the bucket; members starting together may race to create it. */
  static async open(js: ConstructorParameters<typeof Kvm>[0], bucket: string): Promise<KvPermits> {
    const kvm = new Kvm(js);
    const kv = await kvm.create(bucket, { history: 1 } as never).catch(() => kvm.open(bucket));
    return new KvPermits(kv);
  }

  /** The pool-wide limits of one endpoint: permits (`maxConcurrent`), the minute's requests (`requestsPerMinute`), pauses. */
  limit(endpointId: string, limits: Pick<EndpointLimits, 'maxConcurrent' | 'requestsPerMinute'>): SharedLimit {
    const key = `ep_${createHash('sha256').update(endpointId).digest('hex').slice(0, 32)}`;
    return { acquire: (signal) => this.acquire(key, limits, signal) };
  }

  private async acquire(key: string, limits: Pick<EndpointLimits, 'maxConcurrent' | 'requestsPerMinute'>, signal: AbortSignal): Promise<SharedPermit> {
    const id = randomUUID();
    const holds = limits.maxConcurrent !== undefined;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const decision = await this.change(key, (state, now) => decide(state, now, id, limits));
      if (!('waitMs' in decision)) {
        return {
          release: (outcome) => {
            const throttled = outcome.kind === 'throttled';
            if (!holds && !throttled) return;
            const pause = throttled ? Math.min(MAX_PAUSE_MS, outcome.retryAfterMs ?? PUSHBACK_PAUSE_MS) : 0;
            void this.change(key, (state, now) => {
              delete state.h[id];
              if (throttled) state.pausedUntil = Math.max(state.pausedUntil ?? 0, now + pause);
              return { next: state };
            }).catch(() => undefined);
          },
        };
      }
      await sleep(decision.waitMs, signal);
    }
  }

  /** Applies `edit` to the key's live state by compare-and-set, retrying on conflict; a wait is returned unwritten. */
  private async change(key: string, edit: (state: PoolState, now: number) => Decision): Promise<Decision> {
    for (let attempt = 0; ; attempt++) {
      const entry = await this.kv.get(key);
      const now = Date.now();
      const state = readState(entry !== null && entry.operation === 'PUT' ? entry.json<unknown>() : undefined, now);
      const decision = edit(state, now);
      if (!('next' in decision)) return decision;
      try {
        if (entry === null) await this.kv.create(key, JSON.stringify(decision.next));
        else await this.kv.update(key, JSON.stringify(decision.next), entry.revision);
        return decision;
      } catch (error) {
        // Another member changed the key since we read it: read again (a failure that persists is no race).
        if (attempt >= 50) throw error;
      }
    }
  }
}

function decide(state: PoolState, now: number, id: string, limits: Pick<EndpointLimits, 'maxConcurrent' | 'requestsPerMinute'>): Decision {
  if ((state.pausedUntil ?? 0) > now) return { waitMs: Math.min(MAX_SLEEP_MS, state.pausedUntil! - now) };
  const minute = Math.floor(now / MINUTE_MS);
  const sent = state.minute === minute ? (state.sent ?? 0) : 0;
  if (limits.requestsPerMinute !== undefined && sent >= limits.requestsPerMinute) return { waitMs: Math.min(MAX_SLEEP_MS, (minute + 1) * MINUTE_MS - now) };
  if (limits.maxConcurrent !== undefined) {
    if (Object.keys(state.h).length >= limits.maxConcurrent) return { waitMs: POLL_MS };
    state.h[id] = now + LEASE_MS;
  } else if (limits.requestsPerMinute === undefined) return { unchanged: true }; // nothing counted: a read for the pause only
  if (limits.requestsPerMinute !== undefined) {
    state.minute = minute;
    state.sent = sent + 1;
  }
  return { next: state };
}

/** The key's value with expired leases dropped (the older holders-only form included). */
function readState(value: unknown, now: number): PoolState {
  const raw = (value ?? {}) as Partial<PoolState> & Record<string, unknown>;
  const old = raw.h === undefined || typeof raw.h !== 'object';
  const holders = (old ? raw : raw.h) as Record<string, unknown>;
  const h: Holders = {};
  for (const [id, until] of Object.entries(holders)) if (typeof until === 'number' && until > now) h[id] = until;
  if (old) return { h };
  return { h, ...(raw.pausedUntil !== undefined && { pausedUntil: raw.pausedUntil }), ...(raw.minute !== undefined && { minute: raw.minute, sent: raw.sent ?? 0 }) };
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
