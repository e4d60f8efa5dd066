/**
 * One model endpoint's governor: every request any child sends to the endpoint takes a permit
 * here first, so the daemon as a whole behaves as one good client of the provider.
 *
 * - Concurrency is adaptive (AIMD). It starts at `maxConcurrent` when the config names one, else
 *   at INITIAL_LIMIT, and grows while it is used: by half a request per success until the
 *   endpoint first pushes back (a gentle slow start: it overshoots by half, not double), then by
 *   1/limit per success. A 429 or 503 cuts it to what the provider showed it serves: the most
 *   responses streaming at once between the push-back and the end of the pause it brings (at
 *   least a 10% cut, half when nothing streamed), once per round of requests sent at one limit.
 *   The cut waits for the pause's end (nothing is sent meanwhile) because requests sent with the
 *   refused one get their answers only just after it. The cut level is a ceiling for CEILING_HOLD_MS, so a
 *   provider with a fixed stream cap sees one probe a minute, not a 429 every few requests.
 * - `Retry-After` (or PUSHBACK_PAUSE_MS without one) pauses the whole endpoint: no request is
 *   sent by any child until it has passed.
 * - Explicit limits from the config: `maxConcurrent` caps the adaptive limit,
 *   `requestsPerMinute` and `tokensPerMinute` are sliding one-minute windows (tokens counted from
 *   the responses' usage).
 * - Waiters are served in fair order (fair-queue.ts: clients, then lineages). A wait ends early
 *   when its signal aborts (a cancel), rejecting with the signal's reason.
 * - In a cluster, a `shared` limit (shared-limit.ts) is asked too, so the pool as a whole keeps
 *   the endpoint's concurrency, request rate and pauses (kv-shared-limit.ts).
 */
import { isoTime } from '../../common/iso-time.js';
import { FairQueue } from './fair-queue.js';
import type { Outcome, SharedLimit, SharedPermit } from './shared-limit.js';

export interface EndpointLimits {
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
  /** The concurrency limit in force (adaptive, under `maxConcurrent`). */
  readonly limit: number;
  readonly inFlight: number;
  readonly waiting: number;
  /** 429 and 503 answers in the last minute. */
  readonly throttledLastMinute: number;
  /** Tokens used in the last minute. */
  readonly tokensPerMinute: number;
  /** Requests sent in the last minute. */
  readonly requestsPerMinute: number;
  /** When a `Retry-After` pause ends (ISO time), while one is in force. */
  readonly pausedUntil?: string;
  readonly maxConcurrent?: number;
  readonly requestsPerMinuteLimit?: number;
  readonly tokensPerMinuteLimit?: number;
}

export const INITIAL_LIMIT = 4;
export const CEILING_HOLD_MS = 60_000;
export const PUSHBACK_PAUSE_MS = 1_000;
/** The longest single `Retry-After` pause honoured (a provider asking for an hour gets a minute, then a probe). */
export const MAX_PAUSE_MS = 60_000;
const WINDOW_MS = 60_000;
/** The least a push-back holds the endpoint (a `Retry-After: 0` too): the answers to requests sent with it arrive meanwhile. */
const MIN_CUT_SETTLE_MS = 100;

interface Waiter {
  readonly who: Requester;
  readonly signal: AbortSignal;
  resolve(permit: Permit): void;
  reject(reason: unknown): void;
  done: boolean;
  cleanup(): void;
}

export class EndpointGovernor {
  private limit: number;
  private inFlight = 0;
  /** Permits whose response has begun: what the provider is serving. */
  private serving = 0;
  /** A cut decided by a push-back, applied when its pause ends: the limit then, and the most served since. */
  private pendingCut: { from: number; peak: number } | undefined;
  /** Each decrease starts a new round; push-back from requests sent before it does not cut again. */
  private round = 0;
  private everThrottled = false;
  /** The level of the last cut, which the limit does not pass until `until`. */
  private ceiling: { level: number; until: number } | undefined;
  private pausedUntil = 0;
  private readonly queue = new FairQueue<Waiter>();
  private readonly sent: number[] = [];
  private readonly tokens: Array<{ at: number; tokens: number }> = [];
  private readonly throttles: number[] = [];
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
    this.limit = limits.maxConcurrent ?? INITIAL_LIMIT;
  }

  /** New explicit limits (a reload); the adaptive state is kept. */
  configure(limits: EndpointLimits): void {
    this.limits = limits;
    if (limits.maxConcurrent !== undefined) this.limit = Math.min(this.limit, limits.maxConcurrent);
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
    if (this.queue.size === 0 && !this.asking && this.blockedFor() === 0 && this.shared === undefined) {
      return Promise.resolve(this.grant(undefined));
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
    this.trim(now);
    this.applyCut(now);
    return {
      endpoint: this.label,
      limit: Math.floor(this.limit),
      inFlight: this.inFlight,
      waiting: this.queue.size,
      throttledLastMinute: this.throttles.length,
      tokensPerMinute: this.tokens.reduce((sum, t) => sum + t.tokens, 0),
      requestsPerMinute: this.sent.length,
      ...(this.pausedUntil > now && { pausedUntil: isoTime(this.pausedUntil) }),
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

  private grant(sharedPermit: SharedPermit | undefined): Permit {
    const round = this.round;
    this.inFlight += 1;
    this.sent.push(this.now());
    let released = false;
    let serving = false;
    return {
      streaming: () => {
        if (serving || released) return;
        serving = true;
        this.serving += 1;
        if (this.pendingCut !== undefined) this.pendingCut.peak = Math.max(this.pendingCut.peak, this.serving);
      },
      release: (outcome) => {
        if (released) return;
        released = true;
        sharedPermit?.release(outcome);
        if (serving) this.serving -= 1;
        this.settle(outcome, round);
        this.inFlight -= 1;
        this.pump();
      },
    };
  }

  private settle(outcome: Outcome, round: number): void {
    const now = this.now();
    const max = this.limits.maxConcurrent ?? Number.POSITIVE_INFINITY;
    if (outcome.kind === 'ok') {
      if (outcome.tokens !== undefined && outcome.tokens > 0) this.tokens.push({ at: now, tokens: outcome.tokens });
      // Grow only a limit that is in use (idle capacity proves nothing), and not while a cut is pending.
      if (this.inFlight < Math.floor(this.limit) || this.pendingCut !== undefined) return;
      const cap = this.ceiling !== undefined && this.ceiling.until > now ? Math.min(max, this.ceiling.level) : max;
      const step = this.everThrottled ? 1 / this.limit : 0.5;
      this.limit = Math.max(this.limit, Math.min(cap, this.limit + step));
      return;
    }
    if (outcome.kind !== 'throttled') return;
    this.throttles.push(now);
    this.everThrottled = true;
    const pause = Math.min(MAX_PAUSE_MS, outcome.retryAfterMs ?? PUSHBACK_PAUSE_MS);
    this.pausedUntil = Math.max(this.pausedUntil, now + pause);
    // Push-back from requests sent before the last cut says nothing new about the limit.
    if (round !== this.round) return;
    this.round += 1;
    this.pendingCut ??= { from: this.limit, peak: this.serving };
    this.pausedUntil = Math.max(this.pausedUntil, now + MIN_CUT_SETTLE_MS);
  }

  /** Applies a pending cut once its pause is over. */
  private applyCut(now: number): void {
    const pending = this.pendingCut;
    if (pending === undefined || this.pausedUntil > now) return;
    this.pendingCut = undefined;
    const cut = pending.peak > 0 ? Math.min(pending.peak, Math.floor(pending.from * 0.9)) : Math.floor(pending.from / 2);
    this.limit = Math.max(1, cut);
    this.ceiling = { level: this.limit, until: now + CEILING_HOLD_MS };
  }

  /** Milliseconds until a request may be sent (0: now; Infinity: when one in flight ends). */
  private blockedFor(): number {
    const now = this.now();
    this.trim(now);
    this.applyCut(now);
    let wait = Math.max(0, this.pausedUntil - now);
    if (this.inFlight >= Math.floor(this.limit)) wait = Math.max(wait, Number.POSITIVE_INFINITY);
    const rpm = this.limits.requestsPerMinute;
    if (rpm !== undefined && this.sent.length >= rpm) wait = Math.max(wait, this.sent[this.sent.length - rpm]! + WINDOW_MS - now);
    const tpm = this.limits.tokensPerMinute;
    if (tpm !== undefined) {
      let used = this.tokens.reduce((sum, t) => sum + t.tokens, 0);
      for (const t of this.tokens) {
        if (used < tpm) break;
        used -= t.tokens;
        wait = Math.max(wait, t.at + WINDOW_MS - now);
      }
    }
    return wait;
  }

  private trim(now: number): void {
    const from = now - WINDOW_MS;
    while (this.sent.length > 0 && this.sent[0]! <= from) this.sent.shift();
    while (this.tokens.length > 0 && this.tokens[0]!.at <= from) this.tokens.shift();
    while (this.throttles.length > 0 && this.throttles[0]! <= from) this.throttles.shift();
  }

  /** Lets waiters through while the endpoint allows; re-checks by timer when only time stands in the way. */
  private pump(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    while (this.queue.size > 0 && !this.asking) {
      const wait = this.blockedFor();
      if (wait === Number.POSITIVE_INFINITY) return; // a release pumps again
      if (wait > 0) {
        this.timer = setTimeout(() => this.pump(), Math.ceil(wait));
        this.timer.unref();
        return;
      }
      const waiter = this.queue.shift()!;
      if (this.shared === undefined) {
        this.hand(waiter, undefined);
        continue;
      }
      this.askShared(waiter);
    }
  }

  /** The pool's permit first (cluster), then ours; one ask at a time, so fair order holds pool-wide for this member. */
  private askShared(waiter: Waiter): void {
    this.asking = true;
    this.inFlight += 1; // held while asking, so the local limit counts it
    void this.shared!.acquire(waiter.signal).then(
      (permit) => {
        this.inFlight -= 1;
        this.asking = false;
        this.hand(waiter, permit);
        this.pump();
      },
      (error: unknown) => {
        this.inFlight -= 1;
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

  private hand(waiter: Waiter, sharedPermit: SharedPermit | undefined): void {
    if (waiter.done) {
      sharedPermit?.release({ kind: 'other' });
      return;
    }
    waiter.done = true;
    waiter.cleanup();
    waiter.resolve(this.grant(sharedPermit));
  }
}
