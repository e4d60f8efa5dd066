/**
 * The rules of one endpoint's limits, over one plain JSON state. A single daemon's governor keeps
 * the state in memory (governor.ts); a cluster keeps it in one JetStream KV key per endpoint and
 * changes it by compare-and-set (kv-shared-limit.ts), so the same rules hold for the whole pool.
 *
 * - Concurrency is adaptive (AIMD). It starts at `maxConcurrent` when the config names one, else
 *   at INITIAL_LIMIT, and grows while it is used: by half a request per success until the
 *   endpoint first pushes back (a gentle slow start: it overshoots by half, not double), then by
 *   1/limit per success. A 429 or 503 cuts it to what the provider showed it serves: the most
 *   responses streaming at once between the push-back and the end of the pause it brings (at
 *   least a 10% cut, half when nothing streamed), once per round of requests sent at one limit.
 *   The cut waits for the pause's end (nothing is sent meanwhile) because requests sent with the
 *   refused one get their answers only just after it. The cut level is a ceiling for
 *   CEILING_HOLD_MS, so a provider with a fixed stream cap sees one probe a minute, not a 429
 *   every few requests.
 * - `Retry-After` (or PUSHBACK_PAUSE_MS without one) pauses the whole endpoint.
 * - `requestsPerMinute` and `tokensPerMinute` are sliding windows of one-second buckets, counted
 *   when a request is sent (as a provider counts on arrival). A request counts from its send for
 *   at least WINDOW_MS + SLACK_MS (the slack covers the way from permit to provider), so no 60 s
 *   at the provider holds more than the limit, at a minute's turn or anywhere else.
 * - Tokens are known only from a response's usage, so a request reserves the largest usage seen
 *   in the window (or, before any usage is known, goes alone as a probe); its response's usage
 *   then replaces the reservation in the bucket of its send.
 */

/** A request in flight (a permit held). */
export interface Holder {
  /** Lease end: past it the request no longer counts (a cluster member died holding it). */
  u: number;
  /** The round (see `round`) it was sent in. */
  r: number;
  /** The bucket (epoch second) its send was counted in, and the tokens it reserved there. */
  b: number;
  k: number;
  /** 1: sent before any usage was known (a probe). */
  p?: 1;
  /** 1: its response streams (the provider serves it). */
  s?: 1;
}

/** One second of the window. */
export interface Bucket {
  /** Requests sent. */
  n: number;
  /** Tokens: the usage of those that ended, the reservations of the rest. */
  t: number;
  /** The largest usage of one response among them. */
  m: number;
  /** Push-backs (429/503) answered. */
  x: number;
}

export interface LimitState {
  h: Record<string, Holder>;
  /** Buckets by epoch second. */
  w: Record<string, Bucket>;
  /** The adaptive concurrency limit (fractional: it grows by fractions). */
  limit: number;
  /** Each cut starts a new round; push-back from requests sent before it does not cut again. */
  round: number;
  /** 1 once the endpoint has pushed back (growth slows to 1/limit). */
  thr?: 1;
  /** The level of the last cut, which the limit does not pass until `until`. */
  ceil?: { level: number; until: number };
  /** A cut decided by a push-back, applied when its pause ends: the limit then, and the most served since. */
  cut?: { from: number; peak: number };
  /** Epoch ms until which nothing is sent (a Retry-After). */
  pausedUntil?: number;
  /** The last response usage seen, the reservation when the window holds none. */
  e?: number;
}

export interface WindowLimits {
  readonly maxConcurrent?: number | undefined;
  readonly requestsPerMinute?: number | undefined;
  readonly tokensPerMinute?: number | undefined;
}

/** How a request ended, as a permit's release reports it. */
export type Outcome =
  | { readonly kind: 'ok'; readonly tokens?: number }
  /** 429 or 503: the provider pushed back. */
  | { readonly kind: 'throttled'; readonly retryAfterMs?: number | undefined }
  /** Any other end (an error, a cancel): the permit is returned, the limit unchanged, the request counted. */
  | { readonly kind: 'other' }
  /** The permit was never used (its waiter was cancelled as it was granted): nothing counted. */
  | { readonly kind: 'unsent' };

export const INITIAL_LIMIT = 4;
export const CEILING_HOLD_MS = 60_000;
export const PUSHBACK_PAUSE_MS = 1_000;
/** The longest single `Retry-After` pause honoured (a provider asking for an hour gets a minute, then a probe). */
export const MAX_PAUSE_MS = 60_000;
export const WINDOW_MS = 60_000;
/** Beyond the window, how long a send keeps counting (the way from permit to provider). */
export const SLACK_MS = 500;
/** The least a push-back holds the endpoint (a `Retry-After: 0` too): the answers to requests sent with it arrive meanwhile. */
const MIN_CUT_SETTLE_MS = 100;
const BUCKET_MS = 1_000;

export function newLimitState(limits: WindowLimits): LimitState {
  return { h: {}, w: {}, limit: limits.maxConcurrent ?? INITIAL_LIMIT, round: 0 };
}

/**
 * Admits request `id` when the limits allow it now: records it (a holder, its send counted) and
 * returns 0. Otherwise returns how long until they might (Infinity: until a request in flight ends).
 */
export function admit(state: LimitState, limits: WindowLimits, now: number, id: string, leaseMs: number): number {
  tidy(state, limits, now);
  let wait = Math.max(0, (state.pausedUntil ?? 0) - now);
  const holders = Object.values(state.h);
  if (holders.length >= Math.floor(state.limit)) wait = Number.POSITIVE_INFINITY;
  const rpm = limits.requestsPerMinute;
  if (rpm !== undefined) wait = Math.max(wait, windowWait(state, now, (b) => b.n, 1 - rpm + total(state, (b) => b.n)));
  const tpm = limits.tokensPerMinute;
  const estimate = reservation(state);
  if (tpm !== undefined) {
    const used = total(state, (b) => b.t);
    // Before any usage is known, one probe at a time; a request larger than the budget goes alone.
    if (estimate === undefined && holders.some((h) => h.p === 1)) wait = Number.POSITIVE_INFINITY;
    else if (used > 0) wait = Math.max(wait, windowWait(state, now, (b) => b.t, used + (estimate ?? 0) - tpm));
  }
  if (wait > 0) return wait;
  const second = Math.floor(now / BUCKET_MS);
  const bucket = (state.w[second] ??= { n: 0, t: 0, m: 0, x: 0 });
  const reserve = tpm === undefined ? 0 : (estimate ?? 0);
  bucket.n += 1;
  bucket.t += reserve;
  state.h[id] = { u: now + leaseMs, r: state.round, b: second, k: reserve, ...(tpm !== undefined && estimate === undefined && { p: 1 as const }) };
  return 0;
}

/** Request `id`'s response has begun: the provider serves it. */
export function markServing(state: LimitState, id: string): void {
  const holder = state.h[id];
  if (holder === undefined || holder.s === 1) return;
  holder.s = 1;
  if (state.cut !== undefined) state.cut.peak = Math.max(state.cut.peak, serving(state));
}

/** Request `id` ended: its tokens replace its reservation, and the adaptive limit learns from the outcome. */
export function settle(state: LimitState, limits: WindowLimits, id: string, outcome: Outcome, now: number): void {
  tidy(state, limits, now);
  const holder = state.h[id];
  const inUse = Object.keys(state.h).length;
  delete state.h[id];
  const bucket = holder === undefined ? undefined : state.w[holder.b];
  if (bucket !== undefined && holder !== undefined) {
    if (outcome.kind === 'unsent') {
      bucket.n -= 1;
      bucket.t -= holder.k;
    } else if (outcome.kind === 'ok') {
      const tokens = outcome.tokens ?? 0;
      bucket.t += tokens - holder.k;
      bucket.m = Math.max(bucket.m, tokens);
    } else if (outcome.kind === 'throttled') bucket.t -= holder.k; // refused: no tokens used
  }
  if (outcome.kind === 'ok') state.e = outcome.tokens ?? 0;
  const max = limits.maxConcurrent ?? Number.POSITIVE_INFINITY;
  if (outcome.kind === 'ok') {
    if (holder === undefined) return; // its lease ran out: it no longer counts
    // Grow only a limit that is used (idle capacity proves nothing), and not while a cut is pending.
    if (inUse < Math.floor(state.limit) || state.cut !== undefined) return;
    const cap = state.ceil !== undefined && state.ceil.until > now ? Math.min(max, state.ceil.level) : max;
    const step = state.thr === 1 ? 1 / state.limit : 0.5;
    state.limit = Math.max(state.limit, Math.min(cap, state.limit + step));
    return;
  }
  if (outcome.kind !== 'throttled') return;
  (state.w[Math.floor(now / BUCKET_MS)] ??= { n: 0, t: 0, m: 0, x: 0 }).x += 1;
  state.thr = 1;
  const pause = Math.min(MAX_PAUSE_MS, outcome.retryAfterMs ?? PUSHBACK_PAUSE_MS);
  state.pausedUntil = Math.max(state.pausedUntil ?? 0, now + pause);
  // Push-back from requests sent before the last cut says nothing new about the limit.
  if (holder === undefined || holder.r !== state.round) return;
  state.round += 1;
  state.cut ??= { from: state.limit, peak: serving(state) };
  state.pausedUntil = Math.max(state.pausedUntil, now + MIN_CUT_SETTLE_MS);
}

export interface LimitView {
  readonly limit: number;
  readonly inFlight: number;
  readonly throttledLastMinute: number;
  readonly tokensPerMinute: number;
  readonly requestsPerMinute: number;
  readonly pausedUntil?: number;
}

export function view(state: LimitState, limits: WindowLimits, now: number): LimitView {
  tidy(state, limits, now);
  const from = Math.floor((now - WINDOW_MS) / BUCKET_MS);
  let throttled = 0;
  for (const [second, bucket] of Object.entries(state.w)) if (Number(second) > from) throttled += bucket.x;
  return {
    limit: Math.floor(state.limit),
    inFlight: Object.keys(state.h).length,
    throttledLastMinute: throttled,
    tokensPerMinute: total(state, (b) => b.t),
    requestsPerMinute: total(state, (b) => b.n),
    ...((state.pausedUntil ?? 0) > now && { pausedUntil: state.pausedUntil! }),
  };
}

/** Drops expired leases and buckets, applies a pending cut whose pause is over, keeps the limit under `maxConcurrent`. */
function tidy(state: LimitState, limits: WindowLimits, now: number): void {
  for (const [id, holder] of Object.entries(state.h)) if (holder.u <= now) delete state.h[id];
  for (const second of Object.keys(state.w)) if (expiry(Number(second)) <= now) delete state.w[second];
  if (state.pausedUntil !== undefined && state.pausedUntil <= now) delete state.pausedUntil;
  const pending = state.cut;
  if (pending !== undefined && state.pausedUntil === undefined) {
    delete state.cut;
    const cut = pending.peak > 0 ? Math.min(pending.peak, Math.floor(pending.from * 0.9)) : Math.floor(pending.from / 2);
    state.limit = Math.max(1, cut);
    state.ceil = { level: state.limit, until: now + CEILING_HOLD_MS };
  }
  if (state.ceil !== undefined && state.ceil.until <= now) delete state.ceil;
  if (limits.maxConcurrent !== undefined && state.limit > limits.maxConcurrent) state.limit = limits.maxConcurrent;
}

/** When a bucket stops counting: the window and the slack after the end of its second. */
function expiry(second: number): number {
  return (second + 1) * BUCKET_MS + WINDOW_MS + SLACK_MS;
}

function total(state: LimitState, of: (bucket: Bucket) => number): number {
  let sum = 0;
  for (const bucket of Object.values(state.w)) sum += of(bucket);
  return sum;
}

/** How long until `excess` (> 0) of the window's `of` has expired (0 when nothing is in excess). */
function windowWait(state: LimitState, now: number, of: (bucket: Bucket) => number, excess: number): number {
  if (excess <= 0) return 0;
  let freed = 0;
  const seconds = Object.keys(state.w).map(Number).sort((a, b) => a - b);
  for (const second of seconds) {
    freed += of(state.w[second]!);
    if (freed >= excess) return Math.max(1, expiry(second) - now);
  }
  // Even an empty window is not enough (one request larger than the budget): it goes alone then.
  return seconds.length === 0 ? 0 : Math.max(1, expiry(seconds[seconds.length - 1]!) - now);
}

/** Tokens a request reserves: the largest usage in the window, else the last seen; undefined before any. */
function reservation(state: LimitState): number | undefined {
  let largest: number | undefined;
  for (const bucket of Object.values(state.w)) if (bucket.m > 0) largest = Math.max(largest ?? 0, bucket.m);
  return largest ?? state.e;
}

function serving(state: LimitState): number {
  let count = 0;
  for (const holder of Object.values(state.h)) if (holder.s === 1) count += 1;
  return count;
}
