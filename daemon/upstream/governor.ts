/**
 * One model endpoint's governor: every request any child sends to the endpoint takes a permit
 * here first, so the daemon as a whole behaves as one good client of the provider.
 *
 * The limits themselves (adaptive concurrency, `Retry-After` pauses, `maxConcurrent`, sliding
 * `requestsPerMinute` and `tokensPerMinute` windows) are rules over one state (limit-state.ts).
 * A single daemon keeps that state here; in a cluster the pool keeps it (a `shared` limit,
 * kv-shared-limit.ts) and this governor asks the pool for each request, so three members together
 * stay under what one would.
 *
 * Waiters are served in fair order (fair-queue.ts: clients, then lineages). A wait ends early
 * when its signal aborts (a cancel), rejecting with the signal's reason.
 */
import { isoTime } from '../../common/iso-time.js';
import { FairQueue } from './fair-queue.js';
import { admit, markServing, newLimitState, settle, view, type LimitState, type LimitView, type Outcome, type WindowLimits } from './limit-state.js';
import type { SharedLimit, SharedPermit } from './shared-limit.js';

export { CEILING_HOLD_MS, INITIAL_LIMIT, MAX_PAUSE_MS, PUSHBACK_PAUSE_MS } from './limit-state.js';

export interface EndpointLimits extends WindowLimits {
  /** Most requests in flight at once; the adaptive limit never exceeds it. */
  readonly maxConcurrent?: number;
  /** Most requests sent in any 60 s. */
  readonly requestsPerMinute?: number;
  /** Most tokens (prompt + completion, from responses' usage) in any 60 s. */
  readonly tokensPerMinute?: number;
  /** How long a sent request may wait for its first data chunk (keep-alive comments included). */
  readonly firstByteTimeoutMs?: number;
}

/** Whose request it is, for fair order: the client (connection) and the lineage (root run). */
export interface Requester {
  readonly client: string;
  readonly lineage: string;
}

export type { Outcome };

export interface Permit {
  /** The response's first data arrived: the provider is serving this request. */
  streaming(): void;
  release(outcome: Outcome): void;
}

export interface EndpointStatus {
  readonly endpoint: string;
  /** The concurrency limit in force (adaptive, under `maxConcurrent`; the pool's in a cluster). */
  readonly limit: number;
  /** This daemon's requests in flight. */
  readonly inFlight: number;
  /** This daemon's requests waiting. */
  readonly waiting: number;
  /** 429 and 503 answers in the last minute. */
  readonly throttledLastMinute: number;
  /** Tokens used (or reserved by requests in flight) in the last minute. */
  readonly tokensPerMinute: number;
  /** Requests sent in the last minute. */
  readonly requestsPerMinute: number;
  /** When a `Retry-After` pause ends (ISO time), while one is in force. */
  readonly pausedUntil?: string;
  readonly maxConcurrent?: number;
  readonly requestsPerMinuteLimit?: number;
  readonly tokensPerMinuteLimit?: number;
}

/** A local permit is never lost to a dead holder: its lease is the process's life. */
const LOCAL_LEASE_MS = Number.MAX_SAFE_INTEGER / 2;

interface Waiter {
  readonly who: Requester;
  readonly signal: AbortSignal;
  resolve(permit: Permit): void;
  reject(reason: unknown): void;
  done: boolean;
  cleanup(): void;
}

export class EndpointGovernor {
  /** The endpoint's limit state (a single daemon's; unused when the pool holds it). */
  private readonly state: LimitState;
  private inFlight = 0;
  private serial = 0;
  private readonly queue = new FairQueue<Waiter>();
  private timer: NodeJS.Timeout | undefined;
  /** Set while a shared (cluster) permit is being asked for: one ask at a time keeps the order. */
  private asking = false;

  constructor(
    /** How the endpoint is named in events and status: its base URL (never the key). */
    readonly label: string,
    private limits: EndpointLimits = {},
    private readonly shared?: SharedLimit,
    private readonly now: () => number = Date.now,
  ) {
    this.state = newLimitState(limits);
  }

  /** New explicit limits (a reload); the adaptive state is kept. */
  configure(limits: EndpointLimits): void {
    this.limits = limits;
    this.pump();
  }

  get firstByteTimeoutMs(): number | undefined {
    return this.limits.firstByteTimeoutMs;
  }

  /**
   * A permit to send one request. `onQueued(position)` is called when the request has to wait
   * (position 1 is next). Rejects with `signal.reason` if the signal aborts while waiting.
   */
  acquire(who: Requester, signal: AbortSignal, onQueued?: (position: number) => void): Promise<Permit> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.queue.size === 0 && this.shared === undefined) {
      const id = this.nextId();
      if (admit(this.state, this.limits, this.now(), id, LOCAL_LEASE_MS) === 0) return Promise.resolve(this.localPermit(id));
    }
    return new Promise<Permit>((resolve, reject) => {
      const onAbort = (): void => {
        if (waiter.done) return;
        waiter.done = true;
        this.queue.remove(who.client, who.lineage, waiter);
        reject(signal.reason);
      };
      const waiter: Waiter = {
        who,
        signal,
        resolve,
        reject,
        done: false,
        cleanup: () => signal.removeEventListener('abort', onAbort),
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.queue.push(who.client, who.lineage, waiter);
      const position = this.queue.size;
      this.pump();
      if (!waiter.done && onQueued) {
        try {
          onQueued(position);
        } catch {
          // A listener must not break the wait.
        }
      }
    });
  }

  status(): EndpointStatus {
    const now = this.now();
    const seen: LimitView = (this.shared === undefined ? undefined : this.shared.view(this.limits)) ?? view(this.state, this.limits, now);
    return {
      endpoint: this.label,
      limit: seen.limit,
      inFlight: this.inFlight,
      waiting: this.queue.size + (this.asking ? 1 : 0), // the one asking the pool waits too
      throttledLastMinute: seen.throttledLastMinute,
      tokensPerMinute: seen.tokensPerMinute,
      requestsPerMinute: seen.requestsPerMinute,
      ...(seen.pausedUntil !== undefined && seen.pausedUntil > now && { pausedUntil: isoTime(seen.pausedUntil) }),
      ...(this.limits.maxConcurrent !== undefined && { maxConcurrent: this.limits.maxConcurrent }),
      ...(this.limits.requestsPerMinute !== undefined && { requestsPerMinuteLimit: this.limits.requestsPerMinute }),
      ...(this.limits.tokensPerMinute !== undefined && { tokensPerMinuteLimit: this.limits.tokensPerMinute }),
    };
  }

  /** Stops the re-check timer (the daemon is closing); waiters stay until their signals abort. */
  close(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private nextId(): string {
    this.serial += 1;
    return String(this.serial);
  }

  /** A permit of this daemon's own state. */
  private localPermit(id: string): Permit {
    this.inFlight += 1;
    let released = false;
    return {
      streaming: () => {
        if (!released) markServing(this.state, id);
      },
      release: (outcome) => {
        if (released) return;
        released = true;
        settle(this.state, this.limits, id, outcome, this.now());
        this.inFlight -= 1;
        this.pump();
      },
    };
  }

  /** A permit of the pool's state (cluster). */
  private pooledPermit(shared: SharedPermit): Permit {
    this.inFlight += 1;
    let released = false;
    return {
      streaming: () => {
        if (!released) shared.streaming();
      },
      release: (outcome) => {
        if (released) return;
        released = true;
        shared.release(outcome);
        this.inFlight -= 1;
        this.pump();
      },
    };
  }

  /** Lets waiters through while the endpoint allows; re-checks by timer when only time stands in the way. */
  private pump(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    while (this.queue.size > 0 && !this.asking) {
      if (this.shared !== undefined) {
        this.askShared(this.queue.shift()!, this.shared);
        return;
      }
      const id = this.nextId();
      const wait = admit(this.state, this.limits, this.now(), id, LOCAL_LEASE_MS);
      if (wait === Number.POSITIVE_INFINITY) return; // a release pumps again
      if (wait > 0) {
        this.timer = setTimeout(() => this.pump(), Math.ceil(wait));
        this.timer.unref();
        return;
      }
      this.hand(this.queue.shift()!, this.localPermit(id));
    }
  }

  /** The pool's permit (cluster); one ask at a time, so fair order holds pool-wide for this member. */
  private askShared(waiter: Waiter, shared: SharedLimit): void {
    this.asking = true;
    void shared.acquire(waiter.signal, this.limits).then(
      (permit) => {
        this.asking = false;
        this.hand(waiter, this.pooledPermit(permit));
        this.pump();
      },
      (error: unknown) => {
        this.asking = false;
        if (!waiter.done) {
          waiter.done = true;
          waiter.cleanup();
          waiter.reject(waiter.signal.aborted ? waiter.signal.reason : error);
        }
        this.pump();
      },
    );
  }

  private hand(waiter: Waiter, permit: Permit): void {
    if (waiter.done) {
      permit.release({ kind: 'unsent' });
      return;
    }
    waiter.done = true;
    waiter.cleanup();
    waiter.resolve(permit);
  }
}
